/* dcgan: a DCGAN over mel spectrograms [N, 1, mels, frames]. The generator upsamples a latent
 * vector 16x with four transposed convolutions; the discriminator mirrors it with four strided
 * convolutions and judges real spectrograms and generated ones with the same weights.
 *
 * The discriminator's activations are leaky_relu(0.2), the generator's relu, as in the DCGAN paper;
 * there is no batch norm (batch statistics are not in the op set yet), so every convolution has a
 * bias (PyTorch's default).
 * The graph has one loss, the discriminator's; the generator's loss is a graph output. Training
 * the graph as is updates the generator to help the discriminator: alternating GAN steps need a
 * second graph (or per-loss parameter groups), which v1 does not have. */
#include <inttypes.h>
#include <stdio.h>

#include "models/family.h"
#include "tightfit/layers.h"

enum { Z_DIM, G_CHANNELS, D_CHANNELS, MELS, FRAMES, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [Z_DIM] = TF_ZOO_KNOB("z_dim", 100, 1, TF_ZOO_SIZE_MAX, "latent vector size"),
    [G_CHANNELS] = TF_ZOO_KNOB("g_channels", 64, 1, 65536, "generator base width (its layers use 8x, 4x, 2x, 1x)"),
    [D_CHANNELS] = TF_ZOO_KNOB("d_channels", 64, 1, 65536, "discriminator base width (its layers use 1x, 2x, 4x, 8x)"),
    [MELS] = TF_ZOO_KNOB("mels", 128, 16, 65536, "spectrogram height (a multiple of 16)"),
    [FRAMES] = TF_ZOO_KNOB("frames", 64, 16, 65536, "spectrogram width (a multiple of 16)"),
};

static tf_status check(const int64_t *k) {
  if (k[MELS] % 16 != 0 || k[FRAMES] % 16 != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "mels (%" PRId64 ") and frames (%" PRId64 ") must be multiples of 16 (four 2x stages)",
                         k[MELS], k[FRAMES]);
  return NULL;
}

/* Kernel 4, stride 2, padding 1: exactly doubles (transposed) or halves (conv) height and width. */
static const tf_conv_attrs stride_2 = {.stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};

typedef struct gan_weights {
  tf_tensor_id g_fc_weight, g_fc_bias, g_weight[4], g_bias[4];
  tf_tensor_id d_weight[4], d_bias[4], d_fc_weight, d_fc_bias;
} gan_weights;

/* Creates every parameter first: the discriminator runs twice on the same ones. */
static gan_weights make_weights(tf_graph *g, const int64_t *k) {
  gan_weights w;
  int64_t gc = k[G_CHANNELS], dc = k[D_CHANNELS], cells = (k[MELS] / 16) * (k[FRAMES] / 16);
  int64_t seed_features = 8 * gc * cells;
  w.g_fc_weight = tf_layers_parameter(g, TF_SHAPE(tf_fixed(seed_features), tf_fixed(k[Z_DIM])),
                                      tf_layers_fan_in_uniform(k[Z_DIM]), "generator.fc.weight");
  w.g_fc_bias = tf_layers_parameter(g, TF_SHAPE(tf_fixed(seed_features)), tf_layers_zeros(), "generator.fc.bias");
  const int64_t g_in[4] = {8 * gc, 4 * gc, 2 * gc, gc}, g_out[4] = {4 * gc, 2 * gc, gc, 1};
  for (int i = 0; i < 4; i++) {
    /* conv_transpose2d weights are [in, out, kh, kw]; PyTorch takes the fan-in from dim 1. */
    w.g_weight[i] = tf_layers_parameter(g, TF_SHAPE(tf_fixed(g_in[i]), tf_fixed(g_out[i]), tf_fixed(4), tf_fixed(4)),
                                        tf_layers_fan_in_uniform(g_out[i] * 16), "generator.deconv.%d.weight", i);
    w.g_bias[i] =
        tf_layers_parameter(g, TF_SHAPE(tf_fixed(g_out[i])), tf_layers_zeros(), "generator.deconv.%d.bias", i);
  }
  const int64_t d_in[4] = {1, dc, 2 * dc, 4 * dc}, d_out[4] = {dc, 2 * dc, 4 * dc, 8 * dc};
  for (int i = 0; i < 4; i++) {
    w.d_weight[i] = tf_layers_parameter(g, TF_SHAPE(tf_fixed(d_out[i]), tf_fixed(d_in[i]), tf_fixed(4), tf_fixed(4)),
                                        tf_layers_fan_in_uniform(d_in[i] * 16), "discriminator.conv.%d.weight", i);
    w.d_bias[i] =
        tf_layers_parameter(g, TF_SHAPE(tf_fixed(d_out[i])), tf_layers_zeros(), "discriminator.conv.%d.bias", i);
  }
  int64_t d_features = 8 * dc * cells;
  w.d_fc_weight = tf_layers_parameter(g, TF_SHAPE(tf_fixed(1), tf_fixed(d_features)),
                                      tf_layers_fan_in_uniform(d_features), "discriminator.fc.weight");
  w.d_fc_bias = tf_layers_parameter(g, TF_SHAPE(tf_fixed(1)), tf_layers_zeros(), "discriminator.fc.bias");
  return w;
}

