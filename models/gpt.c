/* gpt: a GPT-2-style decoder-only language model (pre-LN blocks, learned positions, tied head). */
#include <inttypes.h>

#include "models/family.h"
#include "tightfit/layers.h"

enum { VOCAB, CTX, D_MODEL, LAYERS, HEADS, SEQ, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [VOCAB] = TF_ZOO_KNOB("vocab", 128, 1, TF_ZOO_SIZE_MAX, "vocabulary size (token embedding rows)"),
    [CTX] = TF_ZOO_KNOB("ctx", 256, 1, TF_ZOO_SIZE_MAX, "context length (position embedding rows)"),
    [D_MODEL] = TF_ZOO_KNOB("d_model", 128, 1, TF_ZOO_SIZE_MAX, "model width"),
    [LAYERS] = TF_ZOO_KNOB("layers", 4, 1, TF_ZOO_LAYERS_MAX, "transformer blocks"),
    [HEADS] = TF_ZOO_KNOB("heads", 4, 1, TF_ZOO_SIZE_MAX, "attention heads (must divide d_model)"),
    [SEQ] = TF_ZOO_KNOB("seq", 64, 1, TF_ZOO_SIZE_MAX,
                        "default of the sequence symbol T (<= ctx; bind another at compile time)"),
};

static tf_status check(const int64_t *k) {
  if (k[SEQ] > k[CTX])
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "seq (%" PRId64 ") must be <= ctx (%" PRId64 ")", k[SEQ], k[CTX]);
  return tf_zoo_check_heads(k[D_MODEL], k[HEADS]);
}

/* tokens [N, T] -> wte + wpe -> layers x block -> ln_f -> logits = h wte^T [N, T, vocab]. */
static void build(tf_graph *g, const int64_t *k) {
  int64_t d = k[D_MODEL];
  int32_t batch = tf_graph_symbol(g, "N", 8);
  int32_t time = tf_graph_symbol(g, "T", k[SEQ]);
  tf_tensor_id tokens = tf_graph_input(g, "tokens", TF_I32, TF_SHAPE(tf_sym(batch), tf_sym(time)));
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_sym(batch), tf_sym(time)));

  tf_tensor_id wte =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(k[VOCAB]), tf_fixed(d)), tf_layers_normal(0.02), "wte.weight");
  tf_tensor_id wpe =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(k[CTX]), tf_fixed(d)), tf_layers_normal(0.01), "wpe.weight");
  tf_tensor_id positions = tf_layers_positions(g, time, wpe, "position_ids");
  tf_graph_set_scope(g, "wte");
  tf_tensor_id x = tf_add(g, tf_embedding(g, tokens, wte), positions);

  tf_block_config block = tf_layers_gpt2_block(d, k[HEADS], k[LAYERS]);
  x = tf_layers_stack(g, x, TF_NO_TENSOR, &block, k[LAYERS], "h", "ln_f");

  tf_graph_set_scope(g, "lm_head");
  tf_tensor_id logits = tf_matmul(g, x, wte, false, true); /* tied to the token embedding */
  tf_zoo_finish_classifier(g, logits, labels, tf_layers_adamw());
}

const tf_zoo_family tf_zoo_family_gpt = {
    .name = "gpt", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = check, .build = build};
