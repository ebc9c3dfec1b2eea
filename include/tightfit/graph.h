/* tightfit graph builder: build a model graph in C, save it as a .tfg FlatBuffer, load it back.
 *
 * A graph holds tensors (inputs, labels, parameters, constants, activations) and nodes (ops), all
 * addressed by integer ids. Dimensions are numbers or multiples of named symbols (N, T, ...), bound
 * when shapes are inferred. Op constructors (tf_matmul, tf_add, ...) check their arguments and infer
 * the output shape at once using each symbol's default value; the first error is kept in the graph
 * ("sticky"), later constructors return TF_NO_TENSOR, and tf_graph_status() reports it. */
#ifndef TIGHTFIT_GRAPH_H
#define TIGHTFIT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_MAX_RANK 8
#define TF_SCHEMA_VERSION 1 /* the graph schema version this build writes and the newest it reads */
#define TF_NO_TENSOR (-1)
#define TF_MAX_OUTPUTS 4 /* outputs of one node (graph ops have one; some gradient ops three) */

typedef int32_t tf_tensor_id;

typedef enum tf_dtype { TF_F32 = 0, TF_F16, TF_BF16, TF_I32, TF_I64, TF_U8, TF_DTYPE_COUNT } tf_dtype;

typedef enum tf_tensor_kind {
  TF_INPUT = 0,   /* fed per micro-batch from data */
  TF_LABEL,       /* fed per micro-batch; targets of the loss */
  TF_PARAMETER,   /* trained weights, with an initializer */
  TF_CONSTANT,    /* fixed values (e.g. position ids), with an initializer */
  TF_ACTIVATION,  /* produced by exactly one node */
  TF_KIND_COUNT
} tf_tensor_kind;

/* One dimension: `size` when symbol < 0, else size x (value of `symbol`); size is then >= 1.
 * In reshape/expand targets, {size = -1, symbol = -1} means "infer" / "keep". */
typedef struct tf_dim {
  int64_t size;
  int32_t symbol;
} tf_dim;

typedef struct tf_shape {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
} tf_shape;

typedef enum tf_init_kind {
  TF_INIT_NONE = 0,      /* inputs, labels and activations */
  TF_INIT_ZEROS,
  TF_INIT_ONES,
  TF_INIT_NORMAL,        /* mean = a, std = b */
  TF_INIT_UNIFORM,       /* low = a, high = b */
  TF_INIT_XAVIER_UNIFORM,/* gain = a; fans by the convention in docs/format.md */
  TF_INIT_KAIMING_NORMAL,/* gain = a: std = gain / sqrt(fan_in) */
  TF_INIT_ARANGE,        /* start = a, step = b, along the flattened tensor */
  TF_INIT_EXTERNAL,      /* tensor `key` of safetensors file `file` (relative to the .tfg) */
  TF_INIT_FILL,          /* every element = a */
  TF_INIT_COUNT
} tf_init_kind;

typedef struct tf_init {
  tf_init_kind kind;
  double a, b;
  const char *file; /* TF_INIT_EXTERNAL only; copied by the graph */
  const char *key;
} tf_init;

