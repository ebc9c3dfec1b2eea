/* ONNX values: decoding tensors into known values, turning initializers into parameters and known
 * values into constants on first use, and reading a tensor's symbolic shape back from the builder. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half_bits.h"
#include "graph/ir.h"
#include "import/onnx_values.h"

ox_value *ox_value_find(ox_import *im, const char *name) {
  int32_t index = tf_strmap_get(&im->value_ids, name);
  return index < 0 ? NULL : &im->values[index];
}

ox_value *ox_value_get(ox_import *im, const char *name) {
  ox_value *found = ox_value_find(im, name);
  if (found)
    return found;
  if (im->n_values == im->cap_values) {
    int32_t capacity = im->cap_values ? im->cap_values * 2 : 64;
    ox_value *grown = realloc(im->values, (size_t)capacity * sizeof(ox_value));
    if (!grown)
      return NULL;
    im->values = grown;
    im->cap_values = capacity;
    // The map holds names, not pointers, so growing the array keeps it valid.
  }
  ox_value *v = &im->values[im->n_values];
  memset(v, 0, sizeof(*v));
  v->name = name;
  v->tensor = TF_NO_TENSOR;
  if (!tf_strmap_put(&im->value_ids, name, im->n_values))
    return NULL;
  im->n_values++;
  return v;
}

ox_known *ox_known_new(bool is_float, tf_dtype dtype, int32_t rank, const int64_t *shape) {
  if (rank < 0 || rank > TF_MAX_RANK)
    return NULL;
  int64_t count = 1;
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0 || (shape[i] > 0 && count > OX_MAX_KNOWN_ELEMENTS / shape[i]))
      return NULL;
    count *= shape[i];
  }
  ox_known *k = calloc(1, sizeof(ox_known));
  if (!k)
    return NULL;
  k->is_float = is_float;
  k->dtype = dtype;
  k->rank = rank;
  for (int32_t i = 0; i < rank; i++)
    k->shape[i] = shape[i];
  k->count = count;
  size_t n = (size_t)(count ? count : 1);
  if (is_float)
    k->reals = calloc(n, sizeof(double));
  else
    k->ints = calloc(n, sizeof(tf_dim));
  if (!k->reals && !k->ints) {
    free(k);
    return NULL;
  }
  for (int64_t i = 0; !is_float && i < count; i++)
    k->ints[i] = tf_fixed(0);
  return k;
}

tf_status ox_known_refusal(int32_t rank, const int64_t *shape, const char *what) {
  char dims[TF_MAX_RANK * 24 + 4] = "[";
  size_t at = 1;
  bool over = rank < 0 || rank > TF_MAX_RANK;
  for (int32_t i = 0, n = over ? 0 : rank; i < n; i++) {
    at += (size_t)snprintf(dims + at, sizeof(dims) - at, "%s%" PRId64, i ? "," : "", shape[i]);
    over = over || shape[i] < 0;
  }
  snprintf(dims + at, sizeof(dims) - at, "]");
  if (over)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s computed at import would have the shape %s", what, dims);
  double count = 1;
  for (int32_t i = 0; i < rank; i++)
    count *= (double)shape[i];
  if (count > (double)OX_MAX_KNOWN_ELEMENTS)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "%s computed at import would be %s (%.0f elements); the importer folds shape data and "
                         "tables of at most %" PRId64 " elements: export with dynamic axes (docs/import.md)",
                         what, dims, count, OX_MAX_KNOWN_ELEMENTS);
  return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for %s %s", what, dims);
}

tf_status ox_known_within(bool is_float, tf_dtype dtype, int32_t rank, const int64_t *shape, int64_t room,
                          const char *what, ox_known **out) {
  *out = NULL;
  double count = 1;
  for (int32_t i = 0; i < rank && i < TF_MAX_RANK; i++)
    count *= shape[i] > 0 ? (double)shape[i] : 0;
  if (count > (double)room && count <= (double)OX_MAX_KNOWN_ELEMENTS)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "%s computed at import would hold %.0f elements, more than the %" PRId64
                         " left of what the importer computes for this file (shape data and small tables, %" PRId64
                         " elements in all, or one per byte of the file): export with dynamic axes "
                         "(docs/import.md)",
                         what, count, room < 0 ? 0 : room, OX_MAX_FOLDED_ELEMENTS);
  *out = ox_known_new(is_float, dtype, rank, shape);
  return *out ? NULL : ox_known_refusal(rank, shape, what);
}

int64_t ox_fold_budget(const ox_import *im) {
  return im->file_bytes > OX_MAX_FOLDED_ELEMENTS ? im->file_bytes : OX_MAX_FOLDED_ELEMENTS;
}

int64_t ox_fold_room(const ox_import *im) { return ox_fold_budget(im) - im->folded_elements; }

void ox_known_free(ox_known *known) {
  if (!known)
    return;
  free(known->ints);
  free(known->reals);
  free(known);
}

static bool is_half_type(int32_t type) {
  return type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

/* An f16/bf16 value from its 16 bits, widened exactly. */
static float half_value(int32_t type, uint16_t bits) {
  uint32_t wide =
      type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16 ? tf_f32_bits_from_bf16(bits) : tf_f32_bits_from_f16(bits);
  float f;
  memcpy(&f, &wide, 4);
  return f;
}

