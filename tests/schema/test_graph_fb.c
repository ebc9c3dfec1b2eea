/* The .tfg format (schema/graph_fb.h): a graph that uses every field survives encode -> decode and
 * encode -> JSON -> `flatc -b` -> decode unchanged, and malformed bytes (empty, short, wrong
 * identifier, every truncation, random byte flips, hand-made buffers) are refused with a clear
 * message or decoded, never crash (per-node precision overrides: test_graph_fb_precision.c). Run
 * under ASan/UBSan (TIGHTFIT_SANITIZE) to make "never crash"
 * mean "no report" too. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "graph/graph_file.h"
#include "graph/ir.h"
#include "schema/graph_fb.h"
#include "tightfit/graph.h"

/* ---- building the graph ---- */

static int32_t add_tensor(tf_graph *g, const char *name, tf_dtype dtype, tf_tensor_kind kind, const tf_shape *shape,
                          const tf_init *init) {
  tf_status status = NULL;
  int32_t id = tf_ir_add_tensor(g, name, dtype, kind, shape, init, &status);
  if (status) {
    fprintf(stderr, "building the test graph: %s\n", tf_status_message(status));
    tf_status_free(status);
    exit(2);
  }
  return id;
}

static void add_node(tf_graph *g, const char *name, tf_op op, const int32_t *inputs, int32_t n_inputs, int32_t output,
                     const tf_attrs *attrs) {
  tf_status status = NULL;
  if (tf_ir_add_node(g, name, op, inputs, n_inputs, &output, 1, attrs, &status) < 0) {
    fprintf(stderr, "building the test graph: %s\n", tf_status_message(status));
    tf_status_free(status);
    exit(2);
  }
}

static tf_shape shape_of(const tf_dim *dims, int32_t rank) {
  tf_shape shape;
  memset(&shape, 0, sizeof shape);
  shape.rank = rank;
  for (int32_t i = 0; i < rank; i++)
    shape.dims[i] = dims[i];
  return shape;
}

static tf_dim fixed(int64_t size) { return (tf_dim){size, -1}; }
static tf_dim symbolic(int32_t symbol, int64_t multiple) { return (tf_dim){multiple, symbol}; }

static tf_init init_of(tf_init_kind kind, double a, double b, const char *file, const char *key) {
  return (tf_init){kind, a, b, file, key};
}

/* One attribute table per op, every family used; values survive JSON's rounding (see graph_fb.h). */
static tf_attrs attrs_for(tf_op op, int32_t n_symbol, int32_t t_symbol) {
  tf_attrs a;
  memset(&a, 0, sizeof a);
  switch (op) {
  case TF_OP_MATMUL:
    a.kind = TF_ATTR_MATMUL;
    a.u.matmul = (tf_matmul_attrs){true, false};
    break;
  case TF_OP_SUM:
  case TF_OP_MEAN:
  case TF_OP_MAX:
    a.kind = TF_ATTR_REDUCE;
    if (op == TF_OP_SUM) {
      a.u.reduce.n_axes = 2;
      a.u.reduce.axes[0] = 0;
      a.u.reduce.axes[1] = -1;
      a.u.reduce.keepdims = true;
    } else if (op == TF_OP_MAX) {
      a.u.reduce.n_axes = TF_MAX_RANK;
      for (int i = 0; i < TF_MAX_RANK; i++)
        a.u.reduce.axes[i] = i - 4;
    } /* mean: no axes = every axis */
    break;
  case TF_OP_SOFTMAX:
  case TF_OP_LOG_SOFTMAX:
  case TF_OP_CONCAT:
    a.kind = TF_ATTR_AXIS;
    a.u.axis.axis = op == TF_OP_SOFTMAX ? -1 : op == TF_OP_CONCAT ? 2 : 1;
    break;
  case TF_OP_LAYER_NORM:
  case TF_OP_RMS_NORM:
    a.kind = TF_ATTR_NORM;
    a.u.norm.epsilon = op == TF_OP_LAYER_NORM ? 1e-5f : 1e-6f;
    break;
  case TF_OP_RESHAPE:
    a.kind = TF_ATTR_SHAPE;
    a.u.shape.shape = shape_of((const tf_dim[]){symbolic(n_symbol, 1), fixed(-1), fixed(64)}, 3);
    break;
  case TF_OP_EXPAND:
    a.kind = TF_ATTR_SHAPE;
    a.u.shape.shape = shape_of((const tf_dim[]){symbolic(n_symbol, 2), symbolic(t_symbol, 4), fixed(-1)}, 3);
    break;
  case TF_OP_TRANSPOSE:
    a.kind = TF_ATTR_TRANSPOSE;
    a.u.transpose.rank = 3;
    a.u.transpose.perm[0] = 0;
    a.u.transpose.perm[1] = 2;
    a.u.transpose.perm[2] = 1;
    break;
  case TF_OP_SLICE:
    a.kind = TF_ATTR_SLICE;
    a.u.slice = (tf_slice_attrs){1, -10, INT64_MAX, 2};
    break;
  case TF_OP_CONV1D:
    a.kind = TF_ATTR_CONV;
    a.u.conv = (tf_conv_attrs){{2, 0}, {1, 0}, {1, 0}, {0, 0}, 1};
    break;
  case TF_OP_CONV2D:
    a.kind = TF_ATTR_CONV;
    a.u.conv = (tf_conv_attrs){{1, 2}, {1, 1}, {2, 1}, {0, 0}, 4};
    break;
  case TF_OP_CONV_TRANSPOSE2D:
    a.kind = TF_ATTR_CONV;
    a.u.conv = (tf_conv_attrs){{2, 2}, {1, 0}, {1, 1}, {1, 0}, 2};
    break;
  case TF_OP_MAX_POOL2D:
    a.kind = TF_ATTR_POOL;
    a.u.pool = (tf_pool_attrs){{2, 2}, {2, 2}, {0, 1}};
    break;
  case TF_OP_AVG_POOL2D:
    a.kind = TF_ATTR_POOL;
    a.u.pool = (tf_pool_attrs){{3, 3}, {1, 1}, {1, 1}};
    break;
  case TF_OP_DROPOUT:
    a.kind = TF_ATTR_DROPOUT;
    a.u.dropout = (tf_dropout_attrs){0.1f, UINT64_C(0xfedcba9876543210)};
    break;
  case TF_OP_ATTENTION:
    a.kind = TF_ATTR_ATTENTION;
    a.u.attention = (tf_attention_attrs){8, true, 0.125f};
    break;
  case TF_OP_CAST:
    a.kind = TF_ATTR_CAST;
    a.u.cast.to = TF_BF16;
    break;
  case TF_OP_GELU:
    a.kind = TF_ATTR_GELU;
    a.u.gelu.approximate = true;
    break;
  case TF_OP_CROSS_ENTROPY:
    a.kind = TF_ATTR_CROSS_ENTROPY;
    a.u.cross_entropy.ignore_index = -100;
    break;
  default: break;
  }
  return a;
}