/* The v1 op set. Values are stored in files: append only, never renumber. */
typedef enum tf_op {
  TF_OP_MATMUL = 0,
  TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV,
  TF_OP_NEG, TF_OP_EXP, TF_OP_LOG, TF_OP_SQRT, TF_OP_RSQRT,
  TF_OP_RELU, TF_OP_GELU, TF_OP_SILU, TF_OP_SIGMOID, TF_OP_TANH,
  TF_OP_SUM, TF_OP_MEAN, TF_OP_MAX,
  TF_OP_SOFTMAX, TF_OP_LOG_SOFTMAX,
  TF_OP_LAYER_NORM, TF_OP_RMS_NORM,
  TF_OP_EMBEDDING,
  TF_OP_RESHAPE, TF_OP_TRANSPOSE, TF_OP_CONCAT, TF_OP_SLICE, TF_OP_EXPAND,
  TF_OP_CONV1D, TF_OP_CONV2D, TF_OP_CONV_TRANSPOSE2D,
  TF_OP_MAX_POOL2D, TF_OP_AVG_POOL2D,
  TF_OP_DROPOUT,
  TF_OP_ATTENTION,
  TF_OP_CAST,
  TF_OP_CROSS_ENTROPY, TF_OP_MSE, TF_OP_BCE_WITH_LOGITS,
  TF_OP_GRAPH_COUNT, /* ops a .tfg model graph may hold end here */

  /* Training-only ops: the compiler's autodiff and optimizer passes emit them into plans; a .tfg
   * file may not hold them. Inputs marked (shape) are read for their shape only, never their data.
   * Gradient ops take the forward op's attributes. */
  TF_OP_RELU_GRAD = TF_OP_GRAPH_COUNT, /* (x, dy) -> dx */
  TF_OP_GELU_GRAD,            /* (x, dy) -> dx */
  TF_OP_SILU_GRAD,            /* (x, dy) -> dx */
  TF_OP_SIGMOID_GRAD,         /* (y, dy) -> dx, y = sigmoid(x) */
  TF_OP_TANH_GRAD,            /* (y, dy) -> dx, y = tanh(x) */
  TF_OP_SUM_TO,               /* (dy, like (shape)) -> dy summed over the axes that broadcasting added */
  TF_OP_MAX_GRAD,             /* (x, y, dy) -> dx: dy split evenly among the maxima (reduce attrs) */
  TF_OP_SOFTMAX_GRAD,         /* (y, dy) -> dx */
  TF_OP_LOG_SOFTMAX_GRAD,     /* (y, dy) -> dx */
  TF_OP_LAYER_NORM_GRAD,      /* (x, gamma, dy) -> (dx, dgamma, dbeta) */
  TF_OP_RMS_NORM_GRAD,        /* (x, gamma, dy) -> (dx, dgamma) */
  TF_OP_EMBEDDING_GRAD,       /* (ids, dy, table (shape)) -> dtable, rows scatter-added */
  TF_OP_SLICE_GRAD,           /* (dy, x (shape)) -> dx: dy placed at the slice, zeros elsewhere */
  TF_OP_CONV1D_GRAD_INPUT,    /* (dy, w, x (shape)) -> dx */
  TF_OP_CONV1D_GRAD_WEIGHT,   /* (x, dy, w (shape)) -> dw */
  TF_OP_CONV2D_GRAD_INPUT,    /* (dy, w, x (shape)) -> dx */
  TF_OP_CONV2D_GRAD_WEIGHT,   /* (x, dy, w (shape)) -> dw */
  TF_OP_MAX_POOL2D_GRAD,      /* (x, dy) -> dx: to the first maximum of each window */
  TF_OP_AVG_POOL2D_GRAD,      /* (dy, x (shape)) -> dx */
  TF_OP_ATTENTION_GRAD,       /* (q, k, v, dy) -> (dq, dk, dv), the forward recomputed blockwise */
  TF_OP_CROSS_ENTROPY_GRAD,   /* (logits, labels, dloss) -> dlogits */
  TF_OP_MSE_GRAD,             /* (prediction, target, dloss) -> dprediction */
  TF_OP_BCE_WITH_LOGITS_GRAD, /* (logits, target, dloss) -> dlogits */
  TF_OP_ACCUMULATE,           /* (sum, x): sum += x in place; no outputs */
  TF_OP_ZERO,                 /* (x): x = 0 in place; no outputs */
  TF_OP_GLOBAL_NORM_SQ,       /* (g1, g2, ...) -> f32 scalar sum of squares of every element */
  TF_OP_SGD,                  /* (param, grad, momentum [, norm_sq]): updates param and momentum in place */
  TF_OP_ADAMW,                /* (param, grad, m, v [, norm_sq]): updates param, m and v in place */
  TF_OP_COUNT
} tf_op;

