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
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_NO_TENSOR (-1)
typedef int32_t tf_tensor_id;

/* Read-only views returned by the query functions; pointers are borrowed from the graph. */
typedef struct tf_tensor_info {
  const char *name;
  tf_dtype dtype;
  tf_tensor_kind kind;
  tf_shape declared; /* as written; rank -1 for activations whose shape is inferred */
  int32_t rank;      /* inferred, concrete shape (after tf_graph_infer_shapes) */
  int64_t shape[TF_MAX_RANK];
  int64_t bytes; /* dtype size x elements; -1 before inference */
  tf_init init;
  int32_t producer; /* node id, or -1 */
} tf_tensor_info;

typedef struct tf_node_info {
  const char *name;
  tf_op op;
  int32_t n_inputs;
  const tf_tensor_id *inputs;
  tf_tensor_id output;
  const tf_attrs *attrs;
  tf_precision precision; /* override of the precision policy (tf_graph_set_node_precision), or INHERIT */
} tf_node_info;

typedef struct tf_graph tf_graph;

/* The longest tensor, node or symbol name a graph may hold, in bytes: the compiler derives names
 * from them ("grad/<name>", ...) and refuses a graph with longer ones rather than cut them. */
#define TF_MAX_NAME_BYTES 255

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
tf_tensor_id tf_graph_parameter(tf_graph *graph, const char *name, tf_dtype dtype, tf_shape shape, tf_init init);
/* Adds a constant; its shape may use symbols (e.g. position ids of length T). */
tf_tensor_id tf_graph_constant(tf_graph *graph, const char *name, tf_dtype dtype, tf_shape shape, tf_init init);
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
/* Overrides the precision policy for the activations node `node` saves for the backward pass: F32,
 * BF16 or F16 stores them in that type (arithmetic stays f32); INHERIT drops the override. */
tf_status tf_graph_set_node_precision(tf_graph *graph, int32_t node, tf_precision precision) TF_MUST_USE;
/* Marks parameter `tensor` trainable (the default) or frozen: training gives a frozen parameter no
 * gradient, no optimizer state and no update. Refuses a tensor that is not a parameter. */
tf_status tf_graph_set_trainable(tf_graph *graph, tf_tensor_id tensor, bool trainable) TF_MUST_USE;
/* Whether `tensor` is a trainable parameter: false for a frozen one, another kind or a bad id. */
bool tf_graph_is_trainable(const tf_graph *graph, tf_tensor_id tensor);

/* Shape helpers. */
tf_dim tf_fixed(int64_t size);
tf_dim tf_sym(int32_t symbol);
tf_dim tf_sym_times(int32_t symbol, int64_t multiple);
tf_shape tf_shape_from(const tf_dim *dims, int32_t rank);
#define TF_SHAPE(...)                                                                                                  \
  tf_shape_from((const tf_dim[]){__VA_ARGS__}, (int32_t)(sizeof((tf_dim[]){__VA_ARGS__}) / sizeof(tf_dim)))
tf_init tf_init_make(tf_init_kind kind, double a, double b);

/* ---- op constructors: each returns the output tensor, or TF_NO_TENSOR after an error ---- */
tf_tensor_id tf_matmul(tf_graph *g, tf_tensor_id a, tf_tensor_id b, bool transpose_a, bool transpose_b);
tf_tensor_id tf_add(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_sub(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_mul(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
tf_tensor_id tf_div(tf_graph *g, tf_tensor_id a, tf_tensor_id b);
/* x where m != 0, else 0, even where x is NaN or infinite (torch.where(m, x, 0)); broadcasts. */
tf_tensor_id tf_keep(tf_graph *g, tf_tensor_id x, tf_tensor_id m);
/* Any attribute-free float unary: an op whose row in core/op_table.h has shape rule unary_float and
 * attrs NONE (neg, exp, log, sqrt, rsqrt, relu, silu, sigmoid, tanh, ...; not gelu). */
tf_tensor_id tf_unary(tf_graph *g, tf_op op, tf_tensor_id x);
tf_tensor_id tf_gelu(tf_graph *g, tf_tensor_id x, bool approximate);
/* x for x > 0, alpha x otherwise (torch.nn.LeakyReLU(negative_slope=alpha)); alpha must be finite. */
tf_tensor_id tf_leaky_relu(tf_graph *g, tf_tensor_id x, float alpha);
/* min(max(x, lo), hi) (torch.clamp, nn.ReLU6 as (0, 6), nn.Hardtanh); -INFINITY or INFINITY for an
 * absent bound; otherwise finite. Its gradient passes dy where lo < x < hi (PyTorch's hardtanh rule). */
tf_tensor_id tf_clip(tf_graph *g, tf_tensor_id x, float lo, float hi);
tf_tensor_id tf_reduce(tf_graph *g, tf_op op, tf_tensor_id x, const int32_t *axes, int32_t n_axes,
                       bool keepdims); /* sum, mean, max */
tf_tensor_id tf_softmax(tf_graph *g, tf_tensor_id x, int32_t axis);
tf_tensor_id tf_log_softmax(tf_graph *g, tf_tensor_id x, int32_t axis);
tf_tensor_id tf_layer_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta,
                           float epsilon); /* beta may be TF_NO_TENSOR */
tf_tensor_id tf_rms_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, float epsilon);
/* Batch normalisation of x [N, C, ...] per channel (axis 1) with the batch's own mean and biased
 * variance (PyTorch's BatchNorm in training mode); gamma and beta are [C]. No running statistics. */
tf_tensor_id tf_batch_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta, float epsilon);
/* tf_batch_norm that also tracks running statistics, as PyTorch's BatchNorm in training mode: each
 * micro-batch's forward pass sets running = (1 - momentum) running + momentum batch (the unbiased
 * variance for running_var). running_mean and running_var are f32 [C] constants (their initial
 * values), read by nothing else; checkpoints keep them. */
