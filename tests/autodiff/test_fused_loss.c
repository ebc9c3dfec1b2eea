/* The fused loss head against the graph it replaces, in float64: a training plan compiled with
 * --fuse-loss on (linear_cross_entropy, the logits computed chunk_rows rows at a time) and one
 * compiled with it off (matmul [-> add(bias)] -> cross_entropy) run by the f64 interpreter on the
 * same values; the loss and every parameter's gradient must agree to 1e-10. Cases: the weight as
 * [V, d] and as [d, V], a chunk that does not divide the rows, ignored and out-of-range labels,
 * every row ignored, one chunk, a weight tied to an embedding (its gradient has two parts), a bias
 * (tf_layers_linear's add, either operand order; linear_cross_entropy_bias_grad gives dbias), a
 * vocabulary wider than the CPU kernel's 2048-class span and no multiple of it, and a loss summing
 * two heads with biases (as xtts: every cross_entropy fuses, not only the loss node). The fused
 * plan must hold no [rows, V] buffer, and --fuse-loss auto must leave these small heads alone. Logits
 * regrouped to [rows, V] by a reshape (PyTorch's logits.view(-1, V)) fuse too; a reshape that changes
 * the class axis does not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plan_interp.h"
#include "tightfit/compiler.h"

static tf_test_counts counts;

typedef struct head_case {
  const char *name;
  bool transpose_weight, tied;
  int64_t chunk_rows;
  int label_pattern; /* 0: some ignored and out of range; 1: every label ignored */
  int bias;          /* 0: none; 1: add(product, bias) as tf_layers_linear; 2: add(bias, product) */
  int64_t classes;   /* the (first) head's vocabulary */
  int64_t classes2;  /* > 0: a second head over tanh(x) with this vocabulary, its loss added */
  int reshape;       /* 0: none; 1: the logits regrouped to [rows, V] (PyTorch's logits.view(-1, V)),
                      * 2: regrouped to [rows, V/2, 2] (the last axis changes: must not fuse);
                      * 3: logits[:, :-1, :] then viewed as [rows, V] (a causal LM's shift);
                      * 4: logits[:, 1:, :] alone; 5: logits[..., :V-1] (the class axis: must not fuse) */
} head_case;

enum { BATCH = 2, TIME = 5, FEATURES = 4 };

/* One head: cross_entropy(x W [+ b]) over `classes`, its tensors named with `suffix`. */
static tf_tensor_id head(tf_graph *g, const head_case *c, tf_tensor_id x, tf_tensor_id w, int64_t classes,
                         const char *suffix) {
  char name[32];
  snprintf(name, sizeof(name), "labels%s", suffix);
  tf_shape shape = TF_SHAPE(tf_fixed(BATCH), tf_fixed(TIME)); /* 0 and 5 */
  if (c->reshape == 1)
    shape = TF_SHAPE(tf_fixed(BATCH * TIME));
  else if (c->reshape == 2)
    shape = TF_SHAPE(tf_fixed(BATCH * TIME), tf_fixed(classes / 2));
  else if (c->reshape == 3)
    shape = TF_SHAPE(tf_fixed(BATCH * (TIME - 1)));
  else if (c->reshape == 4)
    shape = TF_SHAPE(tf_fixed(BATCH), tf_fixed(TIME - 1));
  tf_tensor_id labels = tf_graph_label(g, name, TF_I32, shape);
  tf_tensor_id logits = tf_matmul(g, x, w, false, c->transpose_weight);
  if (c->bias) {
    snprintf(name, sizeof(name), "b%s", suffix);
    tf_tensor_id b =
        tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(classes)), tf_init_make(TF_INIT_NORMAL, 0, 1));
    logits = c->bias == 1 ? tf_add(g, logits, b) : tf_add(g, b, logits);
  }
  if (c->reshape == 3 || c->reshape == 4)
    logits = c->reshape == 3 ? tf_slice(g, logits, 1, 0, -1, 1) : tf_slice(g, logits, -2, 1, TIME, 1);
  else if (c->reshape == 5)
    logits = tf_slice(g, logits, 2, 0, classes - 1, 1);
  if (c->reshape == 1 || c->reshape == 3)
    logits = tf_reshape(g, logits, TF_SHAPE(tf_fixed(-1), tf_fixed(classes)));
  else if (c->reshape == 2)
    logits = tf_reshape(g, logits, TF_SHAPE(tf_fixed(BATCH * TIME), tf_fixed(classes / 2), tf_fixed(2)));
  tf_graph_add_output(g, logits);
  return tf_cross_entropy(g, logits, labels, -100);
}

