/* Finite-difference gradient checks, in float64, of what autodiff derives for every graph op: a
 * tiny graph (the op's floating inputs as parameters, then a loss) is compiled into a training
 * plan, run by the f64 interpreter, and each parameter's accumulated gradient is compared with
 * central differences of the loss. Inputs avoid kinks (relu at 0, ties in max) so that the
 * derivative exists where it is measured. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plan_interp.h"
#include "tightfit/compiler.h"

static tf_test_counts counts;

typedef enum value_kind {
  VALUES_ANY,
  VALUES_POSITIVE,
  VALUES_SPREAD,
  VALUES_GREATER_THAN_ONE,
  VALUES_INSIDE_ONE
} value_kind;

typedef struct gradcheck_case {
  const char *name;
  tf_graph *g;
  value_kind values;
  int32_t accumulate;   /* micro-batches per step; 0: 1 */
  int32_t integer_base; /* added to the integer ids, labels and lengths (ctc: valid lengths) */
} gradcheck_case;

static uint64_t random_state = 0x243F6A8885A308D3ull;
static double uniform(void) {
  random_state = random_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(random_state >> 11) / 9007199254740992.0;
}

static tf_tensor_id param(tf_graph *g, const char *name, tf_shape shape) {
  return tf_graph_parameter(g, name, TF_F32, shape, tf_init_make(TF_INIT_NORMAL, 0, 1));
}

/* loss = mse(y, target) with a random target label of y's shape: every element of y matters. */
static void finish_with_mse(tf_graph *g, tf_tensor_id y, tf_shape shape) {
  tf_tensor_id target = tf_graph_label(g, "target", TF_F32, shape);
  tf_graph_set_loss(g, tf_mse(g, y, target));
}

static void fill_values(tf_interp *in, int32_t id, value_kind kind) {
  double *x = in->data[id];
  int64_t n = tf_interp_count(in, id);
  for (int64_t i = 0; i < n; i++) {
    double u = uniform();
    if (kind == VALUES_POSITIVE)
      x[i] = 0.5 + 1.5 * u;
    else if (kind == VALUES_GREATER_THAN_ONE) /* acosh's domain, away from its pole at 1 */
      x[i] = 1.25 + 1.5 * u;
    else if (kind == VALUES_INSIDE_ONE) /* asin's, acos's and atanh's domain, away from its poles */
      x[i] = 0.9 * (2.0 * u - 1.0);
    else if (kind == VALUES_SPREAD) /* distinct, away from 0: no ties, no kinks */
      x[i] = (((double)((i * 7919) % (n + 13)) + 0.5) / (double)(n + 13) - 0.5) * 4.0 + 0.01 * u;
    else
      x[i] = 2.0 * u - 1.0;
  }
}

static double loss_of(tf_interp *in, int32_t forward_end, int32_t loss) {
  tf_interp_run(in, 0, forward_end);
  return *(double *)in->data[loss];
}