tf_tensor_id tf_batch_norm_tracked(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta,
                                   tf_tensor_id running_mean, tf_tensor_id running_var, float epsilon, float momentum);
tf_tensor_id tf_embedding(tf_graph *g, tf_tensor_id ids, tf_tensor_id table);
tf_tensor_id tf_reshape(tf_graph *g, tf_tensor_id x, tf_shape shape);
tf_tensor_id tf_transpose(tf_graph *g, tf_tensor_id x, const int32_t *perm, int32_t rank);
tf_tensor_id tf_concat(tf_graph *g, const tf_tensor_id *xs, int32_t n, int32_t axis);
tf_tensor_id tf_slice(tf_graph *g, tf_tensor_id x, int32_t axis, int64_t start, int64_t end, int64_t step);
tf_tensor_id tf_expand(tf_graph *g, tf_tensor_id x, tf_shape shape);
/* bias may be TF_NO_TENSOR. */
tf_tensor_id tf_conv1d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias, int32_t stride, int32_t padding,
                       int32_t dilation, int32_t groups);
tf_tensor_id tf_conv2d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias, const tf_conv_attrs *a);
tf_tensor_id tf_conv_transpose2d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                                 const tf_conv_attrs *a);
tf_tensor_id tf_pool2d(tf_graph *g, tf_op op, tf_tensor_id x, const tf_pool_attrs *a); /* max/avg */
tf_tensor_id tf_dropout(tf_graph *g, tf_tensor_id x, float rate);
tf_tensor_id tf_attention(tf_graph *g, tf_tensor_id q, tf_tensor_id k, tf_tensor_id v, int32_t num_heads, bool causal);
tf_tensor_id tf_cast(tf_graph *g, tf_tensor_id x, tf_dtype to);
tf_tensor_id tf_cross_entropy(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, int64_t ignore_index);
/* cross_entropy(matmul(x, weight, false, transpose_weight), labels) without the logits: computed
 * chunk_rows rows at a time (0: every row at once). The compiler makes this of that pattern itself
 * (tf_compile_options.fuse_loss). */
tf_tensor_id tf_linear_cross_entropy(tf_graph *g, tf_tensor_id x, tf_tensor_id weight, bool transpose_weight,
                                     tf_tensor_id labels, int64_t ignore_index, int64_t chunk_rows);
/* CTC loss of logits [N, T, C] (log_softmax over C applied here) against labels [N, S] (i32/i64; a
 * target is its labels before the first negative one, the rest padding), as PyTorch's
 * ctc_loss(reduction='mean'): each sequence's loss / its target length (at least 1), averaged over
 * N; an f32 scalar. input_lengths [N] integer, or TF_NO_TENSOR for T frames each (values clamped to
 * [0, T]). blank in [0, C); a label >= C makes its sequence impossible (an infinite loss, or 0 with
 * zero_infinity). */
tf_tensor_id tf_ctc_loss(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, tf_tensor_id input_lengths,
                         int64_t blank, bool zero_infinity);
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
/* Binds every "NAME=VALUE" of a comma-separated list, e.g. "N=8,T=256"; a symbol bound twice is an error. */
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
bool tf_graph_symbol_at(const tf_graph *graph, int32_t id, const char **name, int64_t *default_value, int64_t *value);
tf_tensor_id tf_graph_find_tensor(const tf_graph *graph, const char *name);
/* The id of the node named `name`, or -1. */
int32_t tf_graph_find_node(const tf_graph *graph, const char *name);
int32_t tf_graph_output_count(const tf_graph *graph);
tf_tensor_id tf_graph_output_at(const tf_graph *graph, int32_t index);
tf_tensor_id tf_graph_loss(const tf_graph *graph);
const tf_training_config *tf_graph_training(const tf_graph *graph);
/* Total elements of all parameters (parameter shapes are concrete); INT64_MAX if that overflows. */
int64_t tf_graph_parameter_count(const tf_graph *graph);

/* ---- names ---- */
const char *tf_kind_name(tf_tensor_kind kind);

#ifdef __cplusplus
}
#endif
#endif
