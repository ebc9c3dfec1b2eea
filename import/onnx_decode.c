/* The decode stage: the ONNX protobuf (protobuf-c, C generated from Debian's onnx.proto at build
 * time) into the model, checked for its IR version and opset, and its nodes into im->nodes in the
 * order the file lists them, one writer per value; ONNX element types as tightfit dtypes.
 *
 * Opsets 19 to 21 (what PyTorch 2.9+ exports by default) changed these operators the importer reads
 * (docs/import.md, "Opsets 19 to 21"): new element types only (float8 at 19, int4/uint4 at 21: Cast,
 * Constant, ConstantOfShape, Identity, Reshape, Shape, Size, Flatten, Squeeze, Unsqueeze, Transpose,
 * Pad; refused wherever a tensor of such a type appears, by ox_dtype), Equal of strings (refused, no
 * string type), ReduceMax/ReduceMin of bool (onnx_reduce.c), Pad's `wrap` mode (refused),
 * AveragePool's dilations (refused unless 1), Resize's half_pixel_symmetric coordinates
 * (onnx_resize_linear.c) and Gelu (onnx_elementwise.c). GroupNormalization (whose scale and bias
 * became per channel at 21), IsNaN and IsInf are not read at any opset. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_decode.h"

#define OX_MIN_OPSET 1
#define OX_MAX_OPSET 21

static tf_status check_model(ox_import *im) {
  const Onnx__ModelProto *m = im->model;
  if (!m->graph)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: not an ONNX model: no graph", im->source);
  if (!m->has_ir_version || m->ir_version < 3)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: ONNX IR version %" PRId64 " (3 or newer)", im->source,
                         m->has_ir_version ? m->ir_version : 0);
  im->opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if (ox_default_domain(o->domain))
      im->opset = o->has_version ? o->version : -1;
  }
  if (im->opset < OX_MIN_OPSET || im->opset > OX_MAX_OPSET)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: opset %" PRId64 " of the default domain (supported: %d to %d; %s)",
                         im->source, im->opset, OX_MIN_OPSET, OX_MAX_OPSET,
                         im->opset < 0 ? "the model imports none"
                                       : "export with an opset_version from 7 to 21: torch.onnx.export's default "
                                         "in PyTorch 2.9+, 20, is read; tightfit.from_torch writes 17; opsets 1 "
                                         "to 6 are read where an operator's definition matches opset 7's");
  im->onnx = m->graph;
  return NULL;
}

tf_status ox_decode_model(ox_import *im, const void *data, size_t size) {
  im->model = onnx__model_proto__unpack(NULL, size, data);
  if (!im->model)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: not an ONNX model: the protobuf does not decode (%zu bytes; truncated, or not "
                         "protobuf)",
                         im->source, size);
  return check_model(im);
}

/* ONNX is in SSA form: a second node writing `name` would silently replace the first one's value
 * (and drop that node as dead), so it is refused, naming both nodes. */
static tf_status check_single_writer(ox_import *im, int32_t node, const char *name) {
  int32_t earlier = tf_strmap_get(&im->producers, name);
  if (earlier < 0)
    return NULL;
  char first[512], second[512];
  ox_node_label(&im->nodes[earlier], first, sizeof(first));
  ox_node_label(&im->nodes[node], second, sizeof(second));
  if (earlier == node)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s lists output '%s' twice (each tensor has one writer)",
                         im->source, first, name);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: tensor '%s' is written by two nodes, %s (node %" PRId32 ") and %s (node %" PRId32
                       "); ONNX allows one writer per tensor",
                       im->source, name, first, earlier, second, node);
}

tf_status ox_decode_nodes(ox_import *im) {
  const Onnx__GraphProto *g = im->onnx;
  if (g->n_node > (size_t)INT32_MAX / 2)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: too many nodes", im->source);
  im->nodes = calloc(g->n_node ? g->n_node : 1, sizeof(ox_node));
  if (!im->nodes)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for %zu nodes", im->source, g->n_node);
  im->n_nodes = (int32_t)g->n_node;
  for (int32_t i = 0; i < im->n_nodes; i++) {
    ox_node *node = &im->nodes[i];
    node->proto = g->node[i];
    node->inputs = (const char *const *)node->proto->input;
    node->n_inputs = (int32_t)(node->proto->n_input < 4096 ? node->proto->n_input : 4096);
    if (!node->proto->op_type)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: node %" PRId32 " has no operator type", im->source, i);
    for (size_t j = 0; j < node->proto->n_output; j++) {
      const char *out = node->proto->output[j];
      if (!out || !*out)
        continue;
      TF_RETURN_IF_ERROR(check_single_writer(im, i, out));
      if (!tf_strmap_put(&im->producers, out, i))
        return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory", im->source);
    }
  }
  return NULL;
}

bool ox_dtype(int32_t type, tf_dtype *out) {
  switch (type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = TF_F32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = TF_F16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = TF_BF16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = TF_I32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = TF_I64; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = TF_U8; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = TF_U8; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = TF_F32; return true; /* constants only: narrowed */
  default: return false;
  }
}

const char *ox_dtype_name(int32_t type) {
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&onnx__tensor_proto__data_type__descriptor, type);
  if (v)
    return v->name;
  /* The types of onnx.proto versions after Debian's (1.12, which ends at BFLOAT16): the float8 of
   * opset 19, the int4 of opset 21, the float4 of opset 23. */
  static const char *const newer[] = {"FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                      "UINT4",        "INT4",           "FLOAT4E2M1"};
  return type >= 17 && type < 17 + (int32_t)(sizeof(newer) / sizeof(newer[0])) ? newer[type - 17] : "unknown";
}
