/* The half-kernel tests' shared model (half_model.h). */
#include "half_model.h"

#include <string.h>

#include "op_graphs.h"

#define ROWS TF_HALF_MODEL_ROWS
#define WIDTH TF_HALF_MODEL_WIDTH
#define HIDDEN TF_HALF_MODEL_HIDDEN
#define CLASSES TF_HALF_MODEL_CLASSES
#define VOCAB TF_HALF_MODEL_VOCAB

tf_tensor_id tf_half_model_stem(tf_graph *g, tf_dtype half, int64_t rows, int64_t width, int64_t hidden, int64_t vocab,
                                tf_tensor_id *labels) {
  tf_tensor_id x = tf_cast(g, tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(rows), d(width))), half);
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I32, TF_SHAPE(d(rows)));
  *labels = tf_graph_input(g, "labels", TF_I32, TF_SHAPE(d(rows)));
  tf_tensor_id w1 = tf_cast(g, tf_test_param(g, "W1", TF_SHAPE(d(width), d(hidden))), half);
  tf_tensor_id b1 = tf_cast(g, tf_test_param(g, "b1", TF_SHAPE(d(hidden))), half);
  tf_tensor_id table = tf_cast(g, tf_test_param(g, "table", TF_SHAPE(d(vocab), d(hidden))), half);
  tf_tensor_id h = tf_add(g, tf_matmul(g, x, w1, false, false), b1);
  return tf_gelu(g, tf_add(g, h, tf_embedding(g, ids, table)), true);
}

static tf_graph *build(tf_test_counts *counts, tf_dtype half) {
  tf_graph *g = tf_test_graph_begin(counts, "half_kernels");
  if (!g)
    return NULL;
  tf_tensor_id labels;
  tf_tensor_id h = tf_half_model_stem(g, half, ROWS, WIDTH, HIDDEN, VOCAB, &labels);
  tf_tensor_id halves[2] = {tf_slice(g, h, 1, HIDDEN / 2, HIDDEN, 1), tf_slice(g, h, 1, 0, HIDDEN / 2, 1)};
  tf_tensor_id swapped = tf_concat(g, halves, 2, 1);
  tf_tensor_id gamma = tf_cast(g, tf_test_positive(g, "gamma", TF_SHAPE(d(HIDDEN))), half);
  tf_tensor_id normed = tf_layer_norm(g, swapped, gamma, TF_NO_TENSOR, 1e-5f);
  tf_tensor_id sequences = tf_reshape(g, normed, TF_SHAPE(d(ROWS / 3), d(3), d(HIDDEN)));
  tf_tensor_id attended = tf_attention(g, sequences, sequences, sequences, 2, true);
  const int32_t features = 2;
  attended = tf_add(g, attended, tf_reduce(g, TF_OP_MEAN, attended, &features, 1, true));
  tf_tensor_id w2 = tf_cast(g, tf_test_param(g, "W2", TF_SHAPE(d(HIDDEN), d(CLASSES))), half);
  tf_tensor_id rows = tf_reshape(g, attended, TF_SHAPE(d(ROWS), d(HIDDEN)));
  tf_tensor_id p = tf_softmax(g, tf_matmul(g, rows, w2, false, false), 1);
  tf_graph_set_loss(g, tf_cross_entropy(g, tf_unary(g, TF_OP_LOG, p), labels, -1));
  return g;
}

tf_plan *tf_half_model_compile(tf_test_counts *counts, tf_dtype half, tf_target_kind target, bool half_kernels) {
  return tf_half_model_compile_graph(counts, build(counts, half), target, half_kernels);
}

tf_plan *tf_half_model_compile_graph(tf_test_counts *counts, tf_graph *g, tf_target_kind target, bool half_kernels) {
  tf_plan *plan = NULL;
  if (g) {
    tf_compile_options o = tf_compile_options_default(target);
    o.loss_scale = 1.0;
    o.optimizer = TF_OPTIMIZER_ADAMW;
    o.learning_rate = 0.01;
    if (!half_kernels)
      memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
    CHECK_OK(counts, tf_compile(g, &o, &plan));
  }
  tf_graph_destroy(g);
  return plan;
}

tf_half_model_counts tf_half_model_count(const tf_plan *plan, tf_dtype half) {
  tf_half_model_counts c = {0, 0, 0};
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op == TF_OP_CAST) {
      c.casts++;
      continue;
    }
    bool on_half = false;
    for (int32_t k = 0; k < step->n_inputs; k++)
      on_half = on_half || plan->buffers[step->inputs[k]].dtype == half;
    c.half_steps += on_half;
    c.half_matmuls += on_half && step->op == TF_OP_MATMUL;
  }
  return c;
}

static void feed(tf_test_counts *counts, tf_session *s) {
  float x[ROWS * WIDTH];
  int32_t labels[ROWS], ids[ROWS];
  for (int i = 0; i < ROWS * WIDTH; i++)
    x[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
  for (int i = 0; i < ROWS; i++) {
    labels[i] = (i * 7) % CLASSES;
    ids[i] = (i * 5) % VOCAB;
  }
  CHECK_OK(counts, tf_session_write(s, "ids", ids, sizeof(ids)));
  CHECK_OK(counts, tf_session_write(s, "x", x, sizeof(x)));
  CHECK_OK(counts, tf_session_write(s, "labels", labels, sizeof(labels)));
}

tf_status tf_half_model_read_params(tf_session *s, int64_t width, int64_t hidden, int64_t classes, int64_t vocab,
                                    float *params) {
  const struct {
    const char *name;
    int64_t count;
  } parts[] = {
      {"W1", width * hidden}, {"b1", hidden}, {"gamma", hidden}, {"W2", hidden * classes}, {"table", vocab * hidden}};
  int64_t at = 0;
  for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
    TF_RETURN_IF_ERROR(tf_session_read(s, parts[p].name, params + at, parts[p].count * 4));
    at += parts[p].count;
  }
  return NULL;
}

tf_status tf_half_model_train(tf_test_counts *counts, const tf_plan *plan, const char *backend,
                              tf_half_model_outcome *out) {
  memset(out, 0, sizeof(*out));
  tf_session_options so = tf_session_options_default();
  so.backend = backend;
  so.seed = 3;
  tf_session *s = NULL;
  TF_RETURN_IF_ERROR(tf_session_create(plan, &so, &s));
  tf_status status = NULL;
  for (int i = 0; i < TF_HALF_MODEL_STEPS && !status; i++) {
    feed(counts, s); /* every micro-step: the io halves alternate (the second step once read zeros) */
    status = tf_session_micro_step(s, &out->losses[i]);
    if (!status)
      status = tf_session_optimizer_step(s);
  }
  if (!status)
    status = tf_half_model_read_params(s, WIDTH, HIDDEN, CLASSES, VOCAB, out->params);
  tf_session_destroy(s);
  out->ran = status == NULL;
  return status;
}
