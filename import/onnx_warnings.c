/* tf_onnx_export_warnings: what an eval-mode torch.onnx.export changed in a model, read from the
 * ONNX file alone. Two marks are sound:
 *
 * - An Identity node whose input is a float initializer: torch's eval-mode export deduplicates
 *   initializers by value, so every fresh LayerNorm's weight of ones (and the layers of a
 *   TransformerEncoder, deep copies of one layer) becomes one initializer read through Identity
 *   nodes; the importer keeps such a tie, and the merged parameters train as one. A training-mode
 *   export deduplicates by storage and leaves no Identity (a real tie reads one initializer).
 * - A float initializer whose name the exporter generated (`onnx::Conv_16`; bare numbers before
 *   torch 1.12) read as a Conv, ConvTranspose, Gemm or MatMul weight: the exporter computed it from
 *   parameters: a BatchNorm folded into a convolution (eval mode, even without constant folding),
 *   a Linear's weight transposed by constant folding. It trains as a new parameter, not as the
 *   module's; one whose values are another initializer's (or its transpose) is a tie the export broke.
 *
 * Anything else that merely looks alike (two initializers of equal values: fresh LayerNorms in a
 * training-mode export) is the model as written, and says nothing. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "import/onnx_values.h"

/* How many names a warning lists before "and N more". */
#define OX_WARN_LISTED 4

typedef struct warn_text {
  char *text;
  size_t length, capacity;
  bool out_of_memory;
} warn_text;

static void add_text(warn_text *w, const char *fmt, ...) TF_PRINTF(2, 3);
static void add_text(warn_text *w, const char *fmt, ...) {
  va_list args, copy;
  va_start(args, fmt);
  va_copy(copy, args);
  int needed = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (needed > 0 && !w->out_of_memory && w->length + (size_t)needed + 1 > w->capacity) {
    size_t capacity = (w->length + (size_t)needed + 1) * 2;
    char *grown = realloc(w->text, capacity);
    if (grown) {
      w->text = grown;
      w->capacity = capacity;
    } else {
      w->out_of_memory = true;
    }
  }
  if (needed > 0 && !w->out_of_memory) {
    vsnprintf(w->text + w->length, (size_t)needed + 1, fmt, args);
    w->length += (size_t)needed;
  }
  va_end(args);
}

/* "<separator>and N more" when `count` is over what a warning lists, else "". */
static void more_text(int32_t count, const char *separator, char *out, size_t size) {
  if (count > OX_WARN_LISTED)
    snprintf(out, size, "%sand %" PRId32 " more", separator, count - OX_WARN_LISTED);
  else
    out[0] = '\0';
}

static bool is_float_type(int32_t type) {
  return type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
         type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

/* The float initializer named `name`, or NULL. */
static const Onnx__TensorProto *float_initializer(const Onnx__GraphProto *g, const char *name) {
  for (size_t i = 0; name && i < g->n_initializer; i++)
    if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
      return is_float_type(g->initializer[i]->data_type) ? g->initializer[i] : NULL;
  return NULL;
}

/* A name torch's exporter made up for a value it computed: "onnx::Conv_16", or a bare number. */
static bool generated_name(const char *name) {
  if (!name || !*name)
    return false;
  if (strncmp(name, "onnx::", 6) == 0)
    return true;
  for (const char *c = name; *c; c++)
    if (*c < '0' || *c > '9')
      return false;
  return true;
}

static const char *node_name(const Onnx__NodeProto *node) {
  return node->name && *node->name ? node->name : node->output && node->n_output ? node->output[0] : "?";
}

/* Identity nodes reading a float initializer: "'out' is 'in'" for each, listed. */
static void identity_ties(const Onnx__GraphProto *g, warn_text *w) {
  int32_t count = 0;
  char listed[1024] = "";
  size_t used = 0;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *node = g->node[i];
    if (!node->op_type || strcmp(node->op_type, "Identity") != 0 || node->n_input < 1 || node->n_output < 1 ||
        !float_initializer(g, node->input[0]))
      continue;
    if (count < OX_WARN_LISTED && used < sizeof(listed))
      used += (size_t)snprintf(listed + used, sizeof(listed) - used, "%s'%s' is '%s'", count ? ", " : "",
                               node->output[0], node->input[0]);
    count++;
  }
  if (count == 0)
    return;
  char more[48];
  more_text(count, ", ", more, sizeof(more));
  add_text(w,
           "%" PRId32 " parameter%s tied to another initializer through Identity nodes (%s%s): an eval-mode export "
           "merges parameters of equal value (fresh LayerNorms, the copied layers of a TransformerEncoder), and the "
           "merged ones import and train as one parameter\n",
           count, count == 1 ? "" : "s", listed, more);
}

/* True when a and b hold the same values: as they are, or (transposed) as a's 2-d transpose. */
static bool same_values(const Onnx__TensorProto *a, const Onnx__TensorProto *b, bool transposed) {
  if (a->n_dims != b->n_dims || (transposed && a->n_dims != 2))
    return false;
  for (size_t i = 0; i < a->n_dims; i++)
    if (a->dims[i] != b->dims[transposed ? a->n_dims - 1 - i : i])
      return false;
  ox_known *x = NULL, *y = NULL;
  tf_status sx = ox_known_from_tensor(a, "a", &x);
  tf_status sy = sx ? NULL : ox_known_from_tensor(b, "b", &y);
  bool same = !sx && !sy && x->count == y->count && x->count > 1;
  const int64_t cols = transposed ? a->dims[1] : 1;
  for (int64_t e = 0; same && e < x->count; e++) {
    const int64_t f = transposed ? (e % cols) * a->dims[0] + e / cols : e;
    same = x->reals[e] == y->reals[f];
  }
  tf_status_free(sx);
  tf_status_free(sy);
  ox_known_free(x);
  ox_known_free(y);
  return same;
}

