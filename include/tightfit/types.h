/* The vocabulary beneath everything (the core layer, shared/DESIGN.md): element types, shapes, the
 * op numbers and their attributes. Graphs, plans, kernels and backends all speak it; it depends on
 * nothing but the C library and the op table (core/op_table.h, macros only), so a kernel or a plan
 * reader needs no graph or compiler header. */
#ifndef TIGHTFIT_TYPES_H
#define TIGHTFIT_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/op_table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_MAX_RANK 8
#define TF_SCHEMA_VERSION 1 /* the graph schema version this build writes and the newest it reads */
#define TF_MAX_OUTPUTS 4    /* outputs of one node (graph ops have one; some gradient ops three) */

typedef enum tf_tensor_kind {
  TF_INPUT = 0,  /* fed per micro-batch from data */
  TF_LABEL,      /* fed per micro-batch; targets of the loss */
  TF_PARAMETER,  /* trained weights, with an initializer */
  TF_CONSTANT,   /* fixed values (e.g. position ids), with an initializer */
  TF_ACTIVATION, /* produced by exactly one node */
  TF_KIND_COUNT
} tf_tensor_kind;

typedef enum tf_dtype { TF_F32 = 0, TF_F16, TF_BF16, TF_I32, TF_I64, TF_U8, TF_DTYPE_COUNT } tf_dtype;

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
  TF_INIT_NONE = 0, /* inputs, labels and activations */
  TF_INIT_ZEROS,
  TF_INIT_ONES,
  TF_INIT_NORMAL,         /* mean = a, std = b */
  TF_INIT_UNIFORM,        /* low = a, high = b */
  TF_INIT_XAVIER_UNIFORM, /* gain = a; fans by the convention in docs/format.md */
  TF_INIT_KAIMING_NORMAL, /* gain = a: std = gain / sqrt(fan_in) */
  TF_INIT_ARANGE,         /* start = a, step = b, along the flattened tensor */
  TF_INIT_EXTERNAL,       /* tensor `key` of safetensors file `file` (relative to the .tfg) */
  TF_INIT_FILL,           /* every element = a */
  TF_INIT_COUNT
} tf_init_kind;

typedef struct tf_init {
  tf_init_kind kind;
  double a, b;
  const char *file; /* TF_INIT_EXTERNAL only; copied by the graph */
  const char *key;
} tf_init;

/* The ops: TF_OP_<ID> = <number> for every row of the op table (core/op_table.h), in number order.
 * Graph and plan files store the numbers: a row's number never changes, new ops append. */
// clang-format off
typedef enum tf_op {
#define TF_OP_ENUM(ID, name, number, ...) TF_OP_##ID = number,
  TF_OP_TABLE(TF_OP_ENUM)
#undef TF_OP_ENUM
  TF_OP_COUNT
} tf_op;
// clang-format on

/* Attribute families: one FlatBuffers table each (schema/graph.fbs). */
typedef enum tf_attr_kind {
  TF_ATTR_NONE = 0,
  TF_ATTR_MATMUL,
  TF_ATTR_REDUCE,
  TF_ATTR_AXIS,
  TF_ATTR_NORM,
  TF_ATTR_SHAPE,
  TF_ATTR_TRANSPOSE,
  TF_ATTR_SLICE,
  TF_ATTR_CONV,
  TF_ATTR_POOL,
  TF_ATTR_DROPOUT,
  TF_ATTR_ATTENTION,
  TF_ATTR_CAST,
  TF_ATTR_GELU,
  TF_ATTR_CROSS_ENTROPY,
  TF_ATTR_OPTIMIZER,  /* sgd, adamw (plans only) */
  TF_ATTR_LEAKY_RELU, /* families added since, of graphs and plans alike, take the next numbers */
  TF_ATTR_CTC,
  TF_ATTR_CLIP,
  TF_ATTR_COUNT
} tf_attr_kind;

