/* Shared building blocks of the zoo: linear, layer norm, attention, MLP, the pre-LN block, the stack. */
#include "tightfit/layers.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

const tf_block_names tf_layers_gpt2_names = {
    .ln_1 = "ln_1",
    .qkv = "attn.c_attn",
    .attn_out = "attn.c_proj",
    .ln_2 = "ln_2",
    .fc_in = "mlp.c_fc",
    .fc_out = "mlp.c_proj",
    .ln_cross = "ln_cross",
    .cross_q = "cross_attn.q_proj",
    .cross_k = "cross_attn.k_proj",
    .cross_v = "cross_attn.v_proj",
    .cross_out = "cross_attn.out_proj",
};

const tf_block_names tf_layers_timm_names = {
    .ln_1 = "norm1",
    .qkv = "attn.qkv",
    .attn_out = "attn.proj",
    .ln_2 = "norm2",
    .fc_in = "mlp.fc1",
    .fc_out = "mlp.fc2",
    .ln_cross = "norm_cross",
    .cross_q = "cross_attn.q",
    .cross_k = "cross_attn.k",
    .cross_v = "cross_attn.v",
    .cross_out = "cross_attn.proj",
};

tf_init tf_layers_zeros(void) { return tf_init_make(TF_INIT_ZEROS, 0.0, 0.0); }
tf_init tf_layers_ones(void) { return tf_init_make(TF_INIT_ONES, 0.0, 0.0); }
tf_init tf_layers_normal(double std) { return tf_init_make(TF_INIT_NORMAL, 0.0, std); }

tf_init tf_layers_fan_in_uniform(int64_t fan_in) {
  double bound = 1.0 / sqrt((double)(fan_in > 0 ? fan_in : 1));
  return tf_init_make(TF_INIT_UNIFORM, -bound, bound);
}

void tf_layers_scope(tf_graph *g, const char *format, ...) {
  char scope[TF_LAYERS_NAME_MAX];
  va_list args;
  va_start(args, format);
  vsnprintf(scope, sizeof(scope), format, args);
  va_end(args);
  tf_graph_set_scope(g, scope);
}

tf_tensor_id tf_layers_parameter(tf_graph *g, tf_shape shape, tf_init init, const char *format, ...) {
  char name[TF_LAYERS_NAME_MAX];
  va_list args;
  va_start(args, format);
  vsnprintf(name, sizeof(name), format, args);
  va_end(args);
  return tf_graph_parameter(g, name, TF_F32, shape, init);
}

tf_tensor_id tf_layers_linear(tf_graph *g, tf_tensor_id x, int64_t in, int64_t out, bool bias, tf_init init,
                              const char *name) {
  tf_tensor_id weight = tf_layers_parameter(g, TF_SHAPE(tf_fixed(out), tf_fixed(in)), init, "%s.weight", name);
  tf_tensor_id b =
      bias ? tf_layers_parameter(g, TF_SHAPE(tf_fixed(out)), tf_layers_zeros(), "%s.bias", name) : TF_NO_TENSOR;
  tf_graph_set_scope(g, name);
  tf_tensor_id y = tf_matmul(g, x, weight, false, true);
  return bias ? tf_add(g, y, b) : y;
}

tf_tensor_id tf_layers_layer_norm(tf_graph *g, tf_tensor_id x, int64_t d, float epsilon, const char *name) {
  tf_tensor_id gamma = tf_layers_parameter(g, TF_SHAPE(tf_fixed(d)), tf_layers_ones(), "%s.weight", name);
  tf_tensor_id beta = tf_layers_parameter(g, TF_SHAPE(tf_fixed(d)), tf_layers_zeros(), "%s.bias", name);
  tf_graph_set_scope(g, name);
  return tf_layer_norm(g, x, gamma, beta, epsilon);
}

