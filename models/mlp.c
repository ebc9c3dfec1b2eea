/* mlp: a multi-layer perceptron classifier (the 8x8 digits set by default). */
#include <stdio.h>

#include "models/family.h"
#include "tightfit/layers.h"

enum { INPUTS, HIDDEN, LAYERS, CLASSES, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [INPUTS] = TF_ZOO_KNOB("inputs", 64, 1, TF_ZOO_SIZE_MAX, "input features"),
    [HIDDEN] = TF_ZOO_KNOB("hidden", 128, 1, TF_ZOO_SIZE_MAX, "width of each hidden layer"),
    [LAYERS] = TF_ZOO_KNOB("layers", 2, 1, TF_ZOO_LAYERS_MAX, "hidden layers (linear + relu)"),
    [CLASSES] = TF_ZOO_KNOB("classes", 10, 1, TF_ZOO_SIZE_MAX, "output classes"),
};

/* x [N, inputs] -> layers x (Linear, relu) -> Linear -> logits [N, classes]; cross-entropy on labels [N]. */
static void build(tf_graph *g, const int64_t *k) {
  int32_t batch = tf_graph_symbol(g, "N", 8);
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(k[INPUTS])));
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_sym(batch)));

  int64_t width = k[INPUTS];
  char name[TF_LAYERS_NAME_MAX];
  for (int64_t i = 0; i < k[LAYERS]; i++) {
    snprintf(name, sizeof(name), "hidden.%lld", (long long)i);
    x = tf_layers_linear(g, x, width, k[HIDDEN], true, tf_layers_fan_in_uniform(width), name);
    x = tf_unary(g, TF_OP_RELU, x);
    width = k[HIDDEN];
  }
  tf_tensor_id logits = tf_layers_linear(g, x, width, k[CLASSES], true, tf_layers_fan_in_uniform(width), "head");

  tf_zoo_finish_classifier(g, logits, labels, tf_layers_sgd());
}

const tf_zoo_family tf_zoo_family_mlp = {
    .name = "mlp", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = NULL, .build = build};