typedef struct tf_matmul_attrs {
  bool transpose_a, transpose_b;
} tf_matmul_attrs;
/* sum/mean/max: axes may be negative; n_axes == 0 reduces over every axis. */
typedef struct tf_reduce_attrs {
  int32_t n_axes;
  int32_t axes[TF_MAX_RANK];
  bool keepdims;
} tf_reduce_attrs;
typedef struct tf_axis_attrs {
  int32_t axis;
} tf_axis_attrs; /* softmax, log_softmax, concat */
typedef struct tf_norm_attrs {
  float epsilon;
  float momentum; /* batch_norm with running statistics: running = (1 - momentum) running + momentum batch */
} tf_norm_attrs;  /* layer_norm, rms_norm: last axis; batch_norm, batch_norm_running: axis 1 */
typedef struct tf_shape_attrs {
  tf_shape shape;
} tf_shape_attrs; /* reshape, expand */
typedef struct tf_transpose_attrs {
  int32_t rank;
  int32_t perm[TF_MAX_RANK];
} tf_transpose_attrs;
/* Python slicing semantics on one axis: negative start/end count from the end, clamped; step >= 1. */
typedef struct tf_slice_attrs {
  int32_t axis;
  int64_t start, end, step;
} tf_slice_attrs;
/* conv1d uses index 0 only; conv2d/conv_transpose2d use [height, width]. */
typedef struct tf_conv_attrs {
  int32_t stride[2], padding[2], dilation[2], output_padding[2];
  int32_t groups;
} tf_conv_attrs;
/* avg_pool2d divides by the full window, padding included (PyTorch's count_include_pad=True). */
typedef struct tf_pool_attrs {
  int32_t kernel[2], stride[2], padding[2];
} tf_pool_attrs;
/* Masks from a counter-based RNG keyed by (seed, step, node, element). */
typedef struct tf_dropout_attrs {
  float rate;
  uint64_t seed;
} tf_dropout_attrs;
/* q [N, Tq, H*D], k and v [N, Tk, H*D] -> [N, Tq, H*D]; scale 0 means 1/sqrt(D). */
typedef struct tf_attention_attrs {
  int32_t num_heads;
  bool causal;
  float scale;
} tf_attention_attrs;
typedef struct tf_cast_attrs {
  tf_dtype to;
} tf_cast_attrs;
typedef struct tf_gelu_attrs {
  bool approximate;
} tf_gelu_attrs; /* tanh approximation when true */
/* y = x for x > 0, alpha x otherwise (PyTorch's negative_slope; ONNX's alpha). */
typedef struct tf_leaky_relu_attrs {
  float alpha;
} tf_leaky_relu_attrs;
/* y = min(max(x, lo), hi) (all hi where lo > hi, as torch.clamp); lo finite or -inf (absent), hi finite
 * or inf. */
typedef struct tf_clip_attrs {
  float lo, hi;
} tf_clip_attrs;
/* ctc_loss, ctc_loss_grad: the blank class (in [0, classes)) and whether an impossible alignment's
 * infinite loss, and its gradient, count as 0 (PyTorch's zero_infinity; false: the loss is inf). */
typedef struct tf_ctc_attrs {
  int64_t blank;
  bool zero_infinity;
} tf_ctc_attrs;
/* Mean over targets != ignore_index. linear_cross_entropy also reads transpose_weight (weight is
 * [V, d] when true, [d, V] when false) and chunk_rows (rows of logits computed at a time; 0: all). */
typedef struct tf_cross_entropy_attrs {
  int64_t ignore_index;
  bool transpose_weight;
  int64_t chunk_rows;
} tf_cross_entropy_attrs;
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
    tf_leaky_relu_attrs leaky_relu;
    tf_ctc_attrs ctc;
    tf_clip_attrs clip;
  } u;
} tf_attrs;

/* ADAMW8BIT: AdamW with its moments stored as 8-bit codes and a scale per block (the adamw8bit op). */
typedef enum tf_optimizer {
  TF_OPTIMIZER_NONE = 0,
  TF_OPTIMIZER_SGD,
  TF_OPTIMIZER_ADAMW,
  TF_OPTIMIZER_ADAMW8BIT
} tf_optimizer;
typedef enum tf_precision {
  TF_PRECISION_INHERIT = -1, /* a node's override only: none, the policy decides (never stored in a file) */
  TF_PRECISION_F32 = 0,      /* everything in f32 */
  TF_PRECISION_BF16,         /* f32 master weights, bf16 compute */
  TF_PRECISION_F16           /* f32 master weights, f16 compute with loss scaling */
} tf_precision;