/* Element `i` of `size`-byte little-endian raw data as a double or an integer. */
static double raw_real(const uint8_t *raw, int32_t type, int64_t i) {
  if (is_half_type(type)) {
    uint16_t bits;
    memcpy(&bits, raw + i * 2, 2);
    return half_value(type, bits);
  }
  if (type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
    double d;
    memcpy(&d, raw + i * 8, 8);
    return d;
  }
  float f;
  memcpy(&f, raw + i * 4, 4);
  return f;
}

static int64_t raw_int(const uint8_t *raw, int32_t type, int64_t i) {
  switch (type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: {
    int64_t v;
    memcpy(&v, raw + i * 8, 8);
    return v;
  }
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
    int32_t v;
    memcpy(&v, raw + i * 4, 4);
    return v;
  }
  default: return raw[i]; /* UINT8, BOOL */
  }
}

static int64_t element_bytes(int32_t type) {
  switch (type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 4;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return 8;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return 2;
  default: return 0;
  }
}

/* How to export a model whose weights the file does not hold. */
#define OX_ONE_FILE                                                                                                    \
  "export the model in one file, under 2 GiB: PyTorch 2.x's torch.onnx.export writes the weights beside it "           \
  "unless given external_data=False"

tf_status ox_known_from_tensor(const Onnx__TensorProto *t, const char *what, ox_known **out) {
  *out = NULL;
  int32_t type = t->data_type;
  tf_dtype dtype;
  if (!ox_dtype(type, &dtype))
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: element type %s (%" PRId32 ") is not supported", what,
                         ox_dtype_name(type), type);
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: data in an external file is not supported (%s)", what, OX_ONE_FILE);
  if (t->n_dims > TF_MAX_RANK)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: rank %zu is over tightfit's %d", what, t->n_dims, TF_MAX_RANK);
  int64_t shape[TF_MAX_RANK];
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: dimension %zu is %" PRId64, what, i, t->dims[i]);
    shape[i] = t->dims[i];
  }
  bool is_float = type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                  is_half_type(type);
  // The element count is checked against the data present before anything is allocated for it.
  int64_t count = 1, bytes = element_bytes(type);
  for (size_t i = 0; i < t->n_dims; i++) {
    if (shape[i] > 0 && count > ((int64_t)1 << 40) / shape[i])
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: too many elements", what);
    count *= shape[i];
  }
  // f16 and bf16 values without raw data are the low 16 bits of int32_data (onnx.proto).
  size_t typed = is_half_type(type) ? t->n_int32_data
                 : is_float ? (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? t->n_float_data : t->n_double_data)
                 : type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? t->n_int64_data
                                                                : t->n_int32_data;
  if (t->has_raw_data && (int64_t)t->raw_data.len != count * bytes)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: raw data has %zu bytes, its shape needs %" PRId64, what,
                         t->raw_data.len, count * bytes);
  if (!t->has_raw_data && (int64_t)typed != count)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %zu values, its shape needs %" PRId64, what, typed, count);
  ox_known *k = ox_known_new(is_float, dtype, (int32_t)t->n_dims, shape);
  if (!k)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for %" PRId64 " elements", what, count);
  for (int64_t i = 0; i < count; i++) {
    if (t->has_raw_data) {
      if (is_float)
        k->reals[i] = raw_real(t->raw_data.data, type, i);
      else
        k->ints[i] = tf_fixed(raw_int(t->raw_data.data, type, i));
    } else if (is_half_type(type)) {
      k->reals[i] = half_value(type, (uint16_t)t->int32_data[i]);
    } else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
      k->reals[i] = t->float_data[i];
    } else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
      k->reals[i] = t->double_data[i];
    } else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
      k->ints[i] = tf_fixed(t->int64_data[i]);
    } else {
      k->ints[i] = tf_fixed(t->int32_data[i]);
    }
  }
  *out = k;
  return NULL;
}