/* Attribute families: one FlatBuffers table each (schema/graph.fbs). */
typedef enum tf_attr_kind {
  TF_ATTR_NONE = 0,
  TF_ATTR_MATMUL, TF_ATTR_REDUCE, TF_ATTR_AXIS, TF_ATTR_NORM, TF_ATTR_SHAPE, TF_ATTR_TRANSPOSE,
  TF_ATTR_SLICE, TF_ATTR_CONV, TF_ATTR_POOL, TF_ATTR_DROPOUT, TF_ATTR_ATTENTION, TF_ATTR_CAST,
  TF_ATTR_GELU, TF_ATTR_CROSS_ENTROPY,
  TF_ATTR_GRAPH_COUNT,                    /* attribute families a .tfg file may hold end here */
  TF_ATTR_OPTIMIZER = TF_ATTR_GRAPH_COUNT, /* sgd, adamw (plans only) */
  TF_ATTR_COUNT
} tf_attr_kind;

typedef struct tf_matmul_attrs { bool transpose_a, transpose_b; } tf_matmul_attrs;
/* sum/mean/max: axes may be negative; n_axes == 0 reduces over every axis. */
typedef struct tf_reduce_attrs { int32_t n_axes; int32_t axes[TF_MAX_RANK]; bool keepdims; } tf_reduce_attrs;
typedef struct tf_axis_attrs { int32_t axis; } tf_axis_attrs; /* softmax, log_softmax, concat */
typedef struct tf_norm_attrs { float epsilon; } tf_norm_attrs;  /* layer_norm, rms_norm: last axis */
typedef struct tf_shape_attrs { tf_shape shape; } tf_shape_attrs; /* reshape, expand */
typedef struct tf_transpose_attrs { int32_t rank; int32_t perm[TF_MAX_RANK]; } tf_transpose_attrs;
/* Python slicing semantics on one axis: negative start/end count from the end, clamped; step >= 1. */
typedef struct tf_slice_attrs { int32_t axis; int64_t start, end, step; } tf_slice_attrs;
/* conv1d uses index 0 only; conv2d/conv_transpose2d use [height, width]. */
typedef struct tf_conv_attrs {
  int32_t stride[2], padding[2], dilation[2], output_padding[2];
  int32_t groups;
} tf_conv_attrs;
/* avg_pool2d divides by the full window, padding included (PyTorch's count_include_pad=True). */
typedef struct tf_pool_attrs { int32_t kernel[2], stride[2], padding[2]; } tf_pool_attrs;
/* Masks from a counter-based RNG keyed by (seed, step, node, element). */
typedef struct tf_dropout_attrs { float rate; uint64_t seed; } tf_dropout_attrs;
/* q [N, Tq, H*D], k and v [N, Tk, H*D] -> [N, Tq, H*D]; scale 0 means 1/sqrt(D). */
typedef struct tf_attention_attrs { int32_t num_heads; bool causal; float scale; } tf_attention_attrs;
typedef struct tf_cast_attrs { tf_dtype to; } tf_cast_attrs;
typedef struct tf_gelu_attrs { bool approximate; } tf_gelu_attrs; /* tanh approximation when true */
/* Mean over targets != ignore_index. */
typedef struct tf_cross_entropy_attrs { int64_t ignore_index; } tf_cross_entropy_attrs;
/* One parameter's update. The gradient is first multiplied by grad_scale (1/k for k accumulated
 * micro-batches), then by min(1, clip_norm / ||g||) when clip_norm > 0 (||g|| from the norm_sq
 * input, computed over every gradient). AdamW's step count comes from the session. */
typedef struct tf_optimizer_attrs {
  float learning_rate, momentum, beta1, beta2, epsilon, weight_decay, clip_norm, grad_scale;
} tf_optimizer_attrs;