/* A graph using every field: symbols with multiples, every dtype, kind and initializer, a node
 * of every op (so every attribute family), outputs, a loss and a training configuration. */
static tf_graph *build_every_field(void) {
  tf_graph *g = NULL;
  tf_status status = tf_graph_create("every_field", &g);
  if (status) {
    fprintf(stderr, "%s\n", tf_status_message(status));
    exit(2);
  }
  tf_status symbol_status = NULL;
  int32_t n = tf_ir_add_symbol(g, "N", 8, &symbol_status);
  int32_t t = tf_ir_add_symbol(g, "T", 128, &symbol_status);
  if (n < 0 || t < 0)
    exit(2);

  tf_shape x_shape = shape_of((const tf_dim[]){symbolic(n, 1), symbolic(t, 1), fixed(64)}, 3);
  tf_shape ids_shape = shape_of((const tf_dim[]){symbolic(n, 1), symbolic(t, 1)}, 2);
  tf_shape label_shape = shape_of((const tf_dim[]){symbolic(n, 1), symbolic(t, 4)}, 2);
  tf_shape image_shape = shape_of((const tf_dim[]){symbolic(n, 2), fixed(3), fixed(32), fixed(32)}, 4);
  tf_shape rank8 = shape_of(
      (const tf_dim[]){fixed(1), fixed(2), fixed(3), fixed(4), fixed(5), fixed(6), fixed(7), symbolic(t, 3)}, 8);
  tf_shape vector64 = shape_of((const tf_dim[]){fixed(64)}, 1);
  tf_shape matrix = shape_of((const tf_dim[]){fixed(64), fixed(64)}, 2);
  tf_shape kernel = shape_of((const tf_dim[]){fixed(16), fixed(3), fixed(3), fixed(3)}, 4);
  tf_shape positions = shape_of((const tf_dim[]){symbolic(t, 1)}, 1);
  tf_shape table = shape_of((const tf_dim[]){fixed(1000), fixed(64)}, 2);
  tf_shape scalar = shape_of(NULL, 0);

  int32_t x = add_tensor(g, "x", TF_F32, TF_INPUT, &x_shape, NULL);
  int32_t ids = add_tensor(g, "ids", TF_I64, TF_INPUT, &ids_shape, NULL);
  int32_t labels = add_tensor(g, "labels", TF_I32, TF_LABEL, &label_shape, NULL);
  int32_t image = add_tensor(g, "image", TF_F16, TF_INPUT, &image_shape, NULL);
  int32_t bytes = add_tensor(g, "bytes", TF_U8, TF_LABEL, &rank8, NULL);
  tf_init zeros = init_of(TF_INIT_ZEROS, 0, 0, NULL, NULL);
  tf_init ones = init_of(TF_INIT_ONES, 0, 0, NULL, NULL);
  tf_init normal = init_of(TF_INIT_NORMAL, 0, 0.02, NULL, NULL);
  tf_init uniform = init_of(TF_INIT_UNIFORM, -0.5, 0.5, NULL, NULL);
  tf_init xavier = init_of(TF_INIT_XAVIER_UNIFORM, 1.0, 0, NULL, NULL);
  tf_init kaiming = init_of(TF_INIT_KAIMING_NORMAL, 1.4142135623, 0, NULL, NULL);
  tf_init arange = init_of(TF_INIT_ARANGE, 0, 1, NULL, NULL);
  tf_init external = init_of(TF_INIT_EXTERNAL, 0, 0, "weights/model.safetensors", "embed.weight");
  tf_init fill = init_of(TF_INIT_FILL, -1.5, 0, NULL, NULL);
  int32_t bias = add_tensor(g, "bias", TF_F32, TF_PARAMETER, &vector64, &zeros);
  int32_t gamma = add_tensor(g, "gamma", TF_BF16, TF_PARAMETER, &vector64, &ones);
  int32_t w_normal = add_tensor(g, "w_normal", TF_F32, TF_PARAMETER, &matrix, &normal);
  int32_t w_uniform = add_tensor(g, "w_uniform", TF_F32, TF_PARAMETER, &matrix, &uniform);
  int32_t w_xavier = add_tensor(g, "w_xavier", TF_F32, TF_PARAMETER, &matrix, &xavier);
  int32_t w_conv = add_tensor(g, "w_conv", TF_F32, TF_PARAMETER, &kernel, &kaiming);
  int32_t pos = add_tensor(g, "positions", TF_I64, TF_CONSTANT, &positions, &arange);
  int32_t embed = add_tensor(g, "embed", TF_F16, TF_PARAMETER, &table, &external);
  int32_t half = add_tensor(g, "half", TF_F32, TF_CONSTANT, &scalar, &fill);
  (void)w_uniform, (void)w_xavier, (void)pos, (void)half, (void)bytes;

  for (int op = 0; op < TF_OP_COUNT; op++) {
    char name[64];
    snprintf(name, sizeof name, "out_%d", op);
    int32_t out = add_tensor(g, name, op == TF_OP_CAST ? TF_BF16 : TF_F32, TF_ACTIVATION, NULL, NULL);
    int32_t inputs[3] = {x, w_normal, bias};
    int32_t n_inputs = 1;
    if (op == TF_OP_EMBEDDING) {
      inputs[0] = ids;
      inputs[1] = embed;
      n_inputs = 2;
    } else if (op == TF_OP_LAYER_NORM || op == TF_OP_CONCAT || op == TF_OP_ATTENTION) {
      inputs[1] = op == TF_OP_LAYER_NORM ? gamma : x;
      inputs[2] = op == TF_OP_LAYER_NORM ? bias : x;
      n_inputs = 3;
    } else if (op == TF_OP_CONV2D || op == TF_OP_CONV_TRANSPOSE2D) {
      inputs[0] = image;
      inputs[1] = w_conv;
      n_inputs = op == TF_OP_CONV2D ? 3 : 2;
    } else if (op == TF_OP_CROSS_ENTROPY) {
      inputs[1] = labels;
      n_inputs = 2;
    } else if (op <= TF_OP_DIV || op == TF_OP_RMS_NORM || op >= TF_OP_MSE) {
      n_inputs = 2;
    }
    tf_attrs attrs = attrs_for((tf_op)op, n, t);
    snprintf(name, sizeof name, "node_%d", op);
    add_node(g, name, (tf_op)op, inputs, n_inputs, out, &attrs);
  }
  /* Precision overrides of each value on three nodes; the others inherit. */
  g->nodes[TF_OP_MATMUL].precision = TF_PRECISION_F32;
  g->nodes[TF_OP_RELU].precision = TF_PRECISION_BF16;
  g->nodes[TF_OP_LAYER_NORM].precision = TF_PRECISION_F16;
  tf_status_free(tf_ir_add_output(g, tf_graph_find_tensor(g, "out_18")));
  tf_status_free(tf_ir_add_output(g, tf_graph_find_tensor(g, "out_34")));
  g->loss = tf_graph_find_tensor(g, "out_36");
  g->has_training = true;
  g->training = (tf_training_config){TF_OPTIMIZER_ADAMW, 0.0003, 0.9, 0.9, 0.999, 1e-8, 0.01, 1.0, 256, 4,
                                     TF_PRECISION_BF16,  65536.0};
  return g;
}