/* How the graph wants to be trained; the compiler's command-line options override fields. */
typedef struct tf_training_config {
  tf_optimizer optimizer;
  double learning_rate;
  double momentum;              /* SGD */
  double beta1, beta2, epsilon; /* AdamW */
  double weight_decay;
  double clip_norm;         /* 0: no global-norm clipping */
  int64_t global_batch;     /* 0: the bound value of the batch symbol */
  int32_t accumulate_steps; /* 0: let the compiler choose */
  tf_precision precision;
  double loss_scale; /* f16: initial dynamic loss scale (0: 2^16), a power of two in the range below */
} tf_training_config;

/* The dynamic loss scale of f16 plans stays a power of two 2^e, TF_LOSS_SCALE_MIN_LOG2 <= e <=
 * TF_LOSS_SCALE_MAX_LOG2: never below 1, where scaling the f32 gradients could underflow. */
#define TF_LOSS_SCALE_MIN_LOG2 0
#define TF_LOSS_SCALE_MAX_LOG2 24

/* The memory regions of a plan, each allocated once by a session. */
typedef enum tf_region {
  TF_REGION_PARAMETERS = 0,  /* parameters and constants */
  TF_REGION_GRADIENTS,       /* one accumulated gradient per trained parameter */
  TF_REGION_OPTIMIZER_STATE, /* momentum / Adam moments */
  TF_REGION_ARENA,           /* activations, backward temporaries, kernel workspaces: reused by liveness */
  TF_REGION_IO,              /* one micro-batch of inputs and labels, double-buffered */
  TF_REGION_COUNT,           /* the device regions above; a session allocates each on the device */
  /* Host memory, never the device's: the optimizer state and gradients of a plan compiled with them
   * offloaded (tf_plan.host_steps), allocated by the runtime and read and written by the host steps
   * only. */
  TF_REGION_HOST = TF_REGION_COUNT
} tf_region;

/* The device memory a backend needs beyond the plan's regions (DESIGN: "device overhead"), as named
 * parts: the CUDA context, library handles, module code, CUDA-graph memory, allocation rounding,
 * Vulkan staging. Each part says where its figure comes from ("default: ...", "measured on ..."). */
#define TF_MAX_OVERHEAD_PARTS 8
#define TF_OVERHEAD_NAME_BYTES 32
#define TF_OVERHEAD_SOURCE_BYTES 224

typedef struct tf_overhead_part {
  char name[TF_OVERHEAD_NAME_BYTES];     /* "context", "libraries", "rounding", ... */
  int64_t bytes;                         /* >= 0 */
  char source[TF_OVERHEAD_SOURCE_BYTES]; /* why this figure */
} tf_overhead_part;

typedef struct tf_device_overhead {
  int32_t n_parts;
  tf_overhead_part parts[TF_MAX_OVERHEAD_PARTS];
} tf_device_overhead;

/* Names and sizes: "matmul", ...; "f32", ...; "?" when out of range. Bytes per element (0 when out
 * of range). */
const char *tf_op_name(tf_op op); /* "matmul", ...; "?" when out of range */
/* The ops this library knows are 0 .. tf_op_count() - 1 (its TF_OP_COUNT): bindings read the names
 * from it (tf_op_name) rather than typing op numbers. */
int32_t tf_op_count(void);
/* The op named `name` ("matmul", ...), or TF_OP_COUNT when no op has that name. */
tf_op tf_op_from_name(const char *name);
/* Whether `op` is an attribute-free float unary of model graphs, y = f(x) element by element (neg,
 * exp, ..., abs): the ops tf_unary() builds. */
bool tf_op_is_unary(tf_op op);
const char *tf_dtype_name(tf_dtype dtype);
int64_t tf_dtype_size(tf_dtype dtype);       /* bytes per element; 0 when out of range */
const char *tf_init_name(tf_init_kind kind); /* "normal", ...; "?" when out of range */
/* "f32", "bf16", "f16", or "inherit" (TF_PRECISION_INHERIT); "?" when out of range. */
const char *tf_precision_name(tf_precision precision);
/* "[2,3,4]" for messages, into `buf` (at most `size` bytes); returns buf. */
const char *tf_format_shape(const int64_t *shape, int32_t rank, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