static void check_case(gradcheck_case *c) {
  const struct tf_status_s *built = tf_graph_status(c->g);
  CHECK(&counts, built == NULL, "%s: build: %s", c->name, tf_status_message(built));
  if (built) {
    tf_graph_destroy(c->g);
    return;
  }
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.optimizer = TF_OPTIMIZER_SGD;
  options.target.threads = 1;
  options.accumulate = c->accumulate > 0 ? c->accumulate : 1;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(c->g, &options, &plan);
  CHECK(&counts, status == NULL, "%s: compile: %s", c->name, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(c->g);
  if (!plan)
    return;
  tf_interp in;
  tf_interp_init(&in, plan);
  int32_t forward_end = 0;
  while (forward_end < plan->n_steps && plan->steps[forward_end].phase == TF_PHASE_FORWARD)
    forward_end++;
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    tf_buffer_role role = plan->buffers[b].role;
    if (role == TF_ROLE_PARAMETER)
      fill_values(&in, b, c->values);
    else if ((role == TF_ROLE_INPUT || role == TF_ROLE_LABEL) && plan->buffers[b].dtype == TF_F32)
      fill_values(&in, b, VALUES_ANY);
    else if (role == TF_ROLE_INPUT || role == TF_ROLE_LABEL) {
      /* integer ids and labels: valid indices below the last dim of whatever they index (2) */
      int64_t n = tf_interp_count(&in, b);
      for (int64_t i = 0; i < n; i++)
        ((int32_t *)in.data[b])[i] = c->integer_base + (int32_t)((i * 5 + 1) % 3);
    }
  }
  tf_interp_run(&in, 0, plan->micro_steps);
  double worst = 0;
  int checked = 0;
  for (int32_t g = 0; g < plan->n_buffers; g++) {
    if (plan->buffers[g].role != TF_ROLE_GRADIENT)
      continue;
    int32_t p = plan->buffers[g].owner;
    int64_t n = tf_interp_count(&in, p);
    double *x = in.data[p], *grad = in.data[g];
    int64_t stride = n > 40 ? n / 40 : 1;
    for (int64_t i = 0; i < n; i += stride) {
      double saved = x[i], h = 1e-6 * fmax(1.0, fabs(saved));
      x[i] = saved + h;
      double up = loss_of(&in, forward_end, plan->loss);
      x[i] = saved - h;
      double down = loss_of(&in, forward_end, plan->loss);
      x[i] = saved;
      double numeric = (up - down) / (2 * h);
      double error = fabs(numeric - grad[i]) / fmax(1e-3, fmax(fabs(numeric), fabs(grad[i])));
      if (error > worst)
        worst = error;
      checked++;
      CHECK(&counts, error < 1e-5, "%s: d loss / d %s[%" PRId64 "]: autodiff %.10g, finite difference %.10g", c->name,
            plan->buffers[p].name, i, grad[i], numeric);
    }
  }
  CHECK(&counts, checked > 0, "%s: no gradient was checked", c->name);
  printf("gradcheck %-28s %3d elements, worst relative error %.2e\n", c->name, checked, worst);
  tf_interp_free(&in);
  tf_plan_destroy(plan);
}

static tf_graph *new_graph(const char *name) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create(name, &g));
  return g;
}

#define S(...) TF_SHAPE(__VA_ARGS__)
#define F(n) tf_fixed(n)

static void matmul_cases(void) {
  static const struct { bool ta, tb; } combos[4] = {{false, false}, {false, true}, {true, false}, {true, true}};
  for (int i = 0; i < 4; i++) {
    tf_graph *g = new_graph("matmul");
    bool ta = combos[i].ta, tb = combos[i].tb;
    tf_tensor_id a = param(g, "a", ta ? S(F(2), F(5), F(3)) : S(F(2), F(3), F(5)));
    tf_tensor_id b = param(g, "b", tb ? S(F(4), F(5)) : S(F(5), F(4)));
    finish_with_mse(g, tf_matmul(g, a, b, ta, tb), S(F(2), F(3), F(4)));
    char name[64];
    snprintf(name, sizeof(name), "matmul ta=%d tb=%d", ta, tb);
    check_case(&(gradcheck_case){name, g, VALUES_ANY, 0, 0});
  }
  tf_graph *g = new_graph("batched");
  tf_tensor_id a = param(g, "a", S(F(2), F(1), F(3), F(4)));
  tf_tensor_id b = param(g, "b", S(F(3), F(4), F(2)));
  finish_with_mse(g, tf_matmul(g, a, b, false, false), S(F(2), F(3), F(3), F(2)));
  check_case(&(gradcheck_case){"matmul broadcast batch", g, VALUES_ANY, 0, 0});
}

static void binary_cases(void) {
  static const tf_op ops[4] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV};
  for (int i = 0; i < 4; i++) {
    tf_graph *g = new_graph("binary");
    tf_tensor_id a = param(g, "a", S(F(3), F(1), F(5)));
    tf_tensor_id b = param(g, "b", S(F(4), F(5)));
    tf_tensor_id inputs[2] = {a, b};
    finish_with_mse(g, tf_graph_node(g, ops[i], inputs, 2, NULL), S(F(3), F(4), F(5)));
    char name[64];
    snprintf(name, sizeof(name), "%s broadcast", tf_op_name(ops[i]));
    check_case(&(gradcheck_case){name, g, ops[i] == TF_OP_DIV ? VALUES_POSITIVE : VALUES_ANY, 0, 0});
  }
}

/* keep(a, m) of a parameter broadcast against a mask with zeros (relu of an input: about half):
 * the gradient keep(dy, m) summed to a's shape, none to the mask's input. */