typedef struct tf_attrs {
  tf_attr_kind kind;
  union {
    tf_matmul_attrs matmul;
    tf_reduce_attrs reduce;
    tf_axis_attrs axis;
    tf_norm_attrs norm;
    tf_shape_attrs shape;
    tf_transpose_attrs transpose;
    tf_slice_attrs slice;
    tf_conv_attrs conv;
    tf_pool_attrs pool;
    tf_dropout_attrs dropout;
    tf_attention_attrs attention;
    tf_cast_attrs cast;
    tf_gelu_attrs gelu;
    tf_cross_entropy_attrs cross_entropy;
    tf_optimizer_attrs optimizer;
  } u;
} tf_attrs;

typedef enum tf_optimizer { TF_OPTIMIZER_NONE = 0, TF_OPTIMIZER_SGD, TF_OPTIMIZER_ADAMW } tf_optimizer;
typedef enum tf_precision {
  TF_PRECISION_F32 = 0,   /* everything in f32 */
  TF_PRECISION_BF16,      /* f32 master weights, bf16 compute */
  TF_PRECISION_F16        /* f32 master weights, f16 compute with loss scaling */
} tf_precision;

/* How the graph wants to be trained; the compiler's command-line options override fields. */
typedef struct tf_training_config {
  tf_optimizer optimizer;
  double learning_rate;
  double momentum;                 /* SGD */
  double beta1, beta2, epsilon;    /* AdamW */
  double weight_decay;
  double clip_norm;                /* 0: no global-norm clipping */
  int64_t global_batch;            /* 0: the bound value of the batch symbol */
  int32_t accumulate_steps;        /* 0: let the compiler choose */
  tf_precision precision;
  double loss_scale;               /* f16: initial dynamic loss scale */
} tf_training_config;

/* Read-only views returned by the query functions; pointers are borrowed from the graph. */
typedef struct tf_tensor_info {
  const char *name;
  tf_dtype dtype;
  tf_tensor_kind kind;
  tf_shape declared;     /* as written; rank -1 for activations whose shape is inferred */
  int32_t rank;          /* inferred, concrete shape (after tf_graph_infer_shapes) */
  int64_t shape[TF_MAX_RANK];
  int64_t bytes;         /* dtype size x elements; -1 before inference */
  tf_init init;
  int32_t producer;      /* node id, or -1 */
} tf_tensor_info;

typedef struct tf_node_info {
  const char *name;
  tf_op op;
  int32_t n_inputs;
  const tf_tensor_id *inputs;
  tf_tensor_id output;
  const tf_attrs *attrs;
} tf_node_info;

typedef struct tf_graph tf_graph;

/* ---- lifetime ---- */

/* Creates an empty graph named `name`; the caller destroys it with tf_graph_destroy(). */
tf_status tf_graph_create(const char *name, tf_graph **out) TF_MUST_USE;
/* Destroys `graph` and everything it owns; NULL is allowed. */
void tf_graph_destroy(tf_graph *graph);
/* Returns the first builder error (borrowed; NULL if none). */
const struct tf_status_s *tf_graph_status(const tf_graph *graph);

/* ---- building ---- */

/* Declares symbol `name` with a default value (>= 1) and returns its id, or -1 on error. */
int32_t tf_graph_symbol(tf_graph *graph, const char *name, int64_t default_value);
/* Sets the prefix for names of nodes created next ("h.3.attn"); NULL clears it. */
void tf_graph_set_scope(tf_graph *graph, const char *scope);
/* Adds an input (or label) tensor fed from data. */
tf_tensor_id tf_graph_input(tf_graph *graph, const char *name, tf_dtype dtype, tf_shape shape);
tf_tensor_id tf_graph_label(tf_graph *graph, const char *name, tf_dtype dtype, tf_shape shape);
/* Adds a parameter; its shape must be concrete (no symbols). */
tf_tensor_id tf_graph_parameter(tf_graph *graph, const char *name, tf_dtype dtype, tf_shape shape,
                                tf_init init);