/* A second graph with values JSON's printer would round, and enum values outside the C enums:
 * the binary format must carry both exactly. */
static tf_graph *build_exact_values(void) {
  tf_graph *g = NULL;
  tf_status status = tf_graph_create("", &g);
  if (status)
    exit(2);
  tf_shape shape = shape_of((const tf_dim[]){fixed(INT64_MAX), symbolic(1234567, -7)}, 2);
  tf_init third = init_of(TF_INIT_NORMAL, 1.0 / 3.0, 1e-300, NULL, NULL);
  tf_init empty_strings = init_of(TF_INIT_EXTERNAL, 0, 0, "", "");
  tf_init odd_kind = init_of((tf_init_kind)200, 0, 0, NULL, NULL);
  int32_t a = add_tensor(g, "a", (tf_dtype)77, (tf_tensor_kind)250, &shape, &third);
  add_tensor(g, "b", TF_F32, TF_PARAMETER, &shape, &empty_strings);
  add_tensor(g, "c", TF_F32, TF_CONSTANT, &shape, &odd_kind);
  int32_t out = add_tensor(g, "out", TF_F32, TF_ACTIVATION, NULL, NULL);
  tf_attrs norm = {.kind = TF_ATTR_NORM, .u.norm.epsilon = 1e-30f};
  add_node(g, "odd", (tf_op)65535, (const int32_t[]){a, -5, 1 << 30}, 3, out, &norm);
  g->nodes[0].precision = (tf_precision)200;
  tf_attrs cast = {.kind = TF_ATTR_CAST, .u.cast.to = (tf_dtype)99};
  add_node(g, "no_inputs", TF_OP_CAST, NULL, 0, 12345, &cast);
  tf_status_free(tf_ir_add_output(g, -3));
  g->loss = 99;
  g->has_training = false;
  return g;
}

