/* compiler/slice_grads.c: the gradient of a tensor cut into slices that tile one axis is one concat
 * of the slices' gradients, not a sum of zero-padded slice_grads; slices that leave a gap, overlap
 * or stride keep the sum. x [4, 9] = -w (w a parameter), each slice i is multiplied by its own
 * probe input p_i and summed into the loss, so grad(w) must equal -p_i on each slice exactly (0 in
 * a gap, the sum where slices overlap): checked element by element after one micro-step on the
 * CPU, with the plan's concat and slice_grad steps counted. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define ROWS 4
#define COLS 9

static tf_test_counts counts;

typedef struct slice_case {
  const char *label;
  int32_t n;
  int64_t start[3], end[3], step[3];
  int32_t concats, slice_grads; /* expected steps */
} slice_case;

static const slice_case cases[] = {
    {"q|k|v: [0:3] [3:6] [6:9]", 3, {0, 3, 6}, {3, 6, 9}, {1, 1, 1}, 1, 0},
    {"out of order, negative and clamped bounds: [6:100] [-9:3] [3:-3]", 3, {6, -9, 3}, {100, 3, -3}, {1, 1, 1}, 1, 0},
    {"two halves [0:4] [4:9]", 2, {0, 4, 0}, {4, 9, 0}, {1, 1, 1}, 1, 0},
    {"a gap: [0:3] [6:9]", 2, {0, 6, 0}, {3, 9, 0}, {1, 1, 1}, 0, 2},
    {"overlap: [0:5] [3:9]", 2, {0, 3, 0}, {5, 9, 0}, {1, 1, 1}, 0, 2},
    {"strided: [0:9:2] [1:9:2]", 2, {0, 1, 0}, {9, 9, 0}, {2, 2, 1}, 0, 2},
};

static int64_t bound(int64_t b) { return b < 0 ? (b + COLS < 0 ? 0 : b + COLS) : b > COLS ? COLS : b; }

static void run(const slice_case *c) {
  tf_graph *g = tf_test_graph_begin(&counts, "slice_grads");
  if (!g)
    return;
  /* the sliced tensor is an activation (a parameter's gradient parts are accumulated one by one) */
  tf_tensor_id x = tf_unary(g, TF_OP_NEG, tf_test_param(g, "w", TF_SHAPE(d(ROWS), d(COLS))));
  tf_tensor_id loss = TF_NO_TENSOR;
  int64_t width[3];
  for (int32_t i = 0; i < c->n; i++) {
    tf_tensor_id part = tf_slice(g, x, 1, c->start[i], c->end[i], c->step[i]);
    const int64_t lo = bound(c->start[i]), hi = bound(c->end[i]);
    width[i] = (hi - lo + c->step[i] - 1) / c->step[i];
    char name[16];
    snprintf(name, sizeof(name), "p%d", i);
    tf_tensor_id probe = tf_graph_input(g, name, TF_F32, TF_SHAPE(d(ROWS), d(width[i])));
    tf_tensor_id term = tf_reduce(g, TF_OP_SUM, tf_mul(g, part, probe), NULL, 0, false);
    loss = loss == TF_NO_TENSOR ? term : tf_add(g, loss, term);
  }
  tf_graph_set_loss(g, loss);
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  o.accumulate = 2; /* grad(w) is the accumulator, read after one micro-step */
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &o, &plan));
  tf_graph_destroy(g);
  if (!plan)
    return;
  int32_t concats = 0, slice_grads = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    concats += plan->steps[s].op == TF_OP_CONCAT;
    slice_grads += plan->steps[s].op == TF_OP_SLICE_GRAD;
  }
  CHECK(&counts, concats == c->concats && slice_grads == c->slice_grads,
        "%s: %d concat and %d slice_grad steps, expected %d and %d", c->label, concats, slice_grads, c->concats,
        c->slice_grads);
  tf_session_options so = tf_session_options_default();
  tf_session *s = NULL;
  CHECK_OK(&counts, tf_session_create(plan, &so, &s));
  float expected[ROWS * COLS], grad[ROWS * COLS];
  memset(expected, 0, sizeof(expected));
  for (int32_t i = 0; i < c->n && s; i++) {
    float probe[ROWS * COLS];
    for (int64_t e = 0; e < ROWS * width[i]; e++)
      probe[e] = (float)(i + 1) + 0.125f * (float)e;
    char name[16];
    snprintf(name, sizeof(name), "p%d", i);
    CHECK_OK(&counts, tf_session_write(s, name, probe, (int64_t)sizeof(float) * ROWS * width[i]));
    for (int64_t r = 0; r < ROWS; r++)
      for (int64_t k = 0; k < width[i]; k++)
        expected[r * COLS + bound(c->start[i]) + k * c->step[i]] -= probe[r * width[i] + k]; /* w = -x */
  }
  int32_t wrong = 0;
  if (s) {
    double loss_value;
    CHECK_OK(&counts, tf_session_micro_step(s, &loss_value));
    CHECK_OK(&counts, tf_session_read(s, "grad(w)", grad, sizeof(grad)));
    for (int32_t e = 0; e < ROWS * COLS; e++)
      wrong += grad[e] != expected[e];
  }
  CHECK(&counts, s && wrong == 0, "%s: %d of %d gradient elements differ from -probes", c->label, wrong, ROWS * COLS);
  printf("%-4s %-66s %d concat, %d slice_grad; grad(w) %s\n", s && wrong == 0 && concats == c->concats ? "ok" : "FAIL",
         c->label, concats, slice_grads, wrong ? "WRONG" : "exact");
  tf_session_destroy(s);
  tf_plan_destroy(plan);
}

int main(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    run(&cases[i]);
  return tf_test_finish("slice gradients", &counts);
}
