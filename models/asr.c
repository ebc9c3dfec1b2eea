/* asr: a transformer encoder-decoder speech recogniser (Whisper-like): log-mel frames in, text
 * tokens out. The encoder subsamples the frames 4x with two strided convolutions. With ctc=1 the
 * decoder gives way to a CTC head on the encoder (wav2vec2/Conformer-CTC style). */
#include "models/family.h"
#include "tightfit/layers.h"

enum { D_MODEL, ENC_LAYERS, DEC_LAYERS, HEADS, VOCAB, MELS, MAX_FRAMES, MAX_TOKENS, FFN, CTC, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [D_MODEL] = TF_ZOO_KNOB("d_model", 256, 1, TF_ZOO_SIZE_MAX, "model width"),
    [ENC_LAYERS] = TF_ZOO_KNOB("enc_layers", 12, 1, TF_ZOO_LAYERS_MAX, "encoder blocks"),
    [DEC_LAYERS] = TF_ZOO_KNOB("dec_layers", 6, 1, TF_ZOO_LAYERS_MAX, "decoder blocks"),
    [HEADS] =
        TF_ZOO_DERIVED_KNOB("heads", 4, 1, TF_ZOO_SIZE_MAX, "attention heads (default d_model / 64)", "d_model", 1, 64),
    [VOCAB] = TF_ZOO_KNOB("vocab", 5000, 1, TF_ZOO_SIZE_MAX, "text vocabulary size"),
    [MELS] = TF_ZOO_KNOB("mels", 80, 1, 4096, "mel bins per input frame"),
    [MAX_FRAMES] = TF_ZOO_KNOB("max_frames", 1500, 1, TF_ZOO_SIZE_MAX,
                               "encoder position embedding rows (frames after 4x subsampling)"),
    [MAX_TOKENS] = TF_ZOO_KNOB("max_tokens", 448, 1, TF_ZOO_SIZE_MAX, "decoder position embedding rows"),
    [FFN] = TF_ZOO_DERIVED_KNOB("ffn", 1024, 1, TF_ZOO_SIZE_MAX, "feed-forward width (default 4 x d_model)", "d_model",
                                4, 1),
    [CTC] = TF_ZOO_KNOB("ctc", 0, 0, 1,
                        "1: no decoder; a per-frame linear head over vocab classes (0 the blank) and the CTC loss "
                        "against labels [N, U] padded with -1 (zero_infinity)"),
};

static tf_status check(const int64_t *k) { return tf_zoo_check_heads(k[D_MODEL], k[HEADS]); }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* conv1d kernel 3, stride 2, padding 1, + bias, then gelu: halves the frames. */
static tf_tensor_id subsample(tf_graph *g, tf_tensor_id x, int64_t in, int64_t out, const char *name) {
  tf_tensor_id weight = tf_layers_parameter(g, TF_SHAPE(tf_fixed(out), tf_fixed(in), tf_fixed(3)),
                                            tf_layers_fan_in_uniform(in * 3), "%s.weight", name);
  tf_tensor_id bias = tf_layers_parameter(g, TF_SHAPE(tf_fixed(out)), tf_layers_zeros(), "%s.bias", name);
  tf_graph_set_scope(g, name);
  return tf_gelu(g, tf_conv1d(g, x, weight, bias, 2, 1, 1, 1), false);
}

static tf_block_config block_config(const int64_t *k) {
  return (tf_block_config){
      .d_model = k[D_MODEL],
      .heads = k[HEADS],
      .ffn = k[FFN],
      .causal = false,
      .gelu_approximate = false,
      .epsilon = 1e-5f,
      .init_std = 0.02,
      .residual_init_std = 0.02,
      .names = &tf_layers_gpt2_names,
  };
}

