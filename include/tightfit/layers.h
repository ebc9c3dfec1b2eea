/* Layer helpers over the graph builder (tightfit/graph.h): parameters with formatted names, linear
 * and conv layers, layer norm, attention, MLP, the pre-LN transformer block and a stack of them. The
 * zoo builds its models with them (gpt, vit, asr, xtts, cnn, mlp); so can a program or Python.
 *
 * Conventions (they make weights exchangeable with PyTorch by name):
 * - a Linear weight is [out, in] (nn.Linear) and is applied as matmul(x, W, false, true) + bias;
 * - parameter names are the state_dict keys of the PyTorch reference in tests/zoo/torch_reference.py;
 * - every function sets the builder's scope to the name of what it builds, so node names read like
 *   "h.3.attn/attention"; callers set the scope again before building their own nodes.
 * Errors stick in the graph (see graph.h); these functions never fail on their own. */
#ifndef TIGHTFIT_LAYERS_H
#define TIGHTFIT_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "tightfit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_LAYERS_NAME_MAX 256

/* ---- initializers ---- */

tf_init tf_layers_zeros(void);
tf_init tf_layers_ones(void);
tf_init tf_layers_normal(double std);
/* uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for Linear and Conv weights. */
tf_init tf_layers_fan_in_uniform(int64_t fan_in);

/* ---- names and parameters ---- */

/* Sets the builder's scope to a printf-formatted name. */
void tf_layers_scope(tf_graph *g, const char *format, ...) TF_PRINTF(2, 3);
/* Adds an f32 parameter named by `format`. */
tf_tensor_id tf_layers_parameter(tf_graph *g, tf_shape shape, tf_init init, const char *format, ...) TF_PRINTF(4, 5);

/* ---- layers ---- */

/* y = x W^T (+ b): "<name>.weight" [out, in] and, when `bias`, "<name>.bias" [out] (zeros). */
tf_tensor_id tf_layers_linear(tf_graph *g, tf_tensor_id x, int64_t in, int64_t out, bool bias, tf_init init,
                              const char *name);
/* conv2d with a square `kernel`, `stride` and `padding` on x [N, in, H, W] + bias: "<name>.weight"
 * [out, in, kernel, kernel] (fan-in uniform, as PyTorch's nn.Conv2d) and "<name>.bias" [out] (zeros). */
tf_tensor_id tf_layers_conv2d(tf_graph *g, tf_tensor_id x, int64_t in, int64_t out, int64_t kernel, int32_t stride,
                              int32_t padding, const char *name);
/* Layer norm over the last axis (size d): "<name>.weight" (ones) and "<name>.bias" (zeros). */
tf_tensor_id tf_layers_layer_norm(tf_graph *g, tf_tensor_id x, int64_t d, float epsilon, const char *name);
/* A learned position embedding of sequence symbol `symbol`: a constant `ids_name` i32 [symbol] holding
 * 0, 1, 2, ..., looked up in `table` [rows, d]; returns [symbol, d], which broadcasts over the batch. */
tf_tensor_id tf_layers_positions(tf_graph *g, int32_t symbol, tf_tensor_id table, const char *ids_name);

/* ---- the transformer block ---- */

/* Parameter names inside a block, relative to its prefix. The cross-attention names are used by
 * decoder blocks only (tf_layers_block with a memory). */
typedef struct tf_block_names {
  const char *ln_1, *qkv, *attn_out, *ln_2, *fc_in, *fc_out;
  const char *ln_cross, *cross_q, *cross_k, *cross_v, *cross_out;
} tf_block_names;

/* GPT-2 names: ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj; cross-attention as
 * ln_cross, cross_attn.{q,k,v,out}_proj. */
extern const tf_block_names tf_layers_gpt2_names;
/* timm ViT names: norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2. */
extern const tf_block_names tf_layers_timm_names;

typedef struct tf_block_config {
  int64_t d_model, heads, ffn;
  bool causal;              /* self-attention mask */
  bool gelu_approximate;    /* tanh GELU (GPT-2) or exact (ViT, speech) */
  float epsilon;            /* layer norm */
  double init_std;          /* normal(0, std) for the linear weights */
  double residual_init_std; /* for attn_out and fc_out, which write into the residual stream */
  const tf_block_names *names;
} tf_block_config;

/* The block's parts on x [N, T, d], named "<prefix>.<names->...>": self-attention (one fused
 * Linear(d, 3d) sliced into q, k, v, then the out projection), cross-attention over memory [N, S, d]
 * (separate q, k, v, out Linear layers), and the MLP (Linear(d, ffn), GELU, Linear(ffn, d)). No
 * layer norm or residual: tf_layers_block adds those. */
tf_tensor_id tf_layers_self_attention(tf_graph *g, tf_tensor_id x, const tf_block_config *config, const char *prefix);
tf_tensor_id tf_layers_cross_attention(tf_graph *g, tf_tensor_id x, tf_tensor_id memory, const tf_block_config *config,
                                       const char *prefix);
tf_tensor_id tf_layers_mlp(tf_graph *g, tf_tensor_id x, const tf_block_config *config, const char *prefix);

/* A pre-LN transformer block on x [N, T, d]:
 *   x += attn(ln_1(x));  [x += cross_attn(ln_cross(x), memory)];  x += mlp(ln_2(x))
 * Self-attention uses one fused Linear(d, 3d) sliced into q, k, v. Cross-attention runs only when
 * `memory` [N, S, d] is not TF_NO_TENSOR, with separate q, k, v and out Linear layers (bias). */
tf_tensor_id tf_layers_block(tf_graph *g, tf_tensor_id x, tf_tensor_id memory, const tf_block_config *config,
                             const char *prefix);

/* The GPT-2 block of a model with `layers` blocks: ffn 4 x d_model, causal, tanh GELU, epsilon
 * 1e-5, normal(0, 0.02) weights, and 0.02 / sqrt(2 x layers) for those that write into the residual
 * stream; GPT-2 names (gpt, xtts). */
tf_block_config tf_layers_gpt2_block(int64_t d_model, int64_t heads, int64_t layers);

/* `count` blocks on x, named "<prefix>.0" ... "<prefix>.<count - 1>", then a layer norm `norm_name`
 * (the config's width and epsilon): the stack of a transformer. `memory` as in tf_layers_block. */
tf_tensor_id tf_layers_stack(tf_graph *g, tf_tensor_id x, tf_tensor_id memory, const tf_block_config *config,
                             int64_t count, const char *prefix, const char *norm_name);

/* Names `output` "logits" (or `output_name`) and `loss` "loss", marks the output, sets the loss and
 * the training configuration: the common ending of a model. */
void tf_layers_finish(tf_graph *g, tf_tensor_id output, const char *output_name, tf_tensor_id loss,
                      const tf_training_config *training);

/* The training configuration most presets use: AdamW, lr 3e-4, betas 0.9/0.999, eps 1e-8,
 * weight decay 0.01. */
tf_training_config tf_layers_adamw(void);
/* SGD with momentum 0.9, lr 0.05, no weight decay (the small classifiers). */
tf_training_config tf_layers_sgd(void);

#ifdef __cplusplus
}
#endif
#endif