/* ---- comparing graphs ---- */

static bool same_string(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static bool same_shape(const tf_shape *a, const tf_shape *b) {
  if (a->rank != b->rank)
    return false;
  for (int32_t i = 0; i < a->rank && i < TF_MAX_RANK; i++)
    if (a->dims[i].size != b->dims[i].size || a->dims[i].symbol != b->dims[i].symbol)
      return false;
  return true;
}

static bool same_ints(const int32_t *a, const int32_t *b, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

static bool same_attrs(const tf_attrs *a, const tf_attrs *b) {
  if (a->kind != b->kind)
    return false;
  switch (a->kind) {
  case TF_ATTR_NONE: return true;
  case TF_ATTR_MATMUL:
    return a->u.matmul.transpose_a == b->u.matmul.transpose_a && a->u.matmul.transpose_b == b->u.matmul.transpose_b;
  case TF_ATTR_REDUCE:
    return a->u.reduce.n_axes == b->u.reduce.n_axes && a->u.reduce.keepdims == b->u.reduce.keepdims &&
           same_ints(a->u.reduce.axes, b->u.reduce.axes, a->u.reduce.n_axes);
  case TF_ATTR_AXIS: return a->u.axis.axis == b->u.axis.axis;
  case TF_ATTR_NORM: return a->u.norm.epsilon == b->u.norm.epsilon;
  case TF_ATTR_SHAPE: return same_shape(&a->u.shape.shape, &b->u.shape.shape);
  case TF_ATTR_TRANSPOSE:
    return a->u.transpose.rank == b->u.transpose.rank &&
           same_ints(a->u.transpose.perm, b->u.transpose.perm, a->u.transpose.rank);
  case TF_ATTR_SLICE:
    return a->u.slice.axis == b->u.slice.axis && a->u.slice.start == b->u.slice.start &&
           a->u.slice.end == b->u.slice.end && a->u.slice.step == b->u.slice.step;
  case TF_ATTR_CONV:
    return same_ints(a->u.conv.stride, b->u.conv.stride, 2) && same_ints(a->u.conv.padding, b->u.conv.padding, 2) &&
           same_ints(a->u.conv.dilation, b->u.conv.dilation, 2) &&
           same_ints(a->u.conv.output_padding, b->u.conv.output_padding, 2) && a->u.conv.groups == b->u.conv.groups;
  case TF_ATTR_POOL:
    return same_ints(a->u.pool.kernel, b->u.pool.kernel, 2) && same_ints(a->u.pool.stride, b->u.pool.stride, 2) &&
           same_ints(a->u.pool.padding, b->u.pool.padding, 2);
  case TF_ATTR_DROPOUT: return a->u.dropout.rate == b->u.dropout.rate && a->u.dropout.seed == b->u.dropout.seed;
  case TF_ATTR_ATTENTION:
    return a->u.attention.num_heads == b->u.attention.num_heads && a->u.attention.causal == b->u.attention.causal &&
           a->u.attention.scale == b->u.attention.scale;
  case TF_ATTR_CAST: return a->u.cast.to == b->u.cast.to;
  case TF_ATTR_GELU: return a->u.gelu.approximate == b->u.gelu.approximate;
  case TF_ATTR_CROSS_ENTROPY: return a->u.cross_entropy.ignore_index == b->u.cross_entropy.ignore_index;
  default: return false;
  }
}

static bool same_training(const tf_training_config *a, const tf_training_config *b) {
  return a->optimizer == b->optimizer && a->learning_rate == b->learning_rate && a->momentum == b->momentum &&
         a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->epsilon == b->epsilon &&
         a->weight_decay == b->weight_decay && a->clip_norm == b->clip_norm && a->global_batch == b->global_batch &&
         a->accumulate_steps == b->accumulate_steps && a->precision == b->precision && a->loss_scale == b->loss_scale;
}

/* Checks that `b` equals `a` field by field; `what` names the comparison in failures. */
static void check_same_graph(tf_test_counts *counts, const char *what, const tf_graph *a, const tf_graph *b) {
  CHECK(counts, same_string(a->name, b->name), "%s: name '%s' vs '%s'", what, a->name, b->name);
  CHECK(counts, b->version == TF_SCHEMA_VERSION, "%s: version %u", what, b->version);
  CHECK(counts, a->n_symbols == b->n_symbols, "%s: %d vs %d symbols", what, a->n_symbols, b->n_symbols);
  for (int32_t i = 0; i < a->n_symbols && i < b->n_symbols; i++)
    CHECK(counts,
          same_string(a->symbols[i].name, b->symbols[i].name) &&
              a->symbols[i].default_value == b->symbols[i].default_value,
          "%s: symbol %d", what, i);
  CHECK(counts, a->n_tensors == b->n_tensors, "%s: %d vs %d tensors", what, a->n_tensors, b->n_tensors);
  for (int32_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
    const tf_ir_tensor *x = &a->tensors[i], *y = &b->tensors[i];
    CHECK(counts, same_string(x->name, y->name), "%s: tensor %d name", what, i);
    CHECK(counts, x->dtype == y->dtype && x->kind == y->kind, "%s: tensor %d '%s' dtype/kind %d/%d vs %d/%d", what, i,
          x->name, x->dtype, x->kind, y->dtype, y->kind);
    CHECK(counts, same_shape(&x->declared, &y->declared), "%s: tensor %d '%s' declared shape (rank %d vs %d)", what, i,
          x->name, x->declared.rank, y->declared.rank);
    CHECK(counts, x->init_kind == y->init_kind && x->init_a == y->init_a && x->init_b == y->init_b,
          "%s: tensor %d '%s' init %d(%.17g, %.17g) vs %d(%.17g, %.17g)", what, i, x->name, x->init_kind, x->init_a,
          x->init_b, y->init_kind, y->init_a, y->init_b);
    CHECK(counts, same_string(x->init_file, y->init_file) && same_string(x->init_key, y->init_key),
          "%s: tensor %d '%s' external file/key", what, i, x->name);
    CHECK(counts, x->producer == y->producer, "%s: tensor %d '%s' producer %d vs %d", what, i, x->name, x->producer,
          y->producer);
  }
  CHECK(counts, a->n_nodes == b->n_nodes, "%s: %d vs %d nodes", what, a->n_nodes, b->n_nodes);
  for (int32_t i = 0; i < a->n_nodes && i < b->n_nodes; i++) {
    const tf_ir_node *x = &a->nodes[i], *y = &b->nodes[i];
    CHECK(counts, same_string(x->name, y->name) && x->op == y->op, "%s: node %d name/op", what, i);
    CHECK(counts, x->n_inputs == y->n_inputs && same_ints(x->inputs, y->inputs, x->n_inputs), "%s: node %d '%s' inputs",
          what, i, x->name);
    CHECK(counts, x->n_outputs == y->n_outputs && x->outputs[0] == y->outputs[0], "%s: node %d '%s' output", what, i,
          x->name);
    CHECK(counts, same_attrs(&x->attrs, &y->attrs), "%s: node %d '%s' attrs (kind %d vs %d)", what, i, x->name,
          x->attrs.kind, y->attrs.kind);
    CHECK(counts, x->precision == y->precision, "%s: node %d '%s' precision override %d vs %d", what, i, x->name,
          x->precision, y->precision);
  }
  CHECK(counts, a->n_outputs == b->n_outputs && same_ints(a->outputs, b->outputs, a->n_outputs), "%s: outputs", what);
  CHECK(counts, a->loss == b->loss, "%s: loss %d vs %d", what, a->loss, b->loss);
  CHECK(counts, a->has_training == b->has_training, "%s: has_training", what);
  if (a->has_training && b->has_training)
    CHECK(counts, same_training(&a->training, &b->training), "%s: training config", what);
}

/* ---- helpers ---- */

static tf_graph *round_trip(tf_test_counts *counts, const tf_graph *g, const char *what) {
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(counts, tf_graph_encode(g, &data, &size));
  tf_graph *back = NULL;
  CHECK_OK(counts, tf_graph_decode(data, size, what, &back));
  free(data);
  return back;
}

static bool write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *data = NULL;
  size_t used = 0;
  if (fseek(f, 0, SEEK_END) == 0) {
    long length = ftell(f);
    if (length > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)length)) != NULL)
      used = fread(data, 1, (size_t)length, f);
  }
  fclose(f);
  *size = used;
  return data;
}