static void keep_case(void) {
  tf_graph *g = new_graph("keep");
  tf_tensor_id a = param(g, "a", S(F(3), F(1), F(5)));
  tf_tensor_id m = tf_unary(g, TF_OP_RELU, tf_graph_input(g, "m", TF_F32, S(F(4), F(5))));
  finish_with_mse(g, tf_keep(g, tf_mul(g, a, a), m), S(F(3), F(4), F(5)));
  check_case(&(gradcheck_case){"keep broadcast", g, VALUES_ANY, 0, 0});
}

static void unary_cases(void) {
  static const struct {
    tf_op op;
    value_kind values;
  } ops[] = {{TF_OP_NEG, VALUES_ANY},         {TF_OP_EXP, VALUES_ANY},
             {TF_OP_LOG, VALUES_POSITIVE},    {TF_OP_SQRT, VALUES_POSITIVE},
             {TF_OP_RSQRT, VALUES_POSITIVE},  {TF_OP_RELU, VALUES_SPREAD},
             {TF_OP_SILU, VALUES_ANY},        {TF_OP_SIGMOID, VALUES_ANY},
             {TF_OP_TANH, VALUES_ANY},        {TF_OP_SOFTPLUS, VALUES_ANY},
             {TF_OP_ABS, VALUES_SPREAD},      {TF_OP_ERF, VALUES_ANY},
             {TF_OP_SIN, VALUES_ANY},         {TF_OP_COS, VALUES_ANY},
             {TF_OP_ASIN, VALUES_INSIDE_ONE}, {TF_OP_ACOS, VALUES_INSIDE_ONE},
             {TF_OP_ATAN, VALUES_ANY},        {TF_OP_TAN, VALUES_ANY},
             {TF_OP_SINH, VALUES_ANY},        {TF_OP_COSH, VALUES_ANY},
             {TF_OP_ASINH, VALUES_ANY},       {TF_OP_ACOSH, VALUES_GREATER_THAN_ONE},
             {TF_OP_ATANH, VALUES_INSIDE_ONE}};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    tf_graph *g = new_graph("unary");
    tf_tensor_id x = param(g, "x", S(F(3), F(7)));
    finish_with_mse(g, tf_unary(g, ops[i].op, x), S(F(3), F(7)));
    check_case(&(gradcheck_case){tf_op_name(ops[i].op), g, ops[i].values, 0, 0});
  }
  for (int approximate = 0; approximate < 2; approximate++) {
    tf_graph *g = new_graph("gelu");
    tf_tensor_id x = param(g, "x", S(F(3), F(7)));
    finish_with_mse(g, tf_gelu(g, x, approximate), S(F(3), F(7)));
    check_case(&(gradcheck_case){approximate ? "gelu tanh" : "gelu erf", g, VALUES_ANY, 0, 0});
  }
  const float slopes[] = {0.2f, -0.5f}; /* a negative slope too: the gradient reads x, not y */
  for (int i = 0; i < 2; i++) {
    tf_graph *g = new_graph("leaky_relu");
    tf_tensor_id x = param(g, "x", S(F(3), F(7)));
    finish_with_mse(g, tf_leaky_relu(g, x, slopes[i]), S(F(3), F(7)));
    check_case(&(gradcheck_case){i == 0 ? "leaky_relu 0.2" : "leaky_relu -0.5", g, VALUES_SPREAD, 0, 0});
  }
  /* bounds between VALUES_SPREAD's grid points (0.03 or more from each): no value at a kink */
  const float bounds[2][2] = {{-0.5f, 0.8f}, {-INFINITY, 0.8f}};
  for (int i = 0; i < 2; i++) {
    tf_graph *g = new_graph("clip");
    tf_tensor_id x = param(g, "x", S(F(3), F(7)));
    finish_with_mse(g, tf_clip(g, x, bounds[i][0], bounds[i][1]), S(F(3), F(7)));
    check_case(&(gradcheck_case){i == 0 ? "clip [-0.5, 0.8]" : "clip [-inf, 0.8]", g, VALUES_SPREAD, 0, 0});
  }
}