/* The symbol whose import-time prime `value` is a small multiple of (times the prime, fewer times than
 * OX_SYMBOL_PRIME_MIN: ox_tensor_dims' rule, shared with the messages), or -1. */
static int32_t symbol_of_size(const ox_import *im, int64_t value, int64_t *times) {
  for (int32_t s = 0; s < im->n_symbols && value >= OX_SYMBOL_PRIME_MIN; s++) {
    int64_t prime = ox_symbol_prime(s);
    if (value % prime == 0 && value / prime < OX_SYMBOL_PRIME_MIN) {
      *times = value / prime;
      return s;
    }
  }
  return -1;
}

/* `text` with each size of a symbol's import-time prime written as the symbol ("[100003,6]" ->
 * "[N,6]", "600018 elements" -> "6N elements"); returns whether it wrote one. */
static bool sizes_as_symbols(const ox_import *im, const char *text, char *out, size_t size) {
  size_t used = 0;
  bool wrote = false;
  for (const char *p = text; *p && used + 1 < size;) {
    bool starts_number = isdigit((unsigned char)*p) && (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'));
    if (!starts_number) {
      out[used++] = *p++;
      continue;
    }
    char *end;
    long long value = strtoll(p, &end, 10);
    int64_t times = 0;
    int32_t s = isalnum((unsigned char)*end) || *end == '_' ? -1 : symbol_of_size(im, value, &times);
    const char *name;
    int64_t default_value, bound;
    if (s >= 0 && tf_graph_symbol_at(im->graph, s, &name, &default_value, &bound)) {
      int n = times == 1 ? snprintf(out + used, size - used, "%s", name)
                         : snprintf(out + used, size - used, "%" PRId64 "%s", times, name);
      used = n > 0 && (size_t)n < size - used ? used + (size_t)n : size - 1;
      wrote = true;
    } else {
      size_t length = (size_t)(end - p) < size - 1 - used ? (size_t)(end - p) : size - 1 - used;
      memcpy(out + used, p, length);
      used += length;
    }
    p = end;
  }
  out[used] = '\0';
  return wrote;
}

/* Whether a builder's message is about two shapes that do not fit together (not a dtype's). */
static bool about_shapes(const char *message) {
  static const char *const phrases[] = {"differ", "must have the shape", "broadcast", "match", "not a multiple"};
  for (size_t i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++)
    if (strstr(message, phrases[i]))
      return true;
  return false;
}

tf_status ox_graph_error(ox_import *im, const ox_node *node) {
  const struct tf_status_s *error = tf_graph_status(im->graph);
  if (!error)
    return NULL;
  char label[256], message[2048];
  bool symbolic = sizes_as_symbols(im, tf_status_message(error), message, sizeof(message));
  return tf_status_new(tf_status_code(error), "%s: %s: %s%s", im->source, ox_node_label(node, label, sizeof(label)),
                       message,
                       symbolic && about_shapes(message)
                           ? " (a dynamic axis meets a fixed size here: where the exported module read that "
                             "axis's size as a number, say len(x) or x.shape[0] passed on as an int, the trace "
                             "froze it; export with that axis fixed: from_torch(..., dynamic_batch=False), or "
                             "torch.onnx.export without it in dynamic_axes)"
                           : "");
}

tf_status ox_need_known(ox_import *im, const ox_node *node, const char *name, const ox_known **out) {
  ox_value *v = ox_value_find(im, name);
  char label[256];
  if (v && !v->known && v->initializer) {
    char what[512];
    snprintf(what, sizeof(what), "%s: initializer '%s'", im->source, name);
    TF_RETURN_IF_ERROR(ox_known_from_tensor(v->initializer, what, &v->known));
  }
  if (!v || !v->known)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "%s: %s: input '%s' must be known when importing (a constant, or computed from "
                         "shapes), but it is computed from the data",
                         im->source, ox_node_label(node, label, sizeof(label)), name);
  *out = v->known;
  return NULL;
}