static bool have_flatc(void) { return system("command -v flatc >/dev/null 2>&1") == 0; }

/* Runs `flatc -b` on JSON text; returns the .tfg bytes (NULL when flatc refuses the JSON). */
static void *flatc_binary(const char *dir, const char *stem, const char *json, size_t *size) {
  char json_path[512], tfg_path[512], command[1200];
  snprintf(json_path, sizeof json_path, "%s/%s.json", dir, stem);
  snprintf(tfg_path, sizeof tfg_path, "%s/%s.tfg", dir, stem);
  if (!write_file(json_path, json, strlen(json)))
    return NULL;
  snprintf(command, sizeof command, "flatc -b -o %s schema/graph.fbs %s", dir, json_path);
  if (system(command) != 0)
    return NULL;
  void *data = read_file(tfg_path, size);
  unlink(json_path);
  unlink(tfg_path);
  return data;
}

/* Decodes bytes that must be refused; checks the message starts with `source` and holds `expect`. */
static void check_refused(tf_test_counts *counts, const void *data, size_t size, const char *source,
                          const char *expect) {
  tf_graph *g = NULL;
  tf_status status = tf_graph_decode(data, size, source, &g);
  const char *message = tf_status_message(status);
  CHECK(counts, status && tf_status_code(status) == TF_ERR_INVALID_INPUT, "%s: expected a refusal, got '%s'", source,
        message);
  CHECK(counts, g == NULL, "%s: *out set on error", source);
  CHECK(counts, strncmp(message, source, strlen(source)) == 0 && strstr(message, expect),
        "%s: message '%s' should start with the source and contain '%s'", source, message, expect);
  printf("  refused %-22s -> %s\n", source, message);
  tf_status_free(status);
  tf_graph_destroy(g);
}

/* ---- the parts ---- */

