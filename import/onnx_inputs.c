/* The value table's first values: the graph's initializers (float ones become parameters when first
 * read, the others known values) and its inputs, whose dynamic axes become the graph's symbols, each
 * bound to its import-time prime (onnx_state.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_values.h"

/* The default of symbol `name` from "N=8,T=64"; 1 when not listed. */
static int64_t symbol_default(const char *list, const char *name) {
  size_t length = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t item = end ? (size_t)(end - p) : strlen(p);
    if (item > length && strncmp(p, name, length) == 0 && p[length] == '=') {
      long long value = strtoll(p + length + 1, NULL, 10);
      return value >= 1 ? value : 1;
    }
    p = end ? end + 1 : p + item;
  }
  return 1;
}

static tf_status symbol_for(ox_import *im, const char *name, int32_t *out) {
  for (int32_t s = 0; s < im->n_symbols; s++) {
    const char *known;
    int64_t d, v;
    if (tf_graph_symbol_at(im->graph, s, &known, &d, &v) && strcmp(known, name) == 0) {
      *out = s;
      return NULL;
    }
  }
  if (im->n_symbols == OX_MAX_SYMBOLS)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: more than %d dynamic axes", im->source, OX_MAX_SYMBOLS);
  int32_t s = tf_graph_symbol(im->graph, name, symbol_default(im->options->symbol_defaults, name));
  if (s < 0)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: dynamic axis '%s': %s", im->source, name,
                         tf_status_message(tf_graph_status(im->graph)));
  im->n_symbols++;
  TF_RETURN_IF_ERROR(tf_graph_bind(im->graph, name, ox_symbol_prime(s)));
  *out = s;
  return NULL;
}

/* A graph input for ONNX input `info` (not an initializer). */
static tf_status add_input(ox_import *im, const Onnx__ValueInfoProto *info) {
  const char *name = info->name;
  if (!name || !*name)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: a graph input has no name", im->source);
  if (!info->type || info->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !info->type->tensor_type)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' is not a tensor", im->source, name);
  const Onnx__TypeProto__Tensor *type = info->type->tensor_type;
  tf_dtype dtype;
  const bool is_double = type->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  if (!ox_dtype(type->elem_type, &dtype) || (is_double && !im->options->narrow_float64))
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' has element type %s (%" PRId32 ")%s", im->source, name,
                         ox_dtype_name(type->elem_type), type->elem_type,
                         is_double ? ": tightfit computes in f32 at most (`tightfit import --narrow-float64` takes it "
                                     "as FLOAT)"
                                   : "");
  if (!type->shape)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' has no shape", im->source, name);
  if (type->shape->n_dim > TF_MAX_RANK)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' has rank %zu (at most %d)", im->source, name,
                         type->shape->n_dim, TF_MAX_RANK);
  tf_dim dims[TF_MAX_RANK];
  for (size_t i = 0; i < type->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = type->shape->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 1 &&
        d->dim_value < OX_SYMBOL_PRIME_MIN) {
      dims[i] = tf_fixed(d->dim_value);
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && *d->dim_param) {
      int32_t s = -1;
      TF_RETURN_IF_ERROR(symbol_for(im, d->dim_param, &s));
      dims[i] = tf_sym(s);
    } else {
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: input '%s' axis %zu has no size from 1 to %d and no name (name dynamic axes in "
                           "torch.onnx.export's dynamic_axes)",
                           im->source, name, i, OX_SYMBOL_PRIME_MIN - 1);
    }
  }
  ox_value *v = ox_value_get(im, name);
  if (!v)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory", im->source);
  v->tensor = tf_graph_input(im->graph, name, dtype, tf_shape_from(dims, (int32_t)type->shape->n_dim));
  return ox_graph_error(im, NULL);
}

tf_status ox_add_graph_values(ox_import *im) {
  const Onnx__GraphProto *g = im->onnx;
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    if (!t->name || !*t->name)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: initializer %zu has no name", im->source, i);
    if (ox_value_find(im, t->name))
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: two initializers are named '%s'", im->source, t->name);
    ox_value *v = ox_value_get(im, t->name);
    if (!v)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory", im->source);
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
        t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
        t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16) {
      v->initializer = t;
    } else {
      char what[512];
      snprintf(what, sizeof(what), "%s: initializer '%s'", im->source, t->name);
      TF_RETURN_IF_ERROR(ox_known_from_tensor(t, what, &v->known));
    }
  }
  for (size_t i = 0; i < g->n_input; i++) {
    ox_value *v = g->input[i]->name ? ox_value_find(im, g->input[i]->name) : NULL;
    if (!v || (!v->initializer && !v->known)) /* IR < 4 lists initializers as inputs too */
      TF_RETURN_IF_ERROR(add_input(im, g->input[i]));
  }
  return NULL;
}
