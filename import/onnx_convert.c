/* What the converters share: reading a node's inputs as graph tensors or known values, storing its
 * outputs, scalar constants, and the dtype and shape of what the builder made. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "import/onnx_convert.h"

bool ox_is_known(ox_import *im, const char *name) {
  ox_value *v = name ? ox_value_find(im, name) : NULL;
  return v && v->known && v->tensor == TF_NO_TENSOR;
}

const ox_known *ox_foldable(ox_import *im, const ox_node *node, int32_t i) {
  const char *name = ox_input(node, i);
  ox_value *v = name ? ox_value_find(im, name) : NULL;
  return v && v->known && v->tensor == TF_NO_TENSOR && !v->initializer ? v->known : NULL;
}

/* Output `i` becomes graph tensor `id` (renamed to the ONNX name when it is a graph output). */
tf_status ox_set_tensor(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id id) {
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  if ((size_t)i >= node->proto->n_output)
    return NULL;
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  if (!v)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  v->tensor = id;
  return NULL;
}

tf_status ox_set_empty(ox_import *im, const ox_node *node, int32_t i, tf_dtype dtype, int32_t rank,
                       const tf_dim *dims) {
  if ((size_t)i >= node->proto->n_output)
    return NULL;
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  ox_empty *empty = v && !v->empty ? calloc(1, sizeof(*empty)) : NULL;
  if (!empty)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  empty->dtype = dtype;
  empty->rank = rank;
  for (int32_t d = 0; d < rank; d++)
    empty->dims[d] = dims[d];
  v->empty = empty;
  return NULL;
}

const ox_empty *ox_empty_input(ox_import *im, const ox_node *node, int32_t i) {
  const char *name = ox_input(node, i);
  const ox_value *v = name ? ox_value_find(im, name) : NULL;
  return v ? v->empty : NULL;
}

tf_status ox_set_known(ox_import *im, const ox_node *node, int32_t i, ox_known *k) {
  if ((size_t)i < node->proto->n_output && k->count > ox_fold_room(im)) {
    const int64_t count = k->count;
    ox_known_free(k);
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "the values computed at import pass %" PRId64 " elements in all (this one: %" PRId64
                   "); the importer folds shape data and small tables: export with dynamic axes (docs/import.md)",
                   ox_fold_budget(im), count);
  }
  im->folded_elements += k->count;
  return ox_set_read(im, node, i, k);
}

tf_status ox_set_read(ox_import *im, const ox_node *node, int32_t i, ox_known *k) {
  if ((size_t)i >= node->proto->n_output) {
    ox_known_free(k);
    return NULL;
  }
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  if (!v) {
    ox_known_free(k);
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  ox_known_free(v->known);
  v->known = k;
  return NULL;
}

tf_status ox_tensor_of(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *id) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  return ox_tensor(im, node, ox_input(node, i), id);
}

tf_status ox_known_of(ox_import *im, const ox_node *node, int32_t i, const ox_known **k) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  return ox_need_known(im, node, ox_input(node, i), k);
}

/* The rank of a graph tensor after inference. */
int32_t ox_rank_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  return tf_graph_tensor(im->graph, id, &info) ? info.rank : 0;
}

tf_dtype ox_dtype_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  return tf_graph_tensor(im->graph, id, &info) ? info.dtype : TF_F32;
}

/* Known integers of input i as plain numbers (no symbols), at most max. */
tf_status ox_fixed_ints(ox_import *im, const ox_node *node, int32_t i, int64_t *out, int32_t max, int32_t *n) {
  const ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, i, &k));
  if (k->is_float || k->count > max)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " must hold at most %" PRId32 " integers", i, max);
  for (int64_t j = 0; j < k->count; j++) {
    if (k->ints[j].symbol >= 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input %" PRId32 " element %" PRId64 " is a symbolic size", i, j);
    out[j] = k->ints[j].size;
  }
  *n = (int32_t)k->count;
  return NULL;
}

bool ox_fill_value(ox_import *im, tf_tensor_id t, double *value) {
  tf_tensor_info info;
  if (t == TF_NO_TENSOR || !tf_graph_tensor(im->graph, t, &info) || info.kind != TF_CONSTANT ||
      info.init.kind != TF_INIT_FILL)
    return false;
  *value = info.init.a;
  return true;
}

/* A scalar constant of `dtype` holding `value`, named after the node. */
tf_tensor_id ox_scalar(ox_import *im, const ox_node *node, tf_dtype dtype, double value) {
  char name[300];
  int counter = 0;
  do
    snprintf(name, sizeof(name), "%s.const%d", node->proto->output[0], counter++);
  while (tf_graph_find_tensor(im->graph, name) != TF_NO_TENSOR);
  tf_shape shape = {0};
  return tf_graph_constant(im->graph, name, dtype, shape, tf_init_make(TF_INIT_FILL, value, 0));
}

/* Operand i of an elementwise op whose other operand is tensor `other`: a known scalar becomes a
 * constant of the other's dtype. */
tf_status ox_operand(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id other, tf_tensor_id *id) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  const char *name = ox_input(node, i);
  if (ox_is_known(im, name) && other != TF_NO_TENSOR) {
    const ox_known *k = ox_value_find(im, name)->known;
    if (k->count == 1 && (k->is_float || k->ints[0].symbol < 0)) {
      *id = ox_scalar(im, node, ox_dtype_of(im, other), k->is_float ? k->reals[0] : (double)k->ints[0].size);
      return ox_graph_error(im, node);
    }
  }
  return ox_tensor(im, node, name, id);
}

static bool is_half_dtype(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

/* Operands of one op in f32 and in f16/bf16: the f32 one is cast to the half type. ONNX wants one
 * type, yet PyTorch 1.13 exports a bf16 model's `scores / sqrt(d)` with a shape-derived f32 scale as
 * Cast(scores, float) -> Div -> Softmax in f32, then MatMul with the bf16 values (eager PyTorch
 * computes that product in bf16), and a decomposed bf16 LayerNorm with f32 scale and shift. Other
 * mismatches are left to the builder's error. */
bool ox_is_integer_dtype(tf_dtype dtype) { return dtype == TF_I32 || dtype == TF_I64 || dtype == TF_U8; }

void ox_match_half(ox_import *im, tf_tensor_id *a, tf_tensor_id *b) {
  tf_tensor_info x, y;
  if (!tf_graph_tensor(im->graph, *a, &x) || !tf_graph_tensor(im->graph, *b, &y))
    return;
  if (x.dtype == TF_F32 && is_half_dtype(y.dtype))
    *a = tf_cast(im->graph, *a, y.dtype);
  else if (y.dtype == TF_F32 && is_half_dtype(x.dtype))
    *b = tf_cast(im->graph, *b, x.dtype);
}

tf_status ox_input_dims(ox_import *im, const ox_node *node, int32_t *rank, tf_dim *dims) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_empty *empty = ox_empty_input(im, node, 0);
  if (empty) {
    *rank = empty->rank;
    for (int32_t i = 0; i < empty->rank; i++)
      dims[i] = empty->dims[i];
    return NULL;
  }
  if (ox_is_known(im, ox_input(node, 0))) {
    const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
    *rank = x->rank;
    for (int32_t i = 0; i < x->rank; i++)
      dims[i] = tf_fixed(x->shape[i]);
    return NULL;
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  ox_tensor_dims(im, x, rank, dims);
  return NULL;
}
