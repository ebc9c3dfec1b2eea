/* The ONNX importer's state, shared by every stage (import/stages.txt): types and limits only,
 * no functions. The model as protobuf-c decoded it, the nodes after pattern rewriting (GELU,
 * attention, transposed matmul operands), and one value per ONNX name, which is a graph tensor, a
 * value known at import time (shape arithmetic, constants), or both. The stages, lowest first:
 * decode (onnx_decode.h), values (onnx_values.h, onnx_fold.h), patterns (onnx_patterns.h),
 * converters (onnx_convert.h, onnx_converters.h, onnx_ops.h) and the driver (onnx_import.c,
 * onnx_warnings.c); each uses only the stages below it (patterns and converters not each other). */
#ifndef TIGHTFIT_IMPORT_ONNX_STATE_H
#define TIGHTFIT_IMPORT_ONNX_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/strmap.h"
#include "onnx/onnx.pb-c.h"
#include "tightfit/onnx.h"

/* A value known at import time: integers may be symbolic (a multiple of one symbol, from Shape of a
 * tensor with dynamic axes); floats are plain numbers. Its own shape is fixed. */
typedef struct ox_known {
  bool is_float;
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t count;
  tf_dim *ints;  /* count entries when !is_float */
  double *reals; /* count entries when is_float */
} ox_known;

/* A tensor with no elements (a slice that selects nothing: GPT-NeoX-Japanese's `q[..., rotary_ndims:]`
 * when the rotary part is the whole head): the graph has no such tensor, so the value keeps its dtype
 * and shape, Concat leaves it out and Shape reads it; any other use is refused. */
typedef struct ox_empty {
  tf_dtype dtype;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
} ox_empty;

typedef struct ox_value {
  const char *name;                     /* borrowed from the model */
  tf_tensor_id tensor;                  /* the graph tensor, or TF_NO_TENSOR until needed */
  ox_known *known;                      /* owned; NULL unless known at import time */
  ox_empty *empty;                      /* owned; NULL unless the value has no elements */
  const Onnx__TensorProto *initializer; /* a float initializer: a parameter, made on first use */
  bool is_float_size;                   /* the tensor is symbolic size float_size cast to a float */
  tf_dim float_size;                    /* (onnx_layout.c's Cast: a Range to it stays a constant) */
  bool selection;                       /* NonZero's positions of `mask`, no tensor (onnx_masked.c) */
  bool masked;                          /* the tensor's elements where `mask` holds: x[mask] densely */
  bool masked_shape;                    /* Shape of a masked value: its whole tensor's, for Expand */
  tf_tensor_id mask;                    /* the 0/1 mask of a selection or masked value */
  int32_t mask_source;                  /* which mask: the value NonZero read, less any Expand of it */
  bool has_positions;                   /* a NonZero of this value was made: its 0/1 mask `positions` */
  tf_tensor_id positions;
} ox_value;

typedef enum ox_fused {
  OX_PLAIN = 0,  /* the ONNX node itself */
  OX_GELU_ERF,   /* x * 0.5 * (1 + erf(x / sqrt 2)): inputs {x} */
  OX_GELU_TANH,  /* x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): inputs {x} */
  OX_ATTENTION,  /* reshape-transpose-matmul-scale-(causal mask)-softmax-matmul-transpose-reshape:
                    inputs {q, k, v, q's 4-d shape} */
  OX_LAYER_NORM, /* (x - mean) / sqrt(var + eps) * gamma + beta, last axis: inputs {x, gamma, beta}, eps in scale */
  OX_RMS_NORM,   /* x * rsqrt(mean(x^2) + eps) * gamma, last axis: inputs {x, gamma}, eps in scale */
  OX_SILU,       /* x * sigmoid(x): inputs {x} */
  OX_NLL_OF_LOG_SOFTMAX, /* NegativeLogLikelihoodLoss (mean, no weight) of LogSoftmax(z): inputs {z, labels},
                            the LogSoftmax's axis in softmax_axis */
} ox_fused;

/* A node as decoded (proto, inputs) and as the patterns stage rewrote it (fused, the fields below). */
typedef struct ox_node {
  const Onnx__NodeProto *proto;
  ox_fused fused;
  int32_t n_inputs;
  const char *const *inputs; /* the proto's inputs, or fused_inputs ("" for an absent optional input) */
  const char *fused_inputs[5];
  bool transpose_b;        /* MatMul/Gemm: input 1 read through a dropped 2-d Transpose */
  bool causal;             /* attention */
  int32_t pool_padding[2]; /* AveragePool: the padding of a Pad of zeros folded into it */
  double scale;            /* attention: scores are multiplied by this; layer norm: epsilon */
  bool scale_divides;      /* attention with a computed scale (input 4): scores are divided by it */
  int64_t softmax_axis;    /* OX_NLL_OF_LOG_SOFTMAX: the LogSoftmax's axis attribute, as written */
  bool live;               /* some graph output depends on it */
} ox_node;

/* In the name of a frozen BatchNormalization's 1 / sqrt(running_var + eps) constant (after the
 * node's output name), one per node: tf_onnx_frozen_batch_norms counts them. */
#define OX_FROZEN_BATCH_NORM_SUFFIX ".batch_norm_inverse_std"

/* One tensor of the weights file: an initializer's or a constant's values (`owned` is freed). */
typedef struct ox_weight {
  const char *name;
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  const void *data;
  void *owned;
} ox_weight;

/* ONNX files up to protobuf's own 2 GiB limit; larger models keep weights outside, which we refuse. */
#define OX_MAX_FILE_BYTES ((uint64_t)2 << 30)

/* While importing, symbol i is bound to the i-th prime from 100003 up (ox_symbol_prime), so that a
 * size the builder inferred decodes back into (multiple, symbol). A size that is a multiple of one
 * symbol's prime (times less than OX_SYMBOL_PRIME_MIN) is that symbol's multiple; one of no symbol's
 * primes is fixed; anything else (N*T) has no name. Inputs' fixed sizes must be below
 * OX_SYMBOL_PRIME_MIN. Primes this large keep the attention scores [N, H, T, T] of a decomposed
 * export within int64. */
#define OX_SYMBOL_PRIME_MIN 100003
#define OX_MAX_SYMBOLS 16

typedef struct ox_import {
  const char *source; /* the file name, for messages */
  const tf_onnx_options *options;
  Onnx__ModelProto *model;
  const Onnx__GraphProto *onnx;
  int64_t opset;
  tf_graph *graph;
  ox_node *nodes;
  int32_t n_nodes;
  tf_strmap producers; /* value name -> node index */
  ox_value *values;
  int32_t n_values, cap_values;
  tf_strmap value_ids; /* value name -> index in values */
  int32_t n_symbols;
  int64_t folded_elements; /* the elements of every known value node outputs got (ox_fold_budget) */
  int64_t file_bytes;      /* the model's size */
  ox_weight *weights;
  int32_t n_weights, cap_weights;
  const char *weights_ref; /* the file name parameters reference */
  tf_strmap owned_names;   /* names the importer made (keys freed at the end) */
  int32_t branch_depth;    /* the If branches being emitted inside one another (onnx_if.c) */
} ox_import;

/* How deep If branches may nest, in the importer's walks and its emission. */
#define OX_MAX_BRANCH_DEPTH 16

#endif