tf_tensor_id tf_layers_conv2d(tf_graph *g, tf_tensor_id x, int64_t in, int64_t out, int64_t kernel, int32_t stride,
                              int32_t padding, const char *name) {
  tf_tensor_id weight =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(out), tf_fixed(in), tf_fixed(kernel), tf_fixed(kernel)),
                          tf_layers_fan_in_uniform(in * kernel * kernel), "%s.weight", name);
  tf_tensor_id bias = tf_layers_parameter(g, TF_SHAPE(tf_fixed(out)), tf_layers_zeros(), "%s.bias", name);
  tf_graph_set_scope(g, name);
  tf_conv_attrs conv = {.stride = {stride, stride}, .padding = {padding, padding}, .dilation = {1, 1}, .groups = 1};
  return tf_conv2d(g, x, weight, bias, &conv);
}

tf_tensor_id tf_layers_positions(tf_graph *g, int32_t symbol, tf_tensor_id table, const char *ids_name) {
  tf_tensor_id ids =
      tf_graph_constant(g, ids_name, TF_I32, TF_SHAPE(tf_sym(symbol)), tf_init_make(TF_INIT_ARANGE, 0.0, 1.0));
  tf_graph_set_scope(g, ids_name);
  return tf_embedding(g, ids, table);
}

/* Joins a block prefix and a relative name: "h.3" + "attn.c_attn". */
static const char *join(char *buffer, const char *prefix, const char *name) {
  snprintf(buffer, TF_LAYERS_NAME_MAX, "%s.%s", prefix, name);
  return buffer;
}

/* The scope of a sub-layer's own nodes: "h.3.attn.c_attn" -> "h.3.attn". */
static void scope_parent(tf_graph *g, const char *prefix, const char *name) {
  char scope[TF_LAYERS_NAME_MAX];
  join(scope, prefix, name);
  char *last_dot = NULL;
  for (char *c = scope; *c; c++)
    if (*c == '.')
      last_dot = c;
  if (last_dot)
    *last_dot = '\0';
  tf_graph_set_scope(g, scope);
}

tf_tensor_id tf_layers_self_attention(tf_graph *g, tf_tensor_id x, const tf_block_config *c, const char *prefix) {
  char name[TF_LAYERS_NAME_MAX];
  int64_t d = c->d_model;
  tf_tensor_id qkv =
      tf_layers_linear(g, x, d, 3 * d, true, tf_layers_normal(c->init_std), join(name, prefix, c->names->qkv));
  scope_parent(g, prefix, c->names->qkv);
  tf_tensor_id q = tf_slice(g, qkv, -1, 0, d, 1);
  tf_tensor_id k = tf_slice(g, qkv, -1, d, 2 * d, 1);
  tf_tensor_id v = tf_slice(g, qkv, -1, 2 * d, 3 * d, 1);
  tf_tensor_id attended = tf_attention(g, q, k, v, (int32_t)c->heads, c->causal);
  return tf_layers_linear(g, attended, d, d, true, tf_layers_normal(c->residual_init_std),
                          join(name, prefix, c->names->attn_out));
}

tf_tensor_id tf_layers_cross_attention(tf_graph *g, tf_tensor_id x, tf_tensor_id memory, const tf_block_config *c,
                                       const char *prefix) {
  char name[TF_LAYERS_NAME_MAX];
  int64_t d = c->d_model;
  tf_init init = tf_layers_normal(c->init_std);
  tf_tensor_id q = tf_layers_linear(g, x, d, d, true, init, join(name, prefix, c->names->cross_q));
  tf_tensor_id k = tf_layers_linear(g, memory, d, d, true, init, join(name, prefix, c->names->cross_k));
  tf_tensor_id v = tf_layers_linear(g, memory, d, d, true, init, join(name, prefix, c->names->cross_v));
  scope_parent(g, prefix, c->names->cross_q);
  tf_tensor_id attended = tf_attention(g, q, k, v, (int32_t)c->heads, false);
  return tf_layers_linear(g, attended, d, d, true, tf_layers_normal(c->residual_init_std),
                          join(name, prefix, c->names->cross_out));
}