static void reduce_cases(void) {
  static const tf_op ops[3] = {TF_OP_SUM, TF_OP_MEAN, TF_OP_MAX};
  for (int i = 0; i < 3; i++) {
    for (int keep = 0; keep < 2; keep++) {
      tf_graph *g = new_graph("reduce");
      tf_tensor_id x = param(g, "x", S(F(3), F(4), F(5)));
      int32_t axes[2] = {0, -1};
      tf_tensor_id y = tf_reduce(g, ops[i], x, axes, 2, keep);
      finish_with_mse(g, y, keep ? S(F(1), F(4), F(1)) : S(F(4)));
      char name[64];
      snprintf(name, sizeof(name), "%s axes 0,-1 keep=%d", tf_op_name(ops[i]), keep);
      check_case(&(gradcheck_case){name, g, VALUES_SPREAD, 0, 0});
    }
  }
  for (int log = 0; log < 2; log++) {
    for (int axis = -1; axis <= 0; axis++) {
      tf_graph *g = new_graph("softmax");
      tf_tensor_id x = param(g, "x", S(F(3), F(5)));
      tf_tensor_id y = log ? tf_log_softmax(g, x, axis) : tf_softmax(g, x, axis);
      finish_with_mse(g, y, S(F(3), F(5)));
      char name[64];
      snprintf(name, sizeof(name), "%s axis %d", log ? "log_softmax" : "softmax", axis);
      check_case(&(gradcheck_case){name, g, VALUES_ANY, 0, 0});
    }
  }
}

static void norm_cases(void) {
  for (int kind = 0; kind < 3; kind++) {
    tf_graph *g = new_graph("norm");
    tf_tensor_id x = param(g, "x", S(F(2), F(3), F(6)));
    tf_tensor_id gamma = param(g, "gamma", S(F(6)));
    tf_tensor_id y;
    if (kind == 2)
      y = tf_rms_norm(g, x, gamma, 1e-5f);
    else
      y = tf_layer_norm(g, x, gamma, kind == 0 ? param(g, "beta", S(F(6))) : TF_NO_TENSOR, 1e-5f);
    finish_with_mse(g, y, S(F(2), F(3), F(6)));
    check_case(&(gradcheck_case){kind == 0   ? "layer_norm"
                                 : kind == 1 ? "layer_norm no beta"
                                             : "rms_norm",
                                 g, VALUES_ANY, 0, 0});
  }
  const tf_shape shapes[3] = {S(F(4), F(3), F(5)), S(F(5), F(2)), S(F(2), F(3), F(2), F(3))};
  for (int i = 0; i < 3; i++) {
    tf_graph *g = new_graph("batch_norm");
    const int64_t channels = shapes[i].dims[1].size;
    tf_tensor_id x = param(g, "x", shapes[i]);
    tf_tensor_id y = tf_batch_norm(g, x, param(g, "gamma", S(F(channels))), param(g, "beta", S(F(channels))), 1e-5f);
    finish_with_mse(g, y, shapes[i]);
    check_case(&(gradcheck_case){"batch_norm", g, VALUES_ANY, 0, 0});
  }
  tf_graph *g = new_graph("embedding");
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I32, S(F(2), F(5)));
  tf_tensor_id table = param(g, "table", S(F(3), F(4)));
  finish_with_mse(g, tf_embedding(g, ids, table), S(F(2), F(5), F(4)));
  check_case(&(gradcheck_case){"embedding (repeated ids)", g, VALUES_ANY, 0, 0});
}