static void test_binary_round_trip(tf_test_counts *counts, const tf_graph *g, const tf_graph *exact) {
  tf_graph *back = round_trip(counts, g, "every_field.tfg");
  if (back) {
    check_same_graph(counts, "binary round trip", g, back);
    printf("binary round trip: %d symbols, %d tensors, %d nodes (every op and attribute family), %d outputs, "
           "loss, training config: compared field by field\n",
           back->n_symbols, back->n_tensors, back->n_nodes, back->n_outputs);
  }
  tf_graph_destroy(back);

  back = round_trip(counts, exact, "exact.tfg");
  if (back) {
    check_same_graph(counts, "exact values", exact, back);
    printf("binary round trip of exact values (1/3, 1e-300, 1e-30f, INT64_MAX dims, out-of-range enums "
           "dtype 77 / kind 250 / init 200 / op 65535 / cast to 99 / precision override 200, empty strings, no "
           "training): equal\n");
  }
  tf_graph_destroy(back);

  /* The same bytes at an odd address decode the same. */
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(counts, tf_graph_encode(g, &data, &size));
  unsigned char *shifted = malloc(size + 1);
  if (data && shifted) {
    memcpy(shifted + 1, data, size);
    tf_graph *unaligned = NULL;
    CHECK_OK(counts, tf_graph_decode(shifted + 1, size, "unaligned.tfg", &unaligned));
    if (unaligned)
      check_same_graph(counts, "unaligned input", g, unaligned);
    tf_graph_destroy(unaligned);
    printf("decode from an odd address (%zu bytes): equal\n", size);
  }
  free(shifted);
  free(data);
}

static void test_json(tf_test_counts *counts, const tf_graph *g, const char *dir) {
  void *data = NULL;
  size_t size = 0;
  char *json = NULL;
  CHECK_OK(counts, tf_graph_encode(g, &data, &size));
  CHECK_OK(counts, tf_graph_fb_to_json(data, size, &json));
  free(data);
  if (!json)
    return;
  /* Enums appear by name, and the schema's names are graph.h's names. */
  char needle[96];
  int missing = 0;
  for (int op = 0; op < TF_OP_COUNT; op++) {
    snprintf(needle, sizeof needle, "\"op\": \"%s\"", tf_op_name((tf_op)op));
    missing += !strstr(json, needle);
  }
  for (int d = 0; d < TF_DTYPE_COUNT; d++) {
    snprintf(needle, sizeof needle, "\"dtype\": \"%s\"", tf_dtype_name((tf_dtype)d));
    missing += !strstr(json, needle);
  }
  for (int k = 0; k < TF_KIND_COUNT; k++) {
    snprintf(needle, sizeof needle, "\"kind\": \"%s\"", tf_kind_name((tf_tensor_kind)k));
    missing += !strstr(json, needle);
  }
  for (int k = 1; k < TF_INIT_COUNT; k++) {
    snprintf(needle, sizeof needle, "\"kind\": \"%s\"", tf_init_name((tf_init_kind)k));
    missing += !strstr(json, needle);
  }
  /* Three nodes' overrides by name and the training policy; every other node inherits (null). */
  int precisions = 0, nulls = 0;
  for (const char *at = strstr(json, "\"precision\": \""); at; at = strstr(at + 1, "\"precision\": \""))
    precisions++;
  for (const char *at = strstr(json, "\"precision\": null"); at; at = strstr(at + 1, "\"precision\": null"))
    nulls++;
  missing += !strstr(json, "\"precision\": \"f32\"") + !strstr(json, "\"precision\": \"f16\"");
  CHECK(counts, precisions == 4 && nulls == TF_OP_COUNT - 3,
        "the JSON holds %d named precisions (3 node overrides and the training policy expected) and %d null (%d "
        "expected)",
        precisions, nulls, TF_OP_COUNT - 3);
  CHECK(counts, missing == 0, "%d op/dtype/kind/init/precision names missing from the JSON", missing);
  printf("JSON (%zu bytes) names every op, dtype, tensor kind, init kind and override as graph.h does; %d named "
         "precisions, %d null (inherit)\n",
         strlen(json), precisions, nulls);

  if (!dir) {
    printf("SKIP JSON -> flatc -b -> decode: flatc is not on PATH\n");
    free(json);
    return;
  }
  size_t tfg_size = 0;
  void *tfg = flatc_binary(dir, "every_field", json, &tfg_size);
  CHECK(counts, tfg != NULL, "flatc -b refused the JSON from tf_graph_fb_to_json");
  if (tfg) {
    tf_graph *back = NULL;
    CHECK_OK(counts, tf_graph_decode(tfg, tfg_size, "every_field.json.tfg", &back));
    if (back)
      check_same_graph(counts, "JSON round trip", g, back);
    tf_graph_destroy(back);
    printf("JSON -> flatc -b schema/graph.fbs -> decode (%zu bytes): compared field by field\n", tfg_size);
  }
  free(tfg);
  free(json);
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}
static void put16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

/* A FlatBuffer written by hand: Graph {version, tensors: [Tensor {}]} with the tensor's required
 * name missing. Layout: root offset, "TFGR", Graph vtable @8, Graph @20, vector @32, Tensor vtable
 * @40, Tensor @44. `version` < 0 leaves the field out; `with_tensor` false leaves tensors out. */