/* Adds a weights-file entry for `name` and returns the init that references it. */
static tf_status add_weights(ox_import *im, const char *name, tf_dtype dtype, int32_t rank, const int64_t *shape,
                             const void *data, void *owned, tf_init *init) {
  if (im->n_weights == im->cap_weights) {
    int32_t capacity = im->cap_weights ? im->cap_weights * 2 : 32;
    ox_weight *grown = realloc(im->weights, (size_t)capacity * sizeof(ox_weight));
    if (!grown) {
      free(owned);
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for the weights list", im->source);
    }
    im->weights = grown;
    im->cap_weights = capacity;
  }
  ox_weight *w = &im->weights[im->n_weights++];
  memset(w, 0, sizeof(*w));
  w->name = name;
  w->dtype = dtype;
  w->rank = rank;
  for (int32_t i = 0; i < rank; i++)
    w->shape[i] = shape[i];
  w->data = data;
  w->owned = owned;
  *init = (tf_init){TF_INIT_EXTERNAL, 0, 0, im->weights_ref, name};
  return NULL;
}

/* The f32 values of an f16/bf16 initializer (count of them), widened exactly; NULL with *status. */
static float *widen_half(const Onnx__TensorProto *t, int64_t count, const char *what, tf_status *status) {
  *status = NULL;
  const bool raw = t->has_raw_data;
  if (raw ? (int64_t)t->raw_data.len != count * 2 : (int64_t)t->n_int32_data != count) {
    *status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: %zu %s, its shape needs %" PRId64 " 16-bit values", what,
                            raw ? t->raw_data.len : t->n_int32_data, raw ? "bytes of raw data" : "values", count);
    return NULL;
  }
  float *data = malloc((size_t)(count ? count : 1) * sizeof(float));
  if (!data) {
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for its values", what);
    return NULL;
  }
  for (int64_t i = 0; i < count; i++)
    data[i] =
        raw ? (float)raw_real(t->raw_data.data, t->data_type, i) : half_value(t->data_type, (uint16_t)t->int32_data[i]);
  return data;
}

/* A parameter for float initializer `t`, its values referenced in the weights file. An f16/bf16
 * initializer becomes an f32 parameter (its values widened exactly: the master weights training
 * updates) read through a cast to its own type, so the graph's ops see the model's dtype. */
static tf_status make_parameter(ox_import *im, const ox_node *node, ox_value *v) {
  const Onnx__TensorProto *t = v->initializer;
  char what[512];
  snprintf(what, sizeof(what), "%s: initializer '%s'", im->source, v->name);
  if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && !is_half_type(t->data_type)) {
    // Integer initializers are known values; only float ones are trained.
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_known_from_tensor(t, what, &k));
    v->known = k;
    v->initializer = NULL;
    return ox_tensor(im, node, v->name, &v->tensor);
  }
  if (t->n_dims > TF_MAX_RANK)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: rank %zu is over tightfit's %d", what, t->n_dims, TF_MAX_RANK);
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: data in an external file is not supported (%s)", what, OX_ONE_FILE);
  int32_t rank = (int32_t)t->n_dims;
  int64_t shape[TF_MAX_RANK], count = 1;
  tf_dim dims[TF_MAX_RANK];
  for (int32_t i = 0; i < rank; i++) {
    shape[i] = t->dims[i];
    if (shape[i] < 1 || count > ((int64_t)1 << 40) / shape[i])
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s: dimension %" PRId32 " is %" PRId64 " (parameters need sizes "
                           "of at least 1, and at most 2^40 elements)",
                           what, i, shape[i]);
    count *= shape[i];
    dims[i] = tf_fixed(shape[i]);
  }
  // Copied straight from the model as f32: a parameter never passes through the doubles of ox_known.
  bool raw = t->has_raw_data;
  float *data = NULL;
  tf_dtype half;
  if (is_half_type(t->data_type)) {
    tf_status status;
    data = widen_half(t, count, what, &status);
    TF_RETURN_IF_ERROR(status);
  } else {
    if (raw ? (int64_t)t->raw_data.len != count * 4 : (int64_t)t->n_float_data != count)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %zu %s, its shape needs %" PRId64 " floats", what,
                           raw ? t->raw_data.len : t->n_float_data, raw ? "bytes of raw data" : "values", count);
    data = malloc((size_t)count * sizeof(float));
    if (!data)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for its values", what);
    memcpy(data, raw ? (const void *)t->raw_data.data : (const void *)t->float_data, (size_t)count * sizeof(float));
  }
  tf_init init;
  TF_RETURN_IF_ERROR(add_weights(im, v->name, TF_F32, rank, shape, data, data, &init));
  v->tensor = tf_graph_parameter(im->graph, v->name, TF_F32, tf_shape_from(dims, rank), init);
  if (ox_dtype(t->data_type, &half) && half != TF_F32)
    v->tensor = tf_cast(im->graph, v->tensor, half);
  return ox_graph_error(im, node);
}

