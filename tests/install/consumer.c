/* A program built against an installed tightfit (tests/install/test_install.sh compiles it with
 * `pkg-config --cflags --libs tightfit` only): builds a two-layer MLP with the public layer helpers,
 * compiles it, and runs three training steps on a fixed batch; the loss must fall. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tightfit/compiler.h>
#include <tightfit/layers.h>
#include <tightfit/runtime.h>
#include <tightfit/zoo.h>

static int fail(const char *what, tf_status status) {
  fprintf(stderr, "consumer: %s: %s\n", what, tf_status_message(status));
  tf_status_free(status);
  return 1;
}

int main(void) {
  tf_graph *graph = NULL;
  tf_status status = tf_graph_create("consumer", &graph);
  if (status)
    return fail("creating the graph", status);
  int32_t batch = tf_graph_symbol(graph, "N", 4);
  tf_tensor_id x = tf_graph_input(graph, "x", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(8)));
  tf_tensor_id labels = tf_graph_label(graph, "labels", TF_I32, TF_SHAPE(tf_sym(batch)));
  tf_tensor_id h = tf_layers_linear(graph, x, 8, 16, true, tf_layers_fan_in_uniform(8), "hidden");
  h = tf_unary(graph, TF_OP_RELU, h);
  tf_tensor_id logits = tf_layers_linear(graph, h, 16, 3, true, tf_layers_fan_in_uniform(16), "head");
  tf_graph_set_scope(graph, "loss");
  tf_tensor_id loss = tf_cross_entropy(graph, logits, labels, -100);
  tf_training_config training = tf_layers_sgd();
  tf_layers_finish(graph, logits, NULL, loss, &training);
  if (tf_graph_status(graph)) {
    fprintf(stderr, "consumer: building the graph: %s\n", tf_status_message(tf_graph_status(graph)));
    return 1;
  }

  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  tf_plan *plan = NULL;
  status = tf_compile(graph, &options, &plan);
  tf_graph_destroy(graph);
  if (status)
    return fail("compiling", status);
  printf("consumer: plan total %lld bytes, %d steps\n", (long long)tf_plan_total_bytes(plan), plan->n_steps);

  tf_session_options session_options = tf_session_options_default();
  tf_session *session = NULL;
  status = tf_session_create(plan, &session_options, &session);
  if (status)
    return fail("creating the session", status);
  float inputs[4 * 8];
  int32_t classes[4] = {0, 1, 2, 1};
  for (int i = 0; i < 4 * 8; i++)
    inputs[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  double first = NAN, last = NAN;
  for (int step = 0; step < 3 && !status; step++) {
    status = tf_session_write(session, "x", inputs, sizeof(inputs));
    if (!status)
      status = tf_session_write(session, "labels", classes, sizeof(classes));
    if (!status)
      status = tf_session_micro_step(session, &last);
    if (!status)
      status = tf_session_optimizer_step(session);
    if (step == 0)
      first = last;
    printf("consumer: step %d loss %.6f\n", step + 1, last);
  }
  if (status)
    return fail("training", status);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  if (!(last < first)) {
    fprintf(stderr, "consumer: the loss did not fall (%.6f -> %.6f)\n", first, last);
    return 1;
  }
  printf("consumer: ok\n");
  return 0;
}