static void layout_cases(void) {
  tf_graph *g = new_graph("layout");
  tf_tensor_id x = param(g, "x", S(F(2), F(3), F(4)));
  int32_t perm[3] = {2, 0, 1};
  finish_with_mse(g, tf_transpose(g, tf_reshape(g, x, S(F(4), F(6), F(1))), perm, 3), S(F(1), F(4), F(6)));
  check_case(&(gradcheck_case){"reshape + transpose", g, VALUES_ANY, 0, 0});

  g = new_graph("concat");
  tf_tensor_id parts[3] = {param(g, "a", S(F(2), F(1), F(3))), param(g, "b", S(F(2), F(4), F(3))),
                           param(g, "c", S(F(2), F(2), F(3)))};
  finish_with_mse(g, tf_concat(g, parts, 3, 1), S(F(2), F(7), F(3)));
  check_case(&(gradcheck_case){"concat axis 1", g, VALUES_ANY, 0, 0});

  /* A part of no elements (b expanded to size 0: the builder allows it) takes no gradient: once an empty slice. */
  g = new_graph("concat_empty_part");
  tf_tensor_id b = param(g, "b", S(F(2), F(1), F(3)));
  tf_tensor_id with_empty[3] = {param(g, "a", S(F(2), F(1), F(3))),
                                tf_unary(g, TF_OP_TANH, tf_expand(g, b, S(F(2), F(0), F(3)))),
                                param(g, "c", S(F(2), F(2), F(3)))};
  finish_with_mse(g, tf_add(g, tf_concat(g, with_empty, 3, 1), tf_expand(g, b, S(F(2), F(3), F(3)))),
                  S(F(2), F(3), F(3)));
  check_case(&(gradcheck_case){"concat with a part of no elements", g, VALUES_ANY, 0, 0});

  g = new_graph("slice");
  x = param(g, "x", S(F(3), F(9)));
  finish_with_mse(g, tf_slice(g, x, -1, -8, 9, 2), S(F(3), F(4)));
  check_case(&(gradcheck_case){"slice step 2 from -8", g, VALUES_ANY, 0, 0});

  g = new_graph("expand");
  x = param(g, "x", S(F(3), F(1)));
  finish_with_mse(g, tf_expand(g, x, S(F(2), F(3), F(4))), S(F(2), F(3), F(4)));
  check_case(&(gradcheck_case){"expand", g, VALUES_ANY, 0, 0});

  g = new_graph("dropout");
  x = param(g, "x", S(F(4), F(8)));
  finish_with_mse(g, tf_dropout(g, x, 0.3f), S(F(4), F(8)));
  check_case(&(gradcheck_case){"dropout 0.3", g, VALUES_ANY, 0, 0});
}

static void conv_cases(void) {
  tf_graph *g = new_graph("conv1d");
  tf_tensor_id x = param(g, "x", S(F(2), F(4), F(9)));
  tf_tensor_id w = param(g, "w", S(F(6), F(2), F(3)));
  tf_tensor_id b = param(g, "b", S(F(6)));
  finish_with_mse(g, tf_conv1d(g, x, w, b, 2, 1, 1, 2), S(F(2), F(6), F(5)));
  check_case(&(gradcheck_case){"conv1d s2 p1 g2", g, VALUES_ANY, 0, 0});

  g = new_graph("conv2d");
  x = param(g, "x", S(F(2), F(3), F(7), F(6)));
  w = param(g, "w", S(F(4), F(3), F(3), F(2)));
  b = param(g, "b", S(F(4)));
  tf_conv_attrs conv = {{1, 2}, {2, 1}, {2, 1}, {0, 0}, 1};
  finish_with_mse(g, tf_conv2d(g, x, w, b, &conv), S(F(2), F(4), F(7), F(4)));
  check_case(&(gradcheck_case){"conv2d dilation 2", g, VALUES_ANY, 0, 0});

  g = new_graph("conv_transpose2d");
  x = param(g, "x", S(F(2), F(4), F(3), F(3)));
  w = param(g, "w", S(F(4), F(3), F(3), F(3)));
  b = param(g, "b", S(F(6)));
  tf_conv_attrs up = {{2, 2}, {1, 1}, {1, 1}, {1, 0}, 2};
  finish_with_mse(g, tf_conv_transpose2d(g, x, w, b, &up), S(F(2), F(6), F(6), F(5)));
  check_case(&(gradcheck_case){"conv_transpose2d s2 op1 g2", g, VALUES_ANY, 0, 0});

  for (int avg = 0; avg < 2; avg++) {
    g = new_graph("pool");
    x = param(g, "x", S(F(2), F(3), F(7), F(6)));
    tf_pool_attrs pool = {{3, 2}, {2, 2}, {1, 0}};
    finish_with_mse(g, tf_pool2d(g, avg ? TF_OP_AVG_POOL2D : TF_OP_MAX_POOL2D, x, &pool), S(F(2), F(3), F(4), F(3)));
    check_case(&(gradcheck_case){avg ? "avg_pool2d" : "max_pool2d", g, VALUES_SPREAD, 0, 0});
  }
}