/* Adds a constant; its shape may use symbols (e.g. position ids of length T). */
tf_tensor_id tf_graph_constant(tf_graph *graph, const char *name, tf_dtype dtype, tf_shape shape,
                               tf_init init);
/* Adds a node of any op; returns its output tensor. The op constructors below wrap this. */
tf_tensor_id tf_graph_node(tf_graph *graph, tf_op op, const tf_tensor_id *inputs, int32_t n_inputs,
                           const tf_attrs *attrs);
/* Renames tensor `id` (names must be unique). */
void tf_graph_rename(tf_graph *graph, tf_tensor_id id, const char *name);
/* Marks `id` as a graph output (inference results). */
void tf_graph_add_output(tf_graph *graph, tf_tensor_id id);
/* Sets the scalar loss that training minimises. */
void tf_graph_set_loss(tf_graph *graph, tf_tensor_id id);
/* Sets the training configuration stored with the graph. */
void tf_graph_set_training(tf_graph *graph, const tf_training_config *config);

/* Shape helpers. */
tf_dim tf_fixed(int64_t size);
tf_dim tf_sym(int32_t symbol);
tf_dim tf_sym_times(int32_t symbol, int64_t multiple);
tf_shape tf_shape_from(const tf_dim *dims, int32_t rank);
#define TF_SHAPE(...) \
  tf_shape_from((const tf_dim[]){__VA_ARGS__}, (int32_t)(sizeof((tf_dim[]){__VA_ARGS__}) / sizeof(tf_dim)))
tf_init tf_init_make(tf_init_kind kind, double a, double b);

/* ---- op constructors: each returns the output tensor, or TF_NO_TENSOR after an error ---- */
tf_tensor_id tf_matmul(tf_graph *g, tf_tensor_id a, tf_tensor_id b, bool transpose_a, bool transpose_b);
tf_tensor_id tf_add(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_sub(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_mul(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_div(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_unary(tf_graph *g, tf_op op, tf_tensor_id x); /* neg, exp, ..., tanh (not gelu) */
tf_tensor_id tf_gelu(tf_graph *g, tf_tensor_id x, bool approximate);
tf_tensor_id tf_reduce(tf_graph *g, tf_op op, tf_tensor_id x, const int32_t *axes, int32_t n_axes,
                       bool keepdims); /* sum, mean, max */
tf_tensor_id tf_softmax(tf_graph *g, tf_tensor_id x, int32_t axis);
tf_tensor_id tf_log_softmax(tf_graph *g, tf_tensor_id x, int32_t axis);
tf_tensor_id tf_layer_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta,
                           float epsilon); /* beta may be TF_NO_TENSOR */
tf_tensor_id tf_rms_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, float epsilon);
tf_tensor_id tf_embedding(tf_graph *g, tf_tensor_id ids, tf_tensor_id table);
tf_tensor_id tf_reshape(tf_graph *g, tf_tensor_id x, tf_shape shape);
tf_tensor_id tf_transpose(tf_graph *g, tf_tensor_id x, const int32_t *perm, int32_t rank);
tf_tensor_id tf_concat(tf_graph *g, const tf_tensor_id *xs, int32_t n, int32_t axis);
tf_tensor_id tf_slice(tf_graph *g, tf_tensor_id x, int32_t axis, int64_t start, int64_t end, int64_t step);
tf_tensor_id tf_expand(tf_graph *g, tf_tensor_id x, tf_shape shape);
/* bias may be TF_NO_TENSOR. */
tf_tensor_id tf_conv1d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias, int32_t stride,
                       int32_t padding, int32_t dilation, int32_t groups);
tf_tensor_id tf_conv2d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias, const tf_conv_attrs *a);
tf_tensor_id tf_conv_transpose2d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                                 const tf_conv_attrs *a);
tf_tensor_id tf_pool2d(tf_graph *g, tf_op op, tf_tensor_id x, const tf_pool_attrs *a); /* max/avg */
tf_tensor_id tf_dropout(tf_graph *g, tf_tensor_id x, float rate);
tf_tensor_id tf_attention(tf_graph *g, tf_tensor_id q, tf_tensor_id k, tf_tensor_id v, int32_t num_heads,
                          bool causal);