tf_tensor_id tf_layers_mlp(tf_graph *g, tf_tensor_id x, const tf_block_config *c, const char *prefix) {
  char name[TF_LAYERS_NAME_MAX];
  tf_tensor_id h = tf_layers_linear(g, x, c->d_model, c->ffn, true, tf_layers_normal(c->init_std),
                                    join(name, prefix, c->names->fc_in));
  h = tf_gelu(g, h, c->gelu_approximate);
  return tf_layers_linear(g, h, c->ffn, c->d_model, true, tf_layers_normal(c->residual_init_std),
                          join(name, prefix, c->names->fc_out));
}

tf_tensor_id tf_layers_block(tf_graph *g, tf_tensor_id x, tf_tensor_id memory, const tf_block_config *c,
                             const char *prefix) {
  char name[TF_LAYERS_NAME_MAX];
  tf_tensor_id h = tf_layers_layer_norm(g, x, c->d_model, c->epsilon, join(name, prefix, c->names->ln_1));
  h = tf_layers_self_attention(g, h, c, prefix);
  tf_graph_set_scope(g, prefix);
  x = tf_add(g, x, h);
  if (memory != TF_NO_TENSOR) {
    h = tf_layers_layer_norm(g, x, c->d_model, c->epsilon, join(name, prefix, c->names->ln_cross));
    h = tf_layers_cross_attention(g, h, memory, c, prefix);
    tf_graph_set_scope(g, prefix);
    x = tf_add(g, x, h);
  }
  h = tf_layers_layer_norm(g, x, c->d_model, c->epsilon, join(name, prefix, c->names->ln_2));
  h = tf_layers_mlp(g, h, c, prefix);
  tf_graph_set_scope(g, prefix);
  return tf_add(g, x, h);
}

tf_block_config tf_layers_gpt2_block(int64_t d_model, int64_t heads, int64_t layers) {
  return (tf_block_config){
      .d_model = d_model,
      .heads = heads,
      .ffn = 4 * d_model,
      .causal = true,
      .gelu_approximate = true,
      .epsilon = 1e-5f,
      .init_std = 0.02,
      .residual_init_std = 0.02 / sqrt(2.0 * (double)layers),
      .names = &tf_layers_gpt2_names,
  };
}

tf_tensor_id tf_layers_stack(tf_graph *g, tf_tensor_id x, tf_tensor_id memory, const tf_block_config *config,
                             int64_t count, const char *prefix, const char *norm_name) {
  char name[TF_LAYERS_NAME_MAX];
  for (int64_t i = 0; i < count; i++) {
    snprintf(name, sizeof(name), "%s.%lld", prefix, (long long)i);
    x = tf_layers_block(g, x, memory, config, name);
  }
  return tf_layers_layer_norm(g, x, config->d_model, config->epsilon, norm_name);
}

void tf_layers_finish(tf_graph *g, tf_tensor_id output, const char *output_name, tf_tensor_id loss,
                      const tf_training_config *training) {
  tf_graph_rename(g, output, output_name ? output_name : "logits");
  tf_graph_rename(g, loss, "loss");
  tf_graph_add_output(g, output);
  tf_graph_set_loss(g, loss);
  tf_graph_set_training(g, training);
}

tf_training_config tf_layers_adamw(void) {
  return (tf_training_config){
      .optimizer = TF_OPTIMIZER_ADAMW,
      .learning_rate = 3e-4,
      .beta1 = 0.9,
      .beta2 = 0.999,
      .epsilon = 1e-8,
      .weight_decay = 0.01,
      .precision = TF_PRECISION_F32,
  };
}

tf_training_config tf_layers_sgd(void) {
  return (tf_training_config){
      .optimizer = TF_OPTIMIZER_SGD,
      .learning_rate = 0.05,
      .momentum = 0.9,
      .precision = TF_PRECISION_F32,
  };
}