static void attention_cases(void) {
  for (int causal = 0; causal < 2; causal++) {
    for (int cross = 0; cross < 2; cross++) {
      tf_graph *g = new_graph("attention");
      int64_t tk = cross ? 7 : 5;
      tf_tensor_id q = param(g, "q", S(F(2), F(5), F(6)));
      tf_tensor_id k = param(g, "k", S(F(2), F(tk), F(6)));
      tf_tensor_id v = param(g, "v", S(F(2), F(tk), F(6)));
      finish_with_mse(g, tf_attention(g, q, k, v, 2, causal), S(F(2), F(5), F(6)));
      char name[64];
      snprintf(name, sizeof(name), "attention causal=%d Tk=%" PRId64, causal, tk);
      check_case(&(gradcheck_case){name, g, VALUES_ANY, 0, 0});
    }
  }
}

static void loss_cases(void) {
  tf_graph *g = new_graph("cross_entropy");
  tf_tensor_id logits = param(g, "logits", S(F(2), F(4), F(3)));
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, S(F(2), F(4)));
  tf_graph_set_loss(g, tf_cross_entropy(g, logits, labels, 1));
  check_case(&(gradcheck_case){"cross_entropy ignore 1", g, VALUES_ANY, 0, 0});

  g = new_graph("bce");
  logits = param(g, "logits", S(F(3), F(5)));
  tf_tensor_id target = tf_graph_label(g, "target", TF_F32, S(F(3), F(5)));
  tf_graph_set_loss(g, tf_bce_with_logits(g, logits, target));
  check_case(&(gradcheck_case){"bce_with_logits", g, VALUES_ANY, 0, 0});

  /* ctc: labels 1 0 2 | 1 0 2 (a label equal to blank 0 too) over all 5 frames; then labels 4 3 5 | 4 3 5
   * with input lengths 4 and 3 (integer_base 3) and blank 1 */
  g = new_graph("ctc");
  logits = param(g, "logits", S(F(2), F(5), F(4)));
  labels = tf_graph_label(g, "labels", TF_I32, S(F(2), F(3)));
  tf_graph_set_loss(g, tf_ctc_loss(g, logits, labels, TF_NO_TENSOR, 0, false));
  check_case(&(gradcheck_case){"ctc_loss", g, VALUES_ANY, 0, 0});

  g = new_graph("ctc_lengths");
  logits = param(g, "logits", S(F(2), F(5), F(7)));
  labels = tf_graph_label(g, "labels", TF_I32, S(F(2), F(3)));
  tf_tensor_id lengths = tf_graph_label(g, "input_lengths", TF_I32, S(F(2)));
  tf_graph_set_loss(g, tf_ctc_loss(g, logits, labels, lengths, 1, false));
  check_case(&(gradcheck_case){"ctc_loss input_lengths", g, VALUES_ANY, 0, 3});

  /* a parameter used twice: the gradients of both uses are summed */
  g = new_graph("shared");
  tf_tensor_id x = param(g, "x", S(F(3), F(3)));
  tf_tensor_id y = tf_matmul(g, x, x, false, true);
  finish_with_mse(g, tf_add(g, y, tf_unary(g, TF_OP_TANH, x)), S(F(3), F(3)));
  check_case(&(gradcheck_case){"shared parameter", g, VALUES_ANY, 0, 0});
}

/* Gradients that reach a parameter unchanged through adds, so that one tensor is several of its
 * gradient parts, or a part of two parameters; with one micro-batch (a part then cannot be the
 * gradient written directly and also be added to it) and with two (the parts added in place,
 * matmul_accumulate, only once). Before 2026-11-29 `w + w + w` failed to compile ("updates input 0
 * in place and also reads it as input 1"). */
static void repeated_part_cases(void) {
  for (int32_t accumulate = 1; accumulate <= 2; accumulate++) {
    char name[64];
    tf_graph *g = new_graph("w+w+w");
    tf_tensor_id w = param(g, "w", S(F(4)));
    tf_tensor_id x = param(g, "x", S(F(3), F(4)));
    finish_with_mse(g, tf_add(g, x, tf_add(g, tf_add(g, w, w), w)), S(F(3), F(4)));
    snprintf(name, sizeof(name), "w + w + w, k=%d", accumulate);
    check_case(&(gradcheck_case){name, g, VALUES_ANY, accumulate, 0});

    g = new_graph("x(W+W)");
    x = param(g, "x", S(F(3), F(5)));
    w = param(g, "w", S(F(5), F(4)));
    finish_with_mse(g, tf_matmul(g, x, tf_add(g, w, w), false, false), S(F(3), F(4)));
    snprintf(name, sizeof(name), "x (W + W), k=%d", accumulate);
    check_case(&(gradcheck_case){name, g, VALUES_ANY, accumulate, 0});

    g = new_graph("x(W1+W2)");
    x = param(g, "x", S(F(3), F(5)));
    tf_tensor_id w1 = param(g, "w1", S(F(5), F(4))), w2 = param(g, "w2", S(F(5), F(4)));
    finish_with_mse(g, tf_matmul(g, x, tf_add(g, w1, w2), false, false), S(F(3), F(4)));
    snprintf(name, sizeof(name), "x (W1 + W2), k=%d", accumulate);
    check_case(&(gradcheck_case){name, g, VALUES_ANY, accumulate, 0});
  }
}