tf_tensor_id tf_cast(tf_graph *g, tf_tensor_id x, tf_dtype to);
tf_tensor_id tf_cross_entropy(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, int64_t ignore_index);
tf_tensor_id tf_mse(tf_graph *g, tf_tensor_id prediction, tf_tensor_id target);
tf_tensor_id tf_bce_with_logits(tf_graph *g, tf_tensor_id logits, tf_tensor_id target);

/* ---- files ---- */

/* Checks the graph (semantics and shapes at the symbols' defaults) and writes it to `path`. */
tf_status tf_graph_save(const tf_graph *graph, const char *path) TF_MUST_USE;
/* Serialises to a FlatBuffer; the caller frees *data with free(). */
tf_status tf_graph_serialize(const tf_graph *graph, void **data, size_t *size) TF_MUST_USE;
/* Loads a .tfg file: FlatBuffers Verifier, then semantic checks; errors name `path`. */
tf_status tf_graph_load(const char *path, tf_graph **out) TF_MUST_USE;
/* Like tf_graph_load() on bytes in memory; `source` names them in errors. */
tf_status tf_graph_parse(const void *data, size_t size, const char *source, tf_graph **out) TF_MUST_USE;

/* ---- symbols and shapes ---- */

/* Binds symbol `name` to `value` (>= 1) for the next shape inference. */
tf_status tf_graph_bind(tf_graph *graph, const char *name, int64_t value) TF_MUST_USE;
/* Binds every "NAME=VALUE" of a comma-separated list, e.g. "N=8,T=256". */
tf_status tf_graph_bind_list(tf_graph *graph, const char *list) TF_MUST_USE;
/* Infers every tensor's concrete shape and byte size from the bound symbols (defaults otherwise). */
tf_status tf_graph_infer_shapes(tf_graph *graph) TF_MUST_USE;

/* ---- queries ---- */
const char *tf_graph_name(const tf_graph *graph);
int32_t tf_graph_tensor_count(const tf_graph *graph);
int32_t tf_graph_node_count(const tf_graph *graph);
int32_t tf_graph_symbol_count(const tf_graph *graph);
/* Fills *info for tensor `id`; returns false when id is out of range. */
bool tf_graph_tensor(const tf_graph *graph, tf_tensor_id id, tf_tensor_info *info);
bool tf_graph_node_at(const tf_graph *graph, int32_t id, tf_node_info *info);
/* Symbol `id`: its name, default and bound value (the default when unbound). */
bool tf_graph_symbol_at(const tf_graph *graph, int32_t id, const char **name, int64_t *default_value,
                        int64_t *value);
tf_tensor_id tf_graph_find_tensor(const tf_graph *graph, const char *name);
int32_t tf_graph_output_count(const tf_graph *graph);
tf_tensor_id tf_graph_output_at(const tf_graph *graph, int32_t index);
tf_tensor_id tf_graph_loss(const tf_graph *graph);
const tf_training_config *tf_graph_training(const tf_graph *graph);
/* Total elements of all parameters (parameter shapes are concrete); INT64_MAX if that overflows. */
int64_t tf_graph_parameter_count(const tf_graph *graph);

/* ---- names ---- */
const char *tf_op_name(tf_op op);      /* "matmul", ...; "?" when out of range */
const char *tf_dtype_name(tf_dtype dtype);
int64_t tf_dtype_size(tf_dtype dtype); /* bytes per element; 0 when out of range */
const char *tf_kind_name(tf_tensor_kind kind);
const char *tf_init_name(tf_init_kind kind);

#ifdef __cplusplus
}
#endif
#endif