/* A constant holding known value `k` (fixed shape): one fill value, or an entry in the weights file. */
/* v's known value as a constant of the graph: a fill when every element is equal (unless `stored`),
 * else a weights-file entry named like the constant. */
static tf_status make_constant(ox_import *im, const ox_node *node, ox_value *v, bool stored) {
  const ox_known *k = v->known;
  char label[256];
  tf_dim dims[TF_MAX_RANK];
  for (int32_t i = 0; i < k->rank; i++)
    dims[i] = tf_fixed(k->shape[i]);
  bool uniform = true;
  for (int64_t i = 0; i < k->count; i++) {
    if (!k->is_float && k->ints[i].symbol >= 0)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: %s: value '%s' holds a symbolic size (from Shape) and is used as data; only "
                           "shape arguments may be symbolic",
                           im->source, ox_node_label(node, label, sizeof(label)), v->name);
    if (i > 0 && (k->is_float ? k->reals[i] != k->reals[0] : k->ints[i].size != k->ints[0].size))
      uniform = false;
  }
  tf_dtype dtype = k->is_float ? TF_F32 : k->dtype == TF_I32 ? TF_I32 : TF_I64;
  /* an f16/bf16 constant: its f32 values (exact), cast to its type where read */
  const tf_dtype half = k->is_float && (k->dtype == TF_F16 || k->dtype == TF_BF16) ? k->dtype : TF_F32;
  char name[300];
  snprintf(name, sizeof(name), "%s", v->name);
  while (tf_graph_find_tensor(im->graph, name) != TF_NO_TENSOR)
    strncat(name, "_", sizeof(name) - strlen(name) - 1);
  if (uniform && !stored) {
    double fill = k->count == 0 ? 0 : k->is_float ? k->reals[0] : (double)k->ints[0].size;
    v->tensor =
        tf_graph_constant(im->graph, name, dtype, tf_shape_from(dims, k->rank), tf_init_make(TF_INIT_FILL, fill, 0));
    if (half != TF_F32)
      v->tensor = tf_cast(im->graph, v->tensor, half);
    return ox_graph_error(im, node);
  }
  int64_t size = tf_dtype_size(dtype);
  void *data = malloc((size_t)(k->count * size));
  if (!data)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for constant '%s'", im->source, v->name);
  for (int64_t i = 0; i < k->count; i++) {
    if (dtype == TF_F32)
      ((float *)data)[i] = (float)k->reals[i];
    else if (dtype == TF_I32)
      ((int32_t *)data)[i] = (int32_t)k->ints[i].size;
    else
      ((int64_t *)data)[i] = k->ints[i].size;
  }
  char *key = strdup(name);
  if (!key || !tf_strmap_put(&im->owned_names, key, 0)) {
    free(key);
    free(data);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for constant '%s'", im->source, v->name);
  }
  tf_init init;
  TF_RETURN_IF_ERROR(add_weights(im, key, dtype, k->rank, k->shape, data, data, &init));
  v->tensor = tf_graph_constant(im->graph, key, dtype, tf_shape_from(dims, k->rank), init);
  if (half != TF_F32)
    v->tensor = tf_cast(im->graph, v->tensor, half);
  return ox_graph_error(im, node);
}

tf_status ox_known_constant(ox_import *im, const ox_node *node, const char *name, ox_known *k, tf_tensor_id *out) {
  ox_value v = {.name = name, .tensor = TF_NO_TENSOR, .known = k, .initializer = NULL};
  tf_status status = make_constant(im, node, &v, false);
  ox_known_free(k);
  *out = v.tensor;
  return status;
}