/* z [N, z_dim] -> Linear -> [N, 8g, mels/16, frames/16] -> 4 x (relu, conv_transpose) -> tanh. */
static tf_tensor_id generator(tf_graph *g, const int64_t *k, const gan_weights *w, int32_t batch, tf_tensor_id z) {
  tf_graph_set_scope(g, "generator.fc");
  tf_tensor_id x = tf_add(g, tf_matmul(g, z, w->g_fc_weight, false, true), w->g_fc_bias);
  x = tf_reshape(
      g, x, TF_SHAPE(tf_sym(batch), tf_fixed(8 * k[G_CHANNELS]), tf_fixed(k[MELS] / 16), tf_fixed(k[FRAMES] / 16)));
  for (int i = 0; i < 4; i++) {
    tf_layers_scope(g, "generator.deconv.%d", i);
    x = tf_conv_transpose2d(g, tf_unary(g, TF_OP_RELU, x), w->g_weight[i], w->g_bias[i], &stride_2);
  }
  return tf_unary(g, TF_OP_TANH, x);
}

/* spectrogram [N, 1, mels, frames] -> 4 x (conv, leaky_relu 0.2) -> flatten -> Linear -> logit [N, 1]. */
static tf_tensor_id discriminator(tf_graph *g, const int64_t *k, const gan_weights *w, int32_t batch, tf_tensor_id x,
                                  const char *scope) {
  for (int i = 0; i < 4; i++) {
    tf_layers_scope(g, "%s.conv.%d", scope, i);
    x = tf_leaky_relu(g, tf_conv2d(g, x, w->d_weight[i], w->d_bias[i], &stride_2), 0.2f);
  }
  int64_t features = 8 * k[D_CHANNELS] * (k[MELS] / 16) * (k[FRAMES] / 16);
  tf_layers_scope(g, "%s.fc", scope);
  x = tf_reshape(g, x, TF_SHAPE(tf_sym(batch), tf_fixed(features)));
  return tf_add(g, tf_matmul(g, x, w->d_fc_weight, false, true), w->d_fc_bias);
}

static void build(tf_graph *g, const int64_t *k) {
  int32_t batch = tf_graph_symbol(g, "N", 8);
  tf_tensor_id z = tf_graph_input(g, "z", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(k[Z_DIM])));
  tf_tensor_id real = tf_graph_input(g, "spectrogram", TF_F32,
                                     TF_SHAPE(tf_sym(batch), tf_fixed(1), tf_fixed(k[MELS]), tf_fixed(k[FRAMES])));
  tf_tensor_id ones = tf_graph_constant(g, "real_target", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(1)),
                                        tf_init_make(TF_INIT_FILL, 1.0, 0.0));
  tf_tensor_id zeros = tf_graph_constant(g, "fake_target", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(1)),
                                         tf_init_make(TF_INIT_FILL, 0.0, 0.0));
  gan_weights w = make_weights(g, k);

  tf_tensor_id fake = generator(g, k, &w, batch, z);
  tf_tensor_id real_logit = discriminator(g, k, &w, batch, real, "discriminator_real");
  tf_tensor_id fake_logit = discriminator(g, k, &w, batch, fake, "discriminator_fake");

  tf_graph_set_scope(g, "loss");
  /* Sequenced, not nested: C leaves the order of argument evaluation, hence of node names, open. */
  tf_tensor_id real_loss = tf_bce_with_logits(g, real_logit, ones);
  tf_tensor_id fake_loss = tf_bce_with_logits(g, fake_logit, zeros);
  tf_tensor_id d_loss = tf_add(g, real_loss, fake_loss);
  tf_tensor_id g_loss = tf_bce_with_logits(g, fake_logit, ones);
  tf_graph_rename(g, fake, "generated");
  tf_graph_add_output(g, fake);
  tf_training_config training = tf_layers_adamw();
  training.learning_rate = 2e-4; /* the DCGAN paper's Adam settings */
  training.beta1 = 0.5;
  training.weight_decay = 0.0;
  tf_layers_finish(g, g_loss, "generator_loss", d_loss, &training);
}

const tf_zoo_family tf_zoo_family_dcgan = {
    .name = "dcgan", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = check, .build = build};
