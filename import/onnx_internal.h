/* The ONNX importer's shared state (the import layer): the model as protobuf-c decoded it, the nodes after
 * pattern rewriting (GELU, attention, transposed matmul operands), and one value per ONNX name,
 * which is a graph tensor, a value known at import time (shape arithmetic, constants), or both. */
#ifndef TIGHTFIT_IMPORT_ONNX_INTERNAL_H
#define TIGHTFIT_IMPORT_ONNX_INTERNAL_H

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

typedef struct ox_value {
  const char *name;                     /* borrowed from the model */
  tf_tensor_id tensor;                  /* the graph tensor, or TF_NO_TENSOR until needed */
  ox_known *known;                      /* owned; NULL unless known at import time */
  const Onnx__TensorProto *initializer; /* a float initializer: a parameter, made on first use */
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
} ox_fused;

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
  bool live;               /* some graph output depends on it */
} ox_node;

/* One tensor of the weights file: an initializer's or a constant's values (`owned` is freed). */
/* In the name of a frozen BatchNormalization's 1 / sqrt(running_var + eps) constant (after the
 * node's output name), one per node: tf_onnx_frozen_batch_norms counts them. */
#define OX_FROZEN_BATCH_NORM_SUFFIX ".batch_norm_inverse_std"

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

/* While importing, symbol i is bound to the i-th prime from 100003 up, so that a size the builder
 * inferred decodes back into (multiple, symbol). A size that is a multiple of one symbol's prime
 * (times less than OX_SYMBOL_PRIME_MIN) is that symbol's multiple; one of no symbol's primes is
 * fixed; anything else (N*T) has no name. Inputs' fixed sizes must be below OX_SYMBOL_PRIME_MIN.
 * Primes this large keep the attention scores [N, H, T, T] of a decomposed export within int64. */
#define OX_SYMBOL_PRIME_MIN 100003
#define OX_MAX_SYMBOLS 16
int64_t ox_symbol_prime(int32_t symbol);

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
  ox_weight *weights;
  int32_t n_weights, cap_weights;
  const char *weights_ref; /* the file name parameters reference */
  tf_strmap owned_names;   /* names the importer made (keys freed at the end) */
} ox_import;

/* ---- values (onnx_values.c) ---- */

/* The value named `name`, created empty when new; NULL when memory runs out. */
ox_value *ox_value_get(ox_import *im, const char *name);
/* The value `name` if it exists, else NULL. */
ox_value *ox_value_find(ox_import *im, const char *name);
/* A new known value of `count` elements (owned by the caller until stored in a value). */
ox_known *ox_known_new(bool is_float, tf_dtype dtype, int32_t rank, const int64_t *shape);
void ox_known_free(ox_known *known);
/* Decodes an ONNX tensor (raw or typed data) into a known value; errors name `what`. */
tf_status ox_known_from_tensor(const Onnx__TensorProto *t, const char *what, ox_known **out) TF_MUST_USE;
/* The tightfit dtype of ONNX element type `type`; false for types tightfit has no dtype for. */
bool ox_dtype(int32_t type, tf_dtype *out);
/* "FLOAT", "INT64", ... for messages. */
const char *ox_dtype_name(int32_t type);
/* The graph tensor of value `name` for node `node` (messages), materialising a parameter from its
 * initializer or a constant from a known value on first use. */
tf_status ox_tensor(ox_import *im, const ox_node *node, const char *name, tf_tensor_id *out) TF_MUST_USE;
/* A graph constant holding known value `k` (taken: freed here), named `name` or, where taken, `name`
 * with underscores added; its values go to the weights file unless they are all one. */
tf_status ox_known_constant(ox_import *im, const ox_node *node, const char *name, ox_known *k,
                            tf_tensor_id *out) TF_MUST_USE;
/* ox_known_constant whose values always go to the weights file, under the constant's name (state
 * that training changes: a tracked running statistic, which tightfit.from_torch sets there). */
tf_status ox_stored_constant(ox_import *im, const ox_node *node, const char *name, ox_known *k,
                             tf_tensor_id *out) TF_MUST_USE;
/* The known value of `name`, or an error naming the node that needs it known. */
tf_status ox_need_known(ox_import *im, const ox_node *node, const char *name, const ox_known **out) TF_MUST_USE;
/* The symbolic shape of graph tensor `id`: each axis decoded from the shape the builder inferred at
 * the import-time symbol values (distinct primes), so N*T-sized axes come back as -1 ("unknown"). */
void ox_tensor_dims(const ox_import *im, tf_tensor_id id, int32_t *rank, tf_dim *dims);
/* The builder's first error, prefixed with the node; NULL when the graph is fine. */
tf_status ox_graph_error(ox_import *im, const ox_node *node);

/* ---- nodes (onnx_ops.c) ---- */

/* True when op_type has a converter. */
bool ox_op_supported(const char *op_type);
/* Emits node `node`: stores every output value (a tensor or a known value). */
tf_status ox_op_emit(ox_import *im, const ox_node *node) TF_MUST_USE;

/* ---- recurrent layers (onnx_recurrent.c) ---- */

/* LSTM and GRU nodes, unrolled over a fixed time axis (tf_lstm / tf_gru); refused with a reason:
 * a symbolic time axis, shorter sequence_lens, peepholes, clip, other activations, input_forget. */
tf_status ox_convert_lstm(ox_import *im, const ox_node *node);
tf_status ox_convert_gru(ox_import *im, const ox_node *node);

/* ---- operators PyTorch 2.x's TorchScript exporter writes around attention ---- */

/* Mod (onnx_elementwise.c): folded on values known at import time; refused on data. */
tf_status ox_convert_mod(ox_import *im, const ox_node *node);
/* Trilu (onnx_triangle.c): folded on a known value; on data with fixed last two axes, times a 0/1
 * triangle. */
tf_status ox_convert_trilu(ox_import *im, const ox_node *node);

/* ---- patterns (onnx_patterns.c) ---- */

/* Rewrites GELU, attention and transposed matmul operands in im->nodes. */
void ox_rewrite_patterns(ox_import *im);
/* Marks the nodes the graph outputs depend on. */
void ox_mark_live(ox_import *im);

/* ---- attribute helpers (onnx_values.c) ---- */
const Onnx__AttributeProto *ox_attr(const ox_node *node, const char *name);
int64_t ox_attr_int(const ox_node *node, const char *name, int64_t fallback);
double ox_attr_float(const ox_node *node, const char *name, double fallback);
/* Copies the ints of attribute `name` into out (at most max); returns how many (-1 when absent). */
int32_t ox_attr_ints(const ox_node *node, const char *name, int64_t *out, int32_t max);
/* "Conv '/conv1/Conv'" for messages (into a static-free buffer of the caller). */
const char *ox_node_label(const ox_node *node, char *buf, size_t size);

#endif