static tf_tensor_id weight(tf_graph *g, const head_case *c, int64_t classes, const char *name) {
  tf_shape shape = c->transpose_weight ? TF_SHAPE(tf_fixed(classes), tf_fixed(FEATURES))
                                       : TF_SHAPE(tf_fixed(FEATURES), tf_fixed(classes));
  return tf_graph_parameter(g, name, TF_F32, shape, tf_init_make(TF_INIT_NORMAL, 0, 1));
}

static tf_graph *build(const head_case *c) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create("head", &g));
  tf_tensor_id w = weight(g, c, c->classes, "w");
  tf_tensor_id x;
  if (c->tied) { /* x = tanh(embedding(tokens, w)): w is read twice */
    tf_tensor_id tokens = tf_graph_input(g, "tokens", TF_I32, TF_SHAPE(tf_fixed(BATCH), tf_fixed(TIME)));
    x = tf_unary(g, TF_OP_TANH, tf_embedding(g, tokens, w));
  } else {
    x = tf_graph_parameter(g, "x", TF_F32, TF_SHAPE(tf_fixed(BATCH), tf_fixed(TIME), tf_fixed(FEATURES)),
                           tf_init_make(TF_INIT_NORMAL, 0, 1));
  }
  tf_tensor_id loss = head(g, c, x, w, c->classes, "");
  if (c->classes2 > 0) /* x's gradient sums both heads' dx */
    loss = tf_add(g, loss, head(g, c, tf_unary(g, TF_OP_TANH, x), weight(g, c, c->classes2, "w2"), c->classes2, "2"));
  tf_graph_set_loss(g, loss);
  return g;
}

static int32_t heads_of(const head_case *c) { return c->classes2 > 0 ? 2 : 1; }

static bool is_vocabulary(const head_case *c, int64_t n) {
  return n == c->classes || (c->classes2 > 0 && n == c->classes2);
}