tf_status ox_stored_constant(ox_import *im, const ox_node *node, const char *name, ox_known *k, tf_tensor_id *out) {
  ox_value v = {.name = name, .tensor = TF_NO_TENSOR, .known = k, .initializer = NULL};
  tf_status status = make_constant(im, node, &v, true);
  ox_known_free(k);
  *out = v.tensor;
  return status;
}

/* The node of the model that lists `name` among its outputs, and which output it is, or NULL. */
static const Onnx__NodeProto *writer_of(const ox_import *im, const char *name, size_t *index) {
  for (size_t n = 0; im->onnx && n < im->onnx->n_node; n++)
    for (size_t o = 0; im->onnx->node[n] && o < im->onnx->node[n]->n_output; o++)
      if (im->onnx->node[n]->output[o] && strcmp(im->onnx->node[n]->output[o], name) == 0) {
        *index = o;
        return im->onnx->node[n];
      }
  return NULL;
}

tf_status ox_tensor(ox_import *im, const ox_node *node, const char *name, tf_tensor_id *out) {
  *out = TF_NO_TENSOR;
  ox_value *v = ox_value_find(im, name);
  char label[256];
  size_t index;
  const Onnx__NodeProto *writer = v ? NULL : writer_of(im, name, &index);
  if (writer) /* a converter that computes fewer outputs than the node lists (MaxPool's Indices) */
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "%s: %s: input '%s' is output %zu of node '%s' (%s), an output tightfit does not compute "
                         "for that operator (docs/import.md lists what each computes)",
                         im->source, ox_node_label(node, label, sizeof(label)), name, index,
                         writer->name ? writer->name : "", writer->op_type ? writer->op_type : "?");
  if (!v)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s: input '%s' is produced by no node, input or initializer",
                         im->source, ox_node_label(node, label, sizeof(label)), name);
  if (v->empty)
    return tf_status_new(
        TF_ERR_UNSUPPORTED,
        "%s: %s: input '%s' has no elements (a slice that selects nothing; only Concat, which leaves it "
        "out, Shape, and elementwise ops, whose outputs have none either, take such a value)",
        im->source, ox_node_label(node, label, sizeof(label)), name);
  if (v->tensor == TF_NO_TENSOR && v->initializer)
    TF_RETURN_IF_ERROR(make_parameter(im, node, v));
  else if (v->tensor == TF_NO_TENSOR && v->known)
    TF_RETURN_IF_ERROR(make_constant(im, node, v, false));
  if (v->tensor == TF_NO_TENSOR)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s: input '%s' has no value", im->source,
                         ox_node_label(node, label, sizeof(label)), name);
  *out = v->tensor;
  return NULL;
}

int64_t ox_symbol_prime(int32_t symbol) {
  static const int64_t primes[OX_MAX_SYMBOLS] = {100003, 100019, 100043, 100049, 100057, 100069, 100103, 100109,
                                                 100129, 100151, 100153, 100169, 100183, 100189, 100193, 100207};
  return symbol >= 0 && symbol < OX_MAX_SYMBOLS ? primes[symbol] : 0;
}

void ox_tensor_dims(const ox_import *im, tf_tensor_id id, int32_t *rank, tf_dim *dims) {
  tf_tensor_info info;
  *rank = 0;
  if (!tf_graph_tensor(im->graph, id, &info) || info.rank < 0)
    return;
  *rank = info.rank;
  for (int32_t i = 0; i < info.rank; i++) {
    int64_t size = info.shape[i];
    dims[i] = tf_fixed(size);
    if (size < OX_SYMBOL_PRIME_MIN)
      continue;
    int64_t times;
    const int32_t symbol = symbol_of_size(im, size, &times);
    if (symbol >= 0) {
      dims[i] = tf_sym_times(symbol, times);
      continue;
    }
    bool multiple_of_any = false;
    for (int32_t s = 0; s < im->n_symbols; s++)
      multiple_of_any = multiple_of_any || size % ox_symbol_prime(s) == 0;
    /* a fixed size of 100003 or more (a long audio axis), or a product of symbols, which has no name */
    dims[i] = !multiple_of_any && size / OX_SYMBOL_PRIME_MIN < OX_SYMBOL_PRIME_MIN ? tf_fixed(size) : (tf_dim){-1, -1};
  }
}
