/* cnn: a small convolutional image classifier (8x8 digits by default). */
#include "models/family.h"
#include "tightfit/layers.h"

enum { IMAGE, CHANNELS, CLASSES, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [IMAGE] = TF_ZOO_KNOB("image", 8, 4, 4096, "image height and width (two 2x2 max-pools halve it twice)"),
    [CHANNELS] = TF_ZOO_KNOB("channels", 1, 1, 4096, "input channels"),
    [CLASSES] = TF_ZOO_KNOB("classes", 10, 1, TF_ZOO_SIZE_MAX, "output classes"),
};

/* conv2d 3x3 (padding 1) + bias, relu, max_pool2d 2x2: the channels change, the size halves. */
static tf_tensor_id stage(tf_graph *g, tf_tensor_id x, int64_t in, int64_t out, const char *name) {
  x = tf_layers_conv2d(g, x, in, out, 3, 1, 1, name);
  x = tf_unary(g, TF_OP_RELU, x);
  tf_pool_attrs pool = {.kernel = {2, 2}, .stride = {2, 2}};
  return tf_pool2d(g, TF_OP_MAX_POOL2D, x, &pool);
}

/* x [N, channels, image, image] -> stage(16) -> stage(32) -> flatten -> Linear -> logits [N, classes]. */
static void build(tf_graph *g, const int64_t *k) {
  int32_t batch = tf_graph_symbol(g, "N", 8);
  int64_t size = k[IMAGE];
  tf_tensor_id x =
      tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(k[CHANNELS]), tf_fixed(size), tf_fixed(size)));
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_sym(batch)));

  x = stage(g, x, k[CHANNELS], 16, "conv1");
  x = stage(g, x, 16, 32, "conv2");
  int64_t pooled = size / 2 / 2; /* max-pool floors, as in PyTorch */
  int64_t features = 32 * pooled * pooled;
  tf_graph_set_scope(g, "flatten");
  x = tf_reshape(g, x, TF_SHAPE(tf_sym(batch), tf_fixed(features)));
  tf_tensor_id logits = tf_layers_linear(g, x, features, k[CLASSES], true, tf_layers_fan_in_uniform(features), "fc");

  tf_zoo_finish_classifier(g, logits, labels, tf_layers_sgd());
}

const tf_zoo_family tf_zoo_family_cnn = {
    .name = "cnn", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = NULL, .build = build};