static tf_plan *compile(const head_case *c, tf_fuse_loss fuse) {
  tf_graph *g = build(c);
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.optimizer = TF_OPTIMIZER_SGD;
  options.target.threads = 1;
  options.fuse_loss = fuse;
  options.loss_chunk_rows = c->chunk_rows;
  tf_plan *plan = NULL;
  tf_status status = tf_graph_status(g) ? tf_status_new(TF_ERR_INTERNAL, "%s", tf_status_message(tf_graph_status(g)))
                                        : tf_compile(g, &options, &plan);
  CHECK(&counts, status == NULL, "%s: compile (fuse %d): %s", c->name, (int)fuse, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

static int32_t count_op(const tf_plan *plan, tf_op op) {
  int32_t n = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    n += plan->steps[s].op == op;
  return n;
}

/* The gradient buffer of the parameter named `parameter`, or -1. */
static int32_t gradient_of(const tf_plan *plan, const char *parameter) {
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    const tf_plan_buffer *buffer = &plan->buffers[b];
    if (buffer->role == TF_ROLE_GRADIENT && buffer->owner >= 0 &&
        strcmp(plan->buffers[buffer->owner].name, parameter) == 0)
      return b;
  }
  return -1;
}

/* Fills parameters (by name, the same in both plans) and integer inputs deterministically. */
static void fill(tf_interp *in, const head_case *c) {
  const int64_t classes = c->classes;
  for (int32_t b = 0; b < in->plan->n_buffers; b++) {
    const tf_plan_buffer *buffer = &in->plan->buffers[b];
    int64_t n = tf_interp_count(in, b);
    if (buffer->role == TF_ROLE_PARAMETER) {
      double *x = in->data[b];
      for (int64_t i = 0; i < n; i++)
        x[i] = sin(0.7 * (double)i + (double)strlen(buffer->name)) * 1.5;
    } else if (buffer->role == TF_ROLE_LABEL) {
      int32_t *labels = in->data[b];
      const int64_t vocabulary = c->reshape == 2                        ? 2
                                 : c->reshape == 5                      ? classes - 1
                                 : strcmp(buffer->name, "labels2") == 0 ? c->classes2
                                                                        : classes;
      for (int64_t i = 0; i < n; i++) /* rows 3 and 8 ignored, row 6 out of range */
        labels[i] = c->label_pattern == 1 ? -100
                    : i == 3 || i == 8    ? -100
                    : i == 6              ? (int32_t)vocabulary
                                          : (int32_t)((i * 3 + 1000 * (vocabulary > 1000)) % vocabulary);
    } else if (buffer->role == TF_ROLE_INPUT) {
      int32_t *tokens = in->data[b];
      for (int64_t i = 0; i < n; i++)
        tokens[i] = (int32_t)((i * 5 + 2) % classes);
    }
  }
}

static double relative(double a, double b) { return fabs(a - b) / fmax(1e-30, fmax(fabs(a), fabs(b))); }

static void check_case(const head_case *c) {
  tf_plan *fused = compile(c, TF_FUSE_LOSS_ON), *plain = compile(c, TF_FUSE_LOSS_OFF);
  if (!fused || !plain) {
    tf_plan_destroy(fused);
    tf_plan_destroy(plain);
    return;
  }
  const int32_t heads = heads_of(c);
  /* A head whose loss is the graph's loss takes the single pass (loss and gradients in one step of
   * the forward pass); each head of a summed loss, the forward step and its gradient step. */
  const tf_op single_op = c->bias ? TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN : TF_OP_LINEAR_CROSS_ENTROPY_TRAIN;
  const int32_t single = heads == 1 ? 1 : 0;
  CHECK(&counts,
        count_op(fused, TF_OP_LINEAR_CROSS_ENTROPY) == heads - single && count_op(fused, single_op) == single &&
            count_op(fused, TF_OP_CROSS_ENTROPY) == 0 && count_op(fused, TF_OP_MATMUL) == 0,
        "%s: the fused plan has %d linear_cross_entropy, %d %s, %d cross_entropy and %d matmul steps (%d heads)",
        c->name, count_op(fused, TF_OP_LINEAR_CROSS_ENTROPY), count_op(fused, single_op), tf_op_name(single_op),
        count_op(fused, TF_OP_CROSS_ENTROPY), count_op(fused, TF_OP_MATMUL), heads);
  const tf_op gradient_op = c->bias ? TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD : TF_OP_LINEAR_CROSS_ENTROPY_GRAD;
  CHECK(&counts, count_op(fused, gradient_op) == heads - single, "%s: the fused plan has %d %s steps (%d heads)",
        c->name, count_op(fused, gradient_op), tf_op_name(gradient_op), heads);
  CHECK(&counts, count_op(plain, TF_OP_CROSS_ENTROPY) == heads && count_op(plain, TF_OP_LINEAR_CROSS_ENTROPY) == 0,
        "%s: --fuse-loss off fused anyway", c->name);
  for (int32_t b = 0; b < fused->n_buffers; b++) {
    const tf_plan_buffer *buffer = &fused->buffers[b];
    CHECK(
        &counts,
        !(buffer->rank >= 2 && is_vocabulary(c, buffer->shape[buffer->rank - 1]) && buffer->role == TF_ROLE_ACTIVATION),
        "%s: the fused plan holds a logits-shaped activation '%s'", c->name, buffer->name);
  }
  tf_interp a, b;
  tf_interp_init(&a, fused);
  tf_interp_init(&b, plain);
  fill(&a, c);
  fill(&b, c);
  CHECK(&counts, tf_interp_run(&a, 0, fused->micro_steps) && tf_interp_run(&b, 0, plain->micro_steps),
        "%s: a step has no f64 kernel", c->name);
  double loss_a = *(double *)a.data[fused->loss], loss_b = *(double *)b.data[plain->loss];
  double worst = relative(loss_a, loss_b);
  CHECK(&counts, worst <= 1e-10 || (loss_a == 0 && loss_b == 0), "%s: loss %.17g fused, %.17g unfused", c->name, loss_a,
        loss_b);
  int gradients = 0;
  for (int32_t g = 0; g < fused->n_buffers; g++) {
    if (fused->buffers[g].role != TF_ROLE_GRADIENT)
      continue;
    int32_t twin = gradient_of(plain, fused->buffers[fused->buffers[g].owner].name);
    CHECK(&counts, twin >= 0, "%s: the unfused plan has no gradient of '%s'", c->name,
          fused->buffers[fused->buffers[g].owner].name);
    if (twin < 0)
      continue;
    const double *ga = a.data[g], *gb = b.data[twin];
    double scale = 0;
    for (int64_t i = 0; i < tf_interp_count(&a, g); i++)
      scale = fmax(scale, fabs(gb[i]));
    for (int64_t i = 0; i < tf_interp_count(&a, g); i++) {
      double error = fabs(ga[i] - gb[i]) / fmax(scale, 1e-30);
      worst = fmax(worst, error);
      CHECK(&counts, error <= 1e-10 || (ga[i] == 0 && gb[i] == 0), "%s: %s[%lld] %.17g fused, %.17g unfused", c->name,
            fused->buffers[g].name, (long long)i, ga[i], gb[i]);
    }
    gradients++;
  }
  const int expected = (c->tied ? 1 : 2) + (c->bias ? 1 : 0) + (c->classes2 > 0 ? 1 + (c->bias ? 1 : 0) : 0);
  CHECK(&counts, gradients == expected, "%s: %d gradients compared, %d expected", c->name, gradients, expected);
  printf("ok   %-50s loss %.12f, %d gradient(s), worst relative difference %.2e\n", c->name, loss_a, gradients, worst);
  tf_interp_free(&a);
  tf_interp_free(&b);
  tf_plan_destroy(fused);
  tf_plan_destroy(plain);
}

/* A reshape that changes the logits' last axis, or a slice of their classes, leaves the head
 * unfused, even with --fuse-loss on. */
static void check_reshape_refused(const head_case *c) {
  tf_plan *plan = compile(c, TF_FUSE_LOSS_ON);
  if (!plan)
    return;
  CHECK(&counts, count_op(plan, TF_OP_LINEAR_CROSS_ENTROPY) == 0 && count_op(plan, TF_OP_CROSS_ENTROPY) == 1,
        "%s: fused a head whose row op changes the class axis", c->name);
  printf("ok   %-50s left unfused\n", c->name);
  tf_plan_destroy(plan);
}

/* --fuse-loss auto judges each head against the thresholds: these heads are far below them. */
static void check_auto_leaves(const head_case *c) {
  tf_plan *plan = compile(c, TF_FUSE_LOSS_AUTO);
  if (!plan)
    return;
  CHECK(&counts, count_op(plan, TF_OP_LINEAR_CROSS_ENTROPY) == 0 && count_op(plan, TF_OP_CROSS_ENTROPY) == heads_of(c),
        "%s: --fuse-loss auto fused a head of %lld classes", c->name, (long long)c->classes);
  printf("ok   %-50s auto leaves its %d head(s) unfused\n", c->name, heads_of(c));
  tf_plan_destroy(plan);
}

int main(void) {
  enum { V = 7 };
  const head_case cases[] = {
      {"weight [V, d], chunk 3 of 10 rows", true, false, 3, 0, 0, V, 0, 0},
      {"weight [d, V], chunk 4 of 10 rows", false, false, 4, 0, 0, V, 0, 0},
      {"one chunk of all 10 rows", true, false, 10, 0, 0, V, 0, 0},
      {"chunk of 1 row", false, false, 1, 0, 0, V, 0, 0},
      {"every label ignored", true, false, 3, 1, 0, V, 0, 0},
      {"tied to an embedding, chunk 3", true, true, 3, 0, 0, V, 0, 0},
      {"bias, weight [V, d], chunk 3", true, false, 3, 0, 1, V, 0, 0},
      {"bias first, weight [d, V], chunk 4", false, false, 4, 0, 2, V, 0, 0},
      {"bias, every label ignored", false, false, 3, 1, 1, V, 0, 0},
      {"bias, tied to an embedding, chunk 3", true, true, 3, 0, 1, V, 0, 0},
      {"bias, V 2100 (2048-class spans), [d, V], chunk 3", false, false, 3, 0, 1, 2100, 0, 0},
      {"bias, V 2100 (2048-class spans), [V, d], chunk 4", true, false, 4, 0, 1, 2100, 0, 0},
      {"two heads (V 7, 11) with biases, chunk 3", true, false, 3, 0, 1, V, 11, 0},
      {"two heads (V 7, 11) with biases, [d, V], chunk 4", false, false, 4, 0, 1, V, 11, 0},
      {"two heads (V 7, 11) without biases, chunk 3", true, false, 3, 0, 0, V, 11, 0},
      {"logits.view(-1, V), weight [V, d], chunk 3", true, false, 3, 0, 0, V, 0, 1},
      {"bias, logits.view(-1, V), [d, V], chunk 4", false, false, 4, 0, 1, V, 0, 1},
      {"tied, bias, logits.view(-1, V), chunk 3", true, true, 3, 0, 1, V, 0, 1},
      {"two heads (V 7, 11), both viewed as [rows, V]", true, false, 3, 0, 1, V, 11, 1},
      {"logits[:, :-1].view(-1, V), chunk 3", true, false, 3, 0, 0, V, 0, 3},
      {"bias, tied, logits[:, :-1].view(-1, V), chunk 4", true, true, 4, 0, 1, V, 0, 3},
      {"bias, logits[:, 1:] (axis -2), chunk 3", true, false, 3, 0, 1, V, 0, 4},
      {"two heads, logits[:, :-1].view(-1, V)", true, false, 3, 0, 1, V, 11, 3},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    check_case(&cases[i]);
  check_auto_leaves(&cases[12]);
  const head_case axis_changed = {"logits viewed as [rows, V/2, 2]", true, false, 3, 0, 0, 8, 0, 2};
  check_reshape_refused(&axis_changed);
  const head_case classes_sliced = {"logits[..., :V-1]", true, false, 3, 0, 0, 8, 0, 5};
  check_reshape_refused(&classes_sliced);
  return tf_test_finish("fused loss head", &counts);
}