/* stop_gradient is no derivative, so no finite difference can check it: loss = sum(x * stop_gradient(x))
 * + sum(x) must give the gradient x + 1 (through the first factor and the second sum only; 2x + 1 if
 * gradients flowed through stop_gradient), and a loss that reaches the parameters only through
 * stop_gradient trains nothing (a compile error). */
static tf_plan *sgd_plan(tf_graph *g, tf_status *status) {
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.optimizer = TF_OPTIMIZER_SGD;
  options.target.threads = 1;
  tf_plan *plan = NULL;
  *status = tf_compile(g, &options, &plan);
  tf_graph_destroy(g);
  return plan;
}

static void stop_gradient_cases(void) {
  tf_graph *g = new_graph("stop_gradient");
  tf_tensor_id x = param(g, "x", S(F(3), F(7)));
  tf_tensor_id y = tf_mul(g, x, tf_unary(g, TF_OP_STOP_GRADIENT, x));
  tf_graph_set_loss(g,
                    tf_add(g, tf_reduce(g, TF_OP_SUM, y, NULL, 0, false), tf_reduce(g, TF_OP_SUM, x, NULL, 0, false)));
  tf_status status = NULL;
  tf_plan *plan = sgd_plan(g, &status);
  CHECK(&counts, status == NULL, "stop_gradient: compile: %s", tf_status_message(status));
  tf_status_free(status);
  if (plan) {
    tf_interp in;
    tf_interp_init(&in, plan);
    int32_t grad = -1, p = -1;
    for (int32_t b = 0; b < plan->n_buffers; b++)
      if (plan->buffers[b].role == TF_ROLE_GRADIENT)
        grad = b, p = plan->buffers[b].owner;
    CHECK(&counts, grad >= 0, "stop_gradient: x has no gradient buffer");
    if (grad >= 0) {
      fill_values(&in, p, VALUES_ANY);
      tf_interp_run(&in, 0, plan->micro_steps);
      const double *xs = in.data[p], *gs = in.data[grad];
      double worst = 0;
      for (int64_t i = 0; i < tf_interp_count(&in, p); i++)
        worst = fmax(worst, fabs(gs[i] - (xs[i] + 1)));
      CHECK(&counts, worst < 1e-12, "stop_gradient: d loss / d x is %.10g away from x + 1", worst);
      printf("gradcheck %-28s %3" PRId64 " elements, worst |error| against x + 1 %.2e\n", "x * stop_gradient(x)",
             tf_interp_count(&in, p), worst);
    }
    tf_interp_free(&in);
    tf_plan_destroy(plan);
  }
  g = new_graph("only_stopped");
  x = param(g, "x", S(F(3), F(7)));
  tf_graph_set_loss(
      g, tf_reduce(g, TF_OP_SUM, tf_unary(g, TF_OP_EXP, tf_unary(g, TF_OP_STOP_GRADIENT, x)), NULL, 0, false));
  plan = sgd_plan(g, &status);
  CHECK(&counts, status && strstr(tf_status_message(status), "nothing to train"),
        "a loss reaching x only through stop_gradient: %s", status ? tf_status_message(status) : "compiled");
  tf_status_free(status);
  tf_plan_destroy(plan);
}

int main(void) {
  stop_gradient_cases();
  repeated_part_cases();
  matmul_cases();
  binary_cases();
  keep_case();
  unary_cases();
  reduce_cases();
  norm_cases();
  layout_cases();
  conv_cases();
  attention_cases();
  loss_cases();
  return tf_test_finish("gradcheck", &counts);
}