/* ", a copy of 'name'" (or "of the transpose of") when another, non-generated float initializer holds
 * the values of `t`. */
static void copy_of(const Onnx__GraphProto *g, const Onnx__TensorProto *t, char *out, size_t size) {
  out[0] = '\0';
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *other = g->initializer[i];
    if (other == t || !is_float_type(other->data_type) || generated_name(other->name))
      continue;
    for (int transposed = 0; transposed < 2; transposed++) {
      if (same_values(t, other, transposed)) {
        snprintf(out, size, " (a copy of %s'%s': a tie the export broke, the two train apart)",
                 transposed ? "the transpose of " : "", other->name);
        return;
      }
    }
  }
}

/* Weights the exporter computed, read by Conv/ConvTranspose (BatchNorm folded) or Gemm/MatMul
 * (constant folding). */
static void computed_weights(const Onnx__GraphProto *g, warn_text *w) {
  bool has_batch_norm = false;
  for (size_t i = 0; i < g->n_node; i++)
    has_batch_norm |= g->node[i]->op_type && strcmp(g->node[i]->op_type, "BatchNormalization") == 0;
  int32_t convolutions = 0, products = 0;
  char conv_list[1024] = "", product_list[2048] = "";
  size_t conv_used = 0, product_used = 0;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *node = g->node[i];
    const char *op = node->op_type ? node->op_type : "";
    const bool conv = strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0;
    const bool product = strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0;
    if (!conv && !product)
      continue;
    char names[512] = "";
    size_t used = 0;
    int32_t found = 0;
    for (size_t k = product && strcmp(op, "MatMul") == 0 ? 0 : 1; k < node->n_input && k < 3; k++) {
      const Onnx__TensorProto *t = float_initializer(g, node->input[k]);
      if (!t || !generated_name(t->name) || t->n_dims == 0)
        continue;
      char copy[300];
      copy_of(g, t, copy, sizeof(copy));
      if (used < sizeof(names))
        used += (size_t)snprintf(names + used, sizeof(names) - used, "%s'%s'%s", found ? ", " : "", t->name, copy);
      found++;
    }
    if (!found)
      continue;
    int32_t *count = conv ? &convolutions : &products;
    char *list = conv ? conv_list : product_list;
    size_t *list_used = conv ? &conv_used : &product_used;
    size_t list_size = conv ? sizeof(conv_list) : sizeof(product_list);
    if (*count < OX_WARN_LISTED && *list_used < list_size)
      *list_used += (size_t)snprintf(list + *list_used, list_size - *list_used, "%s%s '%s' reads %s",
                                     *count ? "; " : "", op, node_name(node), names);
    (*count)++;
  }
  char more[48];
  if (convolutions) {
    more_text(convolutions, "; ", more, sizeof(more));
    add_text(w,
             "%" PRId32 " convolution%s read%s weights the exporter computed, not module parameters (%s%s): %s "
             "folded into %s by an eval-mode export; %s train%s as new parameters%s\n",
             convolutions, convolutions == 1 ? "" : "s", convolutions == 1 ? "s" : "", conv_list, more,
             has_batch_norm ? "a BatchNorm (or another computation on the parameters)" : "a BatchNorm",
             convolutions == 1 ? "it" : "them", convolutions == 1 ? "it" : "they", convolutions == 1 ? "s" : "",
             has_batch_norm ? "" : ", and the file has no BatchNormalization node left");
  }
  if (products) {
    more_text(products, "; ", more, sizeof(more));
    add_text(w,
             "%" PRId32 " matrix product%s read%s weights the exporter computed, not module parameters (%s%s): "
             "constant folding made them (a Linear's weight transposed into a new initializer), and they train "
             "under those names instead of the module's\n",
             products, products == 1 ? "" : "s", products == 1 ? "s" : "", product_list, more);
  }
}

tf_status tf_onnx_export_warnings(const char *onnx_path, char **warnings) {
  *warnings = NULL;
  if (!onnx_path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_onnx_export_warnings: no path");
  void *data;
  size_t size;
  TF_RETURN_IF_ERROR(tf_file_read_bounded(onnx_path, OX_MAX_FILE_BYTES, "ONNX files", &data, &size));
  Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, size, data);
  free(data);
  if (!model || !model->graph) {
    if (model)
      onnx__model_proto__free_unpacked(model, NULL);
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: not an ONNX model: the protobuf does not decode", onnx_path);
  }
  warn_text w = {NULL, 0, 0, false};
  identity_ties(model->graph, &w);
  computed_weights(model->graph, &w);
  if (w.length)
    add_text(&w, "to import the model as it is, export with training=torch.onnx.TrainingMode.PRESERVE, the top-level "
                 "module's training flag True and do_constant_folding=False, as tightfit.from_torch does "
                 "(docs/import.md, \"Exporting the model as it is\")\n");
  onnx__model_proto__free_unpacked(model, NULL);
  if (w.out_of_memory) {
    free(w.text);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for the export's warnings", onnx_path);
  }
  *warnings = w.text;
  return NULL;
}