/* mel [N, mels, 4T] -> 2 x subsample -> [N, T, d] + positions -> blocks -> ln_f: [N, T, d]. */
static tf_tensor_id encoder(tf_graph *g, const int64_t *k, int32_t batch, int32_t frames) {
  int64_t d = k[D_MODEL];
  tf_tensor_id mel =
      tf_graph_input(g, "mel", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(k[MELS]), tf_sym_times(frames, 4)));
  tf_tensor_id x = subsample(g, mel, k[MELS], d, "encoder.conv1"); /* [N, d, 2T] */
  x = subsample(g, x, d, d, "encoder.conv2");                      /* [N, d, T] */
  x = tf_transpose(g, x, (const int32_t[]){0, 2, 1}, 3);           /* [N, T, d] */
  tf_tensor_id table = tf_layers_parameter(g, TF_SHAPE(tf_fixed(k[MAX_FRAMES]), tf_fixed(d)), tf_layers_normal(0.02),
                                           "encoder.embed_positions.weight");
  tf_tensor_id positions = tf_layers_positions(g, frames, table, "encoder.position_ids");
  tf_graph_set_scope(g, "encoder");
  x = tf_add(g, x, positions);

  tf_block_config block = block_config(k);
  return tf_layers_stack(g, x, TF_NO_TENSOR, &block, k[ENC_LAYERS], "encoder.blocks", "encoder.ln_f");
}

/* tokens [N, U] -> embed_tokens + positions -> blocks (causal self-attention, cross-attention to
 * the encoder) -> ln_f -> logits = h embed_tokens^T [N, U, vocab]. */
static tf_tensor_id decoder(tf_graph *g, const int64_t *k, int32_t batch, int32_t tokens_symbol, tf_tensor_id memory) {
  int64_t d = k[D_MODEL];
  tf_tensor_id tokens = tf_graph_input(g, "tokens", TF_I32, TF_SHAPE(tf_sym(batch), tf_sym(tokens_symbol)));
  tf_tensor_id embed_tokens = tf_layers_parameter(g, TF_SHAPE(tf_fixed(k[VOCAB]), tf_fixed(d)), tf_layers_normal(0.02),
                                                  "decoder.embed_tokens.weight");
  tf_tensor_id table = tf_layers_parameter(g, TF_SHAPE(tf_fixed(k[MAX_TOKENS]), tf_fixed(d)), tf_layers_normal(0.02),
                                           "decoder.embed_positions.weight");
  tf_tensor_id positions = tf_layers_positions(g, tokens_symbol, table, "decoder.position_ids");
  tf_graph_set_scope(g, "decoder");
  tf_tensor_id x = tf_add(g, tf_embedding(g, tokens, embed_tokens), positions);

  tf_block_config block = block_config(k);
  block.causal = true;
  x = tf_layers_stack(g, x, memory, &block, k[DEC_LAYERS], "decoder.blocks", "decoder.ln_f");
  tf_graph_set_scope(g, "decoder.head");
  return tf_matmul(g, x, embed_tokens, false, true); /* tied to the token embedding */
}

/* The encoder's frames [N, T, d] -> logits [N, T, vocab] ("ctc_head"), class 0 the blank; the loss is
 * PyTorch's ctc_loss(reduction='mean', zero_infinity=True) against labels [N, U], U <= T. */
static void build_ctc(tf_graph *g, const int64_t *k, int32_t batch, int32_t tokens, tf_tensor_id memory) {
  tf_tensor_id logits =
      tf_layers_linear(g, memory, k[D_MODEL], k[VOCAB], true, tf_layers_fan_in_uniform(k[D_MODEL]), "ctc_head");
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_sym(batch), tf_sym(tokens)));
  tf_graph_set_scope(g, "loss");
  tf_tensor_id loss = tf_ctc_loss(g, logits, labels, TF_NO_TENSOR, 0, true);
  tf_training_config training = tf_layers_adamw();
  tf_layers_finish(g, logits, NULL, loss, &training);
}

static void build(tf_graph *g, const int64_t *k) {
  int32_t batch = tf_graph_symbol(g, "N", 8);
  /* Defaults: 100 encoder frames (4 s of 10 ms mel frames) and 32 tokens, within the tables. */
  int32_t frames = tf_graph_symbol(g, "T", min64(100, k[MAX_FRAMES]));
  int32_t tokens = tf_graph_symbol(g, "U", min64(32, k[MAX_TOKENS]));
  tf_tensor_id memory = encoder(g, k, batch, frames);
  if (k[CTC]) {
    build_ctc(g, k, batch, tokens, memory);
    return;
  }
  tf_tensor_id logits = decoder(g, k, batch, tokens, memory);
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_sym(batch), tf_sym(tokens)));
  tf_zoo_finish_classifier(g, logits, labels, tf_layers_adamw());
}

const tf_zoo_family tf_zoo_family_asr = {
    .name = "asr", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = check, .build = build};