static void hand_made(uint64_t storage[6], int64_t version, bool with_tensor) {
  unsigned char *b = (unsigned char *)storage;
  memset(b, 0, 48);
  put32(b + 0, 20);
  memcpy(b + 4, "TFGR", 4);
  put16(b + 8, 12);                    /* vtable bytes: 4 + 2 x 4 fields */
  put16(b + 10, 12);                   /* table bytes */
  put16(b + 12, version >= 0 ? 4 : 0); /* version */
  put16(b + 14, 0);                    /* name */
  put16(b + 16, 0);                    /* symbols */
  put16(b + 18, with_tensor ? 8 : 0);  /* tensors */
  put32(b + 20, 12);                   /* table - vtable */
  put32(b + 24, version >= 0 ? (uint32_t)version : 0);
  put32(b + 28, 4); /* -> vector @32 */
  put32(b + 32, 1); /* one element */
  put32(b + 36, 8); /* -> Tensor @44 */
  put16(b + 40, 4); /* Tensor vtable: no fields */
  put16(b + 42, 4);
  put32(b + 44, 4); /* table - vtable */
}

static void test_refusals(tf_test_counts *counts, const tf_graph *g, const char *dir) {
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(counts, tf_graph_encode(g, &data, &size));
  if (!data)
    return;
  printf("refusals, with their messages:\n");
  check_refused(counts, NULL, 0, "null.tfg", "empty input");
  check_refused(counts, data, 0, "empty.tfg", "empty input");
  check_refused(counts, (const char *)data + 1, 0, "empty_odd.tfg", "empty input");
  check_refused(counts, data, 3, "three.tfg", "too short");
  check_refused(counts, (const char *)data + 1, 7, "seven_odd.tfg", "too short");
  unsigned char *copy = malloc(size);
  memcpy(copy, data, size);
  memcpy(copy + 4, "TFPL", 4);
  check_refused(counts, copy, size, "plan.tfg", "file identifier is 'TFPL', expected 'TFGR'");
  memcpy(copy + 4, "\x01\x02zz", 4);
  check_refused(counts, copy, size, "binary.tfg", "'\\x01\\x02zz'");
  free(copy);

  uint64_t storage[6];
  hand_made(storage, -1, false);
  check_refused(counts, storage, 48, "no_version.tfg", "missing schema version");
  hand_made(storage, 0, false);
  check_refused(counts, storage, 48, "version0.tfg", "missing schema version");
  hand_made(storage, 2, false);
  check_refused(counts, storage, 48, "version2.tfg",
                "written by a newer tightfit: schema version 2; this build reads up to 1");
  hand_made(storage, 1, true);
  check_refused(counts, storage, 48, "nameless.tfg", "tensor 0 has no name");
  hand_made(storage, 1, false);
  tf_graph *minimal = NULL;
  CHECK_OK(counts, tf_graph_decode(storage, 48, "minimal.tfg", &minimal));
  CHECK(counts, minimal && minimal->n_tensors == 0 && minimal->loss == -1 && !minimal->has_training,
        "a graph with only a version decodes to an empty graph");
  tf_graph_destroy(minimal);

  if (!dir) {
    printf("SKIP refusals built with flatc -b: flatc is not on PATH\n");
    free(data);
    return;
  }
  static const struct {
    const char *stem, *json, *expect;
  } cases[] = {
      {"rank9",
       "{\"version\": 1, \"tensors\": [{\"name\": \"x\", \"shape\": [{\"size\": 1, \"symbol\": -1}, {\"size\": 1, "
       "\"symbol\": -1}, "
       "{\"size\": 1, \"symbol\": -1}, {\"size\": 1, \"symbol\": -1}, {\"size\": 1, \"symbol\": -1}, {\"size\": 1, "
       "\"symbol\": -1}, {\"size\": 1, \"symbol\": -1}, {\"size\": 1, \"symbol\": -1}, "
       "{\"size\": 1, \"symbol\": -1}]}]}",
       "tensor 0 'x': shape has 9 dimensions; at most 8"},
      {"two_outputs",
       "{\"version\": 1, \"tensors\": [{\"name\": \"x\"}], \"nodes\": [{\"name\": \"n\", "
       "\"op\": \"relu\", \"inputs\": [0], \"outputs\": [0, 0]}]}",
       "node 0 'n': has 2 outputs"},
      {"no_outputs", "{\"version\": 1, \"nodes\": [{\"name\": \"n\", \"op\": \"relu\"}]}", "node 0 'n': has 0 outputs"},
      {"axes9",
       "{\"version\": 1, \"nodes\": [{\"name\": \"s\", \"op\": \"sum\", \"outputs\": [0], \"attrs_type\": "
       "\"ReduceAttrs\", \"attrs\": {\"axes\": [0, 1, 2, 3, 4, 5, 6, 7, 8]}}]}",
       "node 0 's': ReduceAttrs.axes has 9 entries"},
      {"perm9",
       "{\"version\": 1, \"nodes\": [{\"name\": \"t\", \"op\": \"transpose\", \"outputs\": [0], "
       "\"attrs_type\": \"TransposeAttrs\", \"attrs\": {\"perm\": [0, 1, 2, 3, 4, 5, 6, 7, 8]}}]}",
       "node 0 't': TransposeAttrs.perm has 9 entries"},
      {"stride3",
       "{\"version\": 1, \"nodes\": [{\"name\": \"c\", \"op\": \"conv2d\", \"outputs\": [0], "
       "\"attrs_type\": \"ConvAttrs\", \"attrs\": {\"stride\": [1, 1, 1]}}]}",
       "node 0 'c': ConvAttrs.stride has 3 entries; at most 2"},
      {"version7", "{\"version\": 7, \"name\": \"future\"}", "schema version 7; this build reads up to 1"},
      {"duplicate", "{\"version\": 1, \"tensors\": [{\"name\": \"x\"}, {\"name\": \"x\"}]}",
       "tensor 1 'x': tensor name 'x' is used twice"},
      {"symbol0", "{\"version\": 1, \"symbols\": [{\"name\": \"N\", \"default_value\": 0}]}", "symbol 0 'N'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t bad_size = 0;
    void *bad = flatc_binary(dir, cases[i].stem, cases[i].json, &bad_size);
    CHECK(counts, bad != NULL, "flatc -b refused case %s", cases[i].stem);
    char source[64];
    snprintf(source, sizeof source, "%s.tfg", cases[i].stem);
    if (bad)
      check_refused(counts, bad, bad_size, source, cases[i].expect);
    free(bad);
  }
  free(data);
}

static uint64_t next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

#ifndef GRAPH_FB_FLIP_ROUNDS
#define GRAPH_FB_FLIP_ROUNDS 600 /* -DGRAPH_FB_FLIP_ROUNDS=100000 for a longer soak */
#endif

/* Decodes `bytes` held in a buffer of exactly `size` bytes, so that ASan sees any read past the
 * end; re-encodes what decodes and renders the bytes as JSON too. Returns the decoded graph. */
static tf_graph *decode_hostile(tf_test_counts *counts, const void *bytes, size_t size, int *json_ok) {
  unsigned char *exact = malloc(size ? size : 1);
  memcpy(exact, bytes, size);
  tf_graph *g = NULL;
  tf_status status = tf_graph_decode(exact, size, "hostile.tfg", &g);
  CHECK(counts, (status == NULL) == (g != NULL), "decode result and *out disagree: %s", tf_status_message(status));
  CHECK(counts, !status || tf_status_code(status) == TF_ERR_INVALID_INPUT, "unexpected code: %s",
        tf_status_message(status));
  tf_status_free(status);
  if (g) {
    void *again = NULL;
    size_t again_size = 0;
    tf_status_free(tf_graph_encode(g, &again, &again_size));
    free(again);
  }
  char *json = NULL;
  status = tf_graph_fb_to_json(exact, size, &json);
  *json_ok += status == NULL;
  tf_status_free(status);
  free(json);
  free(exact);
  return g;
}

static void test_hostile_bytes(tf_test_counts *counts, const tf_graph *g) {
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(counts, tf_graph_encode(g, &data, &size));
  if (!data)
    return;
  /* A FlatBuffer is written back to front, so its last bytes may be padding after the first
   * string: a cut there still decodes, and must decode to the same graph. */
  int decoded = 0, json_ok = 0;
  for (size_t length = 0; length < size; length++) {
    tf_graph *back = decode_hostile(counts, data, length, &json_ok);
    if (back) {
      decoded++;
      CHECK(counts, size - length < 4, "a cut of %zu bytes decoded", size - length);
      check_same_graph(counts, "truncated padding", g, back);
    }
    tf_graph_destroy(back);
  }
  printf("every truncation (%zu lengths, 0..%zu bytes): %zu refused, %d decoded (trailing padding cut; equal to "
         "the original), %d rendered as JSON\n",
         size, size - 1, size - (size_t)decoded, decoded, json_ok);

  uint64_t state = UINT64_C(0x9e3779b97f4a7c15);
  const int rounds = GRAPH_FB_FLIP_ROUNDS;
  unsigned char *flipped = malloc(size ? size : 1);
  decoded = json_ok = 0;
  for (int round = 0; round < rounds; round++) {
    memcpy(flipped, data, size);
    int flips = 1 + (int)(next_random(&state) % 4);
    for (int f = 0; f < flips; f++)
      flipped[next_random(&state) % size] ^= (unsigned char)(1 + next_random(&state) % 255);
    tf_graph *back = decode_hostile(counts, flipped, size, &json_ok);
    decoded += back != NULL;
    tf_graph_destroy(back);
  }
  printf("random byte flips (%d files, 1-4 flips each, xorshift seed 0x9e3779b97f4a7c15): %d decoded, %d refused, "
         "%d rendered as JSON, no crash\n",
         rounds, decoded, rounds - decoded, json_ok);
  free(flipped);
  free(data);
}

int main(void) {
  tf_test_counts counts = {0, 0};
  tf_graph *g = build_every_field();
  tf_graph *exact = build_exact_values();

  /* flatc parts run in a fresh temporary folder, when flatc is on PATH. */
  char temporary[] = "/tmp/tightfit_graph_fb_XXXXXX";
  const char *dir = have_flatc() && mkdtemp(temporary) ? temporary : NULL;

  test_binary_round_trip(&counts, g, exact);
  test_json(&counts, g, dir);
  test_refusals(&counts, g, dir);
  test_hostile_bytes(&counts, g);

  /* Encoding refuses what the format cannot hold. */
  g->tensors[0].declared.rank = TF_MAX_RANK + 1;
  void *data = NULL;
  size_t size = 0;
  tf_status status = tf_graph_encode(g, &data, &size);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && data == NULL, "encoding rank 9 should fail: %s",
        tf_status_message(status));
  printf("encode refuses rank %d: %s\n", TF_MAX_RANK + 1, tf_status_message(status));
  tf_status_free(status);

  if (dir)
    rmdir(dir);
  tf_graph_destroy(exact);
  tf_graph_destroy(g);
  return tf_test_finish("graph_fb", &counts);
}
