/* xtts: the GPT decoder of an XTTS-v2-style text-to-speech model. Text tokens and audio codes have
 * their own embeddings and learned position tables; their concatenation runs through GPT-2 blocks
 * with causal attention; then the text part feeds text_head and the audio part mel_head.
 *
 * The text part has a fixed length (knob text_length; pad the text and mask the padding with
 * label -100) while the audio length is the symbol Ta: splitting the concatenation takes a slice at
 * the text length, and slice bounds are numbers, not symbols (tf_slice_attrs). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "models/family.h"
#include "tightfit/layers.h"

enum { LAYERS, D_MODEL, HEADS, TEXT_VOCAB, AUDIO_VOCAB, TEXT_POSITIONS, AUDIO_POSITIONS, TEXT_LENGTH, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [LAYERS] = TF_ZOO_KNOB("layers", 30, 1, TF_ZOO_LAYERS_MAX, "transformer blocks"),
    [D_MODEL] = TF_ZOO_KNOB("d_model", 1024, 1, TF_ZOO_SIZE_MAX, "model width"),
    [HEADS] = TF_ZOO_KNOB("heads", 16, 1, TF_ZOO_SIZE_MAX, "attention heads (must divide d_model)"),
    [TEXT_VOCAB] = TF_ZOO_KNOB("text_vocab", 6681, 1, TF_ZOO_SIZE_MAX, "text token vocabulary"),
    [AUDIO_VOCAB] = TF_ZOO_KNOB("audio_vocab", 1026, 1, TF_ZOO_SIZE_MAX, "audio code vocabulary"),
    [TEXT_POSITIONS] = TF_ZOO_KNOB("text_positions", 404, 1, TF_ZOO_SIZE_MAX, "text position embedding rows"),
    [AUDIO_POSITIONS] = TF_ZOO_KNOB("audio_positions", 608, 1, TF_ZOO_SIZE_MAX, "audio position embedding rows"),
    [TEXT_LENGTH] =
        TF_ZOO_KNOB("text_length", 64, 1, TF_ZOO_SIZE_MAX, "text tokens per sample (fixed; <= text_positions)"),
};

static tf_status check(const int64_t *k) {
  if (k[TEXT_LENGTH] > k[TEXT_POSITIONS])
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "text_length (%" PRId64 ") must be <= text_positions (%" PRId64 ")",
                         k[TEXT_LENGTH], k[TEXT_POSITIONS]);
  return tf_zoo_check_heads(k[D_MODEL], k[HEADS]);
}

/* ids [N, length] -> embedding + learned positions [N, length, d]. */
static tf_tensor_id embed(tf_graph *g, tf_tensor_id ids, tf_dim length, int64_t vocab, int64_t rows, int64_t d,
                          const char *name, const char *position_name) {
  tf_tensor_id table =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(vocab), tf_fixed(d)), tf_layers_normal(0.02), "%s.weight", name);
  tf_tensor_id position_table =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(rows), tf_fixed(d)), tf_layers_normal(0.02), "%s.weight", position_name);
  char ids_name[TF_LAYERS_NAME_MAX];
  snprintf(ids_name, sizeof(ids_name), "%s.position_ids", position_name);
  tf_tensor_id position_ids =
      tf_graph_constant(g, ids_name, TF_I32, TF_SHAPE(length), tf_init_make(TF_INIT_ARANGE, 0.0, 1.0));
  tf_graph_set_scope(g, name);
  tf_tensor_id embedded = tf_embedding(g, ids, table);
  tf_tensor_id positions = tf_embedding(g, position_ids, position_table);
  return tf_add(g, embedded, positions);
}

static void build(tf_graph *g, const int64_t *k) {
  int64_t d = k[D_MODEL], text_length = k[TEXT_LENGTH];
  int32_t batch = tf_graph_symbol(g, "N", 8);
  int32_t audio = tf_graph_symbol(g, "Ta", k[AUDIO_POSITIONS] < 256 ? k[AUDIO_POSITIONS] : 256);
  tf_dim text_dim = tf_fixed(text_length), audio_dim = tf_sym(audio);
  tf_tensor_id text_tokens = tf_graph_input(g, "text_tokens", TF_I32, TF_SHAPE(tf_sym(batch), text_dim));
  tf_tensor_id audio_codes = tf_graph_input(g, "audio_codes", TF_I32, TF_SHAPE(tf_sym(batch), audio_dim));
  tf_tensor_id text_labels = tf_graph_label(g, "text_labels", TF_I32, TF_SHAPE(tf_sym(batch), text_dim));
  tf_tensor_id audio_labels = tf_graph_label(g, "audio_labels", TF_I32, TF_SHAPE(tf_sym(batch), audio_dim));

  tf_tensor_id text =
      embed(g, text_tokens, text_dim, k[TEXT_VOCAB], k[TEXT_POSITIONS], d, "text_embedding", "text_pos_embedding");
  tf_tensor_id codes =
      embed(g, audio_codes, audio_dim, k[AUDIO_VOCAB], k[AUDIO_POSITIONS], d, "mel_embedding", "mel_pos_embedding");
  tf_graph_set_scope(g, "inputs");
  tf_tensor_id x = tf_concat(g, (const tf_tensor_id[]){text, codes}, 2, 1); /* [N, text_length + Ta, d] */

  tf_block_config block = tf_layers_gpt2_block(d, k[HEADS], k[LAYERS]);
  x = tf_layers_stack(g, x, TF_NO_TENSOR, &block, k[LAYERS], "h", "final_norm");

  tf_graph_set_scope(g, "split");
  tf_tensor_id text_part = tf_slice(g, x, 1, 0, text_length, 1);
  tf_tensor_id audio_part = tf_slice(g, x, 1, text_length, INT64_MAX, 1);
  tf_tensor_id text_logits =
      tf_layers_linear(g, text_part, d, k[TEXT_VOCAB], true, tf_layers_normal(0.02), "text_head");
  tf_tensor_id audio_logits =
      tf_layers_linear(g, audio_part, d, k[AUDIO_VOCAB], true, tf_layers_normal(0.02), "mel_head");

  tf_graph_set_scope(g, "loss");
  tf_tensor_id text_loss = tf_cross_entropy(g, text_logits, text_labels, -100);
  tf_tensor_id audio_loss = tf_cross_entropy(g, audio_logits, audio_labels, -100);
  tf_tensor_id loss = tf_add(g, text_loss, audio_loss);
  tf_graph_rename(g, text_loss, "text_loss");
  tf_graph_rename(g, audio_loss, "audio_loss");
  tf_graph_rename(g, text_logits, "text_logits");
  tf_graph_add_output(g, text_logits);
  tf_training_config training = tf_layers_adamw();
  tf_layers_finish(g, audio_logits, "audio_logits", loss, &training);
}

const tf_zoo_family tf_zoo_family_xtts = {
    .name = "xtts", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = check, .build = build};
