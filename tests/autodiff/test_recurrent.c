/* tf_lstm, tf_gru and tf_rnn (include/tightfit/recurrent.h) in float64: each layer, every operand a
 * parameter, is compiled into a training plan and run by the f64 interpreter; its forward outputs
 * are compared with a direct loop implementation of ONNX's LSTM/GRU/RNN equations below (written from
 * the ONNX operator documentation, not from the builder), and each parameter's gradient with
 * central differences of the loss mse(Y) + mse(Y_h) (+ mse(Y_c)). PyTorch's agreement is tested
 * end to end by tests/python/test_from_torch_recurrent.py. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plan_interp.h"
#include "tightfit/compiler.h"
#include "tightfit/recurrent.h"

static tf_test_counts counts;

typedef struct rnn_case {
  const char *name;
  bool lstm;
  int64_t steps, batch, input, hidden;
  tf_rnn_options options;
  bool bias, initial; /* b; h0 (and c0) */
  bool simple;        /* a simple RNN (tf_rnn; lstm false) with `activation` */
  tf_op activation;
} rnn_case;

/* G: the gates of the case's layer. */
static int64_t gates_of(const rnn_case *c) { return c->lstm ? 4 : c->simple ? 1 : 3; }

static uint64_t random_state = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
  random_state = random_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(random_state >> 11) / 9007199254740992.0;
}

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

/* The simple RNN's activation f. */
static double activate(tf_op op, double v) {
  return op == TF_OP_RELU ? fmax(v, 0.0) : op == TF_OP_SIGMOID ? sigmoid(v) : tanh(v);
}

/* ---- the reference: ONNX LSTM / GRU / RNN, loops over [T, N, *] in either layout ---- */

typedef struct reference {
  const rnn_case *c;
  int64_t dirs, gates;
  const double *x, *w, *r, *b, *h0, *c0;
  double *y, *y_h, *y_c;
} reference;

/* Index of (time t, batch n, feature k) of x or of (direction d, n, k) of a state, in the case's layout. */
static int64_t x_at(const reference *ref, int64_t t, int64_t n, int64_t k) {
  const rnn_case *c = ref->c;
  return c->options.layout ? (n * c->steps + t) * c->input + k : (t * c->batch + n) * c->input + k;
}
static int64_t state_at(const reference *ref, int64_t d, int64_t n, int64_t k) {
  const rnn_case *c = ref->c;
  return c->options.layout ? (n * ref->dirs + d) * c->hidden + k : (d * c->batch + n) * c->hidden + k;
}
static int64_t y_at(const reference *ref, int64_t t, int64_t d, int64_t n, int64_t k) {
  const rnn_case *c = ref->c;
  return c->options.layout ? ((n * c->steps + t) * ref->dirs + d) * c->hidden + k
                           : ((t * ref->dirs + d) * c->batch + n) * c->hidden + k;
}

/* sum_k x_t[n, k] W[d, row, k] + Wb[d, row]: the input part of gate row `row`. */
static double input_part(const reference *ref, int64_t d, int64_t row, int64_t t, int64_t n) {
  const rnn_case *c = ref->c;
  const int64_t gh = ref->gates * c->hidden;
  double sum = ref->b ? ref->b[d * 2 * gh + row] : 0;
  for (int64_t k = 0; k < c->input; k++)
    sum += ref->x[x_at(ref, t, n, k)] * ref->w[(d * gh + row) * c->input + k];
  return sum;
}

/* sum_k h[k] R[d, row, k] + Rb[d, row]. */
static double recurrent_part(const reference *ref, int64_t d, int64_t row, const double *h) {
  const rnn_case *c = ref->c;
  const int64_t gh = ref->gates * c->hidden;
  double sum = ref->b ? ref->b[d * 2 * gh + gh + row] : 0;
  for (int64_t k = 0; k < c->hidden; k++)
    sum += h[k] * ref->r[(d * gh + row) * c->hidden + k];
  return sum;
}

static void reference_run(reference *ref) {
  const rnn_case *c = ref->c;
  const int64_t H = c->hidden;
  double h[16], cell[16], next_h[16], next_c[16], rh[16];
  for (int64_t d = 0; d < ref->dirs; d++) {
    const bool reverse = c->options.direction == TF_RNN_REVERSE || d == 1;
    for (int64_t n = 0; n < c->batch; n++) {
      for (int64_t k = 0; k < H; k++) {
        h[k] = ref->h0 ? ref->h0[state_at(ref, d, n, k)] : 0;
        cell[k] = ref->c0 ? ref->c0[state_at(ref, d, n, k)] : 0;
      }
      for (int64_t s = 0; s < c->steps; s++) {
        const int64_t t = reverse ? c->steps - 1 - s : s;
        for (int64_t k = 0; k < H; k++) {
          if (c->simple) { /* h = f(x W^T + Wb + h R^T + Rb) */
            next_h[k] = activate(c->activation, input_part(ref, d, k, t, n) + recurrent_part(ref, d, k, h));
          } else if (c->lstm) { /* gates i, o, f, c */
            double i = sigmoid(input_part(ref, d, k, t, n) + recurrent_part(ref, d, k, h));
            double o = sigmoid(input_part(ref, d, H + k, t, n) + recurrent_part(ref, d, H + k, h));
            double f = sigmoid(input_part(ref, d, 2 * H + k, t, n) + recurrent_part(ref, d, 2 * H + k, h));
            double g = tanh(input_part(ref, d, 3 * H + k, t, n) + recurrent_part(ref, d, 3 * H + k, h));
            next_c[k] = f * cell[k] + i * g;
            next_h[k] = o * tanh(next_c[k]);
          } else { /* gates z, r, h */
            double z = sigmoid(input_part(ref, d, k, t, n) + recurrent_part(ref, d, k, h));
            double candidate;
            if (c->options.linear_before_reset) {
              double r = sigmoid(input_part(ref, d, H + k, t, n) + recurrent_part(ref, d, H + k, h));
              candidate = tanh(input_part(ref, d, 2 * H + k, t, n) + r * recurrent_part(ref, d, 2 * H + k, h));
            } else {
              for (int64_t j = 0; j < H; j++)
                rh[j] = sigmoid(input_part(ref, d, H + j, t, n) + recurrent_part(ref, d, H + j, h)) * h[j];
              candidate = tanh(input_part(ref, d, 2 * H + k, t, n) + recurrent_part(ref, d, 2 * H + k, rh));
            }
            next_h[k] = (1 - z) * candidate + z * h[k];
          }
        }
        for (int64_t k = 0; k < H; k++) {
          h[k] = next_h[k];
          cell[k] = next_c[k];
          ref->y[y_at(ref, t, d, n, k)] = h[k];
        }
      }
      for (int64_t k = 0; k < H; k++) {
        ref->y_h[state_at(ref, d, n, k)] = h[k];
        if (ref->y_c)
          ref->y_c[state_at(ref, d, n, k)] = cell[k];
      }
    }
  }
}

/* ---- the graph ---- */

#define F(n) tf_fixed(n)

static tf_tensor_id param(tf_graph *g, const char *name, tf_shape shape) {
  return tf_graph_parameter(g, name, TF_F32, shape, tf_init_make(TF_INIT_NORMAL, 0, 1));
}

/* The layer with every operand a parameter, outputs named y, y_h, y_c, loss = sum of their mse. */
static tf_graph *build(const rnn_case *c) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create(c->name, &g));
  const int64_t dirs = c->options.direction == TF_RNN_BIDIRECTIONAL ? 2 : 1, gh = gates_of(c) * c->hidden;
  const bool bf = c->options.layout == 1;
  tf_tensor_id x = param(
      g, "x", bf ? TF_SHAPE(F(c->batch), F(c->steps), F(c->input)) : TF_SHAPE(F(c->steps), F(c->batch), F(c->input)));
  tf_tensor_id w = param(g, "w", TF_SHAPE(F(dirs), F(gh), F(c->input)));
  tf_tensor_id r = param(g, "r", TF_SHAPE(F(dirs), F(gh), F(c->hidden)));
  tf_tensor_id b = c->bias ? param(g, "b", TF_SHAPE(F(dirs), F(2 * gh))) : TF_NO_TENSOR;
  tf_shape state = bf ? TF_SHAPE(F(c->batch), F(dirs), F(c->hidden)) : TF_SHAPE(F(dirs), F(c->batch), F(c->hidden));
  tf_tensor_id h0 = c->initial ? param(g, "h0", state) : TF_NO_TENSOR;
  tf_tensor_id c0 = c->initial && c->lstm ? param(g, "c0", state) : TF_NO_TENSOR;
  tf_tensor_id out[3] = {TF_NO_TENSOR, TF_NO_TENSOR, TF_NO_TENSOR};
  if (c->lstm)
    tf_lstm(g, x, w, r, b, h0, c0, &c->options, out);
  else if (c->simple)
    tf_rnn(g, x, w, r, b, h0, c->activation, &c->options, out);
  else
    tf_gru(g, x, w, r, b, h0, &c->options, out);
  static const char *names[3] = {"y", "y_h", "y_c"};
  tf_tensor_id loss = TF_NO_TENSOR;
  for (int32_t i = 0; i < (c->lstm ? 3 : 2); i++) {
    tf_graph_rename(g, out[i], names[i]);
    tf_graph_add_output(g, out[i]);
    char label[16];
    snprintf(label, sizeof(label), "%s_target", names[i]);
    tf_tensor_info info;
    tf_shape shape = {0};
    if (tf_graph_tensor(g, out[i], &info)) {
      shape.rank = info.rank;
      for (int32_t a = 0; a < info.rank; a++)
        shape.dims[a] = F(info.shape[a]);
    }
    tf_tensor_id part = tf_mse(g, out[i], tf_graph_label(g, label, TF_F32, shape));
    loss = loss == TF_NO_TENSOR ? part : tf_add(g, loss, part);
  }
  tf_graph_set_loss(g, loss);
  return g;
}

static const double *buffer(tf_interp *in, const char *name) {
  int32_t id = tf_interp_find(in, name);
  return id >= 0 ? in->data[id] : NULL;
}

static void check_forward(const rnn_case *c, tf_interp *in) {
  reference ref = {.c = c, .dirs = c->options.direction == TF_RNN_BIDIRECTIONAL ? 2 : 1, .gates = gates_of(c)};
  ref.x = buffer(in, "x");
  ref.w = buffer(in, "w");
  ref.r = buffer(in, "r");
  ref.b = c->bias ? buffer(in, "b") : NULL;
  ref.h0 = c->initial ? buffer(in, "h0") : NULL;
  ref.c0 = c->initial && c->lstm ? buffer(in, "c0") : NULL;
  const double *got[3] = {buffer(in, "y"), buffer(in, "y_h"), c->lstm ? buffer(in, "y_c") : NULL};
  const int64_t states = ref.dirs * c->batch * c->hidden, counts_of[3] = {c->steps * states, states, states};
  ref.y = calloc((size_t)counts_of[0], sizeof(double));
  ref.y_h = calloc((size_t)states, sizeof(double));
  ref.y_c = c->lstm ? calloc((size_t)states, sizeof(double)) : NULL;
  CHECK(&counts, ref.x && ref.w && ref.r && got[0] && got[1], "%s: buffers x, w, r, y, y_h not found", c->name);
  if (ref.x && ref.w && ref.r && got[0] && got[1]) {
    reference_run(&ref);
    double *want[3] = {ref.y, ref.y_h, ref.y_c}, worst = 0;
    for (int32_t o = 0; o < (c->lstm ? 3 : 2); o++)
      for (int64_t e = 0; got[o] && e < counts_of[o]; e++) {
        double error = fabs(got[o][e] - want[o][e]);
        worst = fmax(worst, error);
        CHECK(&counts, error < 1e-12, "%s: output %d element %" PRId64 ": graph %.15g, reference %.15g", c->name, o, e,
              got[o][e], want[o][e]);
      }
    printf("forward   %-44s Y, Y_h%s vs the loop reference: worst |error| %.1e\n", c->name, c->lstm ? ", Y_c" : "",
           worst);
  }
  free(ref.y);
  free(ref.y_h);
  free(ref.y_c);
}

static double loss_of(tf_interp *in, int32_t forward_end, int32_t loss) {
  tf_interp_run(in, 0, forward_end);
  return *(double *)in->data[loss];
}

static void check_case(const rnn_case *c) {
  tf_graph *g = build(c);
  const struct tf_status_s *built = tf_graph_status(g);
  CHECK(&counts, built == NULL, "%s: build: %s", c->name, tf_status_message(built));
  if (built) {
    tf_graph_destroy(g);
    return;
  }
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.optimizer = TF_OPTIMIZER_SGD;
  options.target.threads = 1;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &options, &plan);
  CHECK(&counts, status == NULL, "%s: compile: %s", c->name, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  if (!plan)
    return;
  tf_interp in;
  tf_interp_init(&in, plan);
  int32_t forward_end = 0;
  while (forward_end < plan->n_steps && plan->steps[forward_end].phase == TF_PHASE_FORWARD)
    forward_end++;
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    tf_buffer_role role = plan->buffers[b].role;
    if (role == TF_ROLE_PARAMETER || role == TF_ROLE_LABEL)
      for (int64_t i = 0; i < tf_interp_count(&in, b); i++)
        ((double *)in.data[b])[i] = 2.0 * uniform() - 1.0;
  }
  tf_interp_run(&in, 0, plan->micro_steps);
  check_forward(c, &in);
  double worst = 0;
  int checked = 0;
  for (int32_t gb = 0; gb < plan->n_buffers; gb++) {
    if (plan->buffers[gb].role != TF_ROLE_GRADIENT)
      continue;
    int32_t p = plan->buffers[gb].owner;
    int64_t n = tf_interp_count(&in, p);
    double *x = in.data[p], *grad = in.data[gb];
    int64_t stride = n > 30 ? n / 30 : 1;
    for (int64_t i = 0; i < n; i += stride) {
      double saved = x[i], h = 1e-6 * fmax(1.0, fabs(saved));
      x[i] = saved + h;
      double up = loss_of(&in, forward_end, plan->loss);
      x[i] = saved - h;
      double down = loss_of(&in, forward_end, plan->loss);
      x[i] = saved;
      double numeric = (up - down) / (2 * h);
      double error = fabs(numeric - grad[i]) / fmax(1e-3, fmax(fabs(numeric), fabs(grad[i])));
      worst = fmax(worst, error);
      checked++;
      CHECK(&counts, error < 1e-5, "%s: d loss / d %s[%" PRId64 "]: autodiff %.10g, finite difference %.10g", c->name,
            plan->buffers[p].name, i, grad[i], numeric);
    }
  }
  CHECK(&counts, checked > 0, "%s: no gradient was checked", c->name);
  printf("gradcheck %-44s %3d elements, worst relative error %.2e\n", c->name, checked, worst);
  tf_interp_free(&in);
  tf_plan_destroy(plan);
}

/* The builder's errors name the operand, its shape and the expected one. */
static void check_errors(void) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create("bad", &g));
  tf_tensor_id x = param(g, "x", TF_SHAPE(F(3), F(2), F(4)));
  tf_tensor_id w = param(g, "w", TF_SHAPE(F(1), F(8), F(5)));
  tf_tensor_id r = param(g, "r", TF_SHAPE(F(1), F(8), F(2)));
  tf_tensor_id y = tf_lstm(g, x, w, r, TF_NO_TENSOR, TF_NO_TENSOR, TF_NO_TENSOR, NULL, NULL);
  const char *message = tf_status_message(tf_graph_status(g));
  CHECK(&counts, y == TF_NO_TENSOR && strstr(message, "w 'w' is f32 [1,8,5], expected f32 [1,8,4]"),
        "a w of the wrong input size: %s", message);
  printf("error     %s\n", message);
  tf_graph_destroy(g);
  tf_status_free(tf_graph_create("bad", &g));
  x = param(g, "x", TF_SHAPE(F(3), F(2), F(4)));
  w = param(g, "w", TF_SHAPE(F(1), F(2), F(4)));
  r = param(g, "r", TF_SHAPE(F(1), F(2), F(2)));
  y = tf_rnn(g, x, w, r, TF_NO_TENSOR, TF_NO_TENSOR, TF_OP_GELU, NULL, NULL);
  message = tf_status_message(tf_graph_status(g));
  CHECK(&counts, y == TF_NO_TENSOR && strstr(message, "is not tanh, relu or sigmoid"), "an RNN with gelu: %s", message);
  printf("error     %s\n", message);
  tf_graph_destroy(g);
  /* a time axis past TF_RNN_MAX_STEPS (the fuzzer's find: 2^29 steps unrolled ran out of memory) */
  tf_status_free(tf_graph_create("bad", &g));
  x = param(g, "x", TF_SHAPE(F(TF_RNN_MAX_STEPS + 1), F(1), F(1)));
  w = param(g, "w", TF_SHAPE(F(1), F(3), F(1)));
  r = param(g, "r", TF_SHAPE(F(1), F(3), F(1)));
  y = tf_gru(g, x, w, r, TF_NO_TENSOR, TF_NO_TENSOR, NULL, NULL);
  message = tf_status_message(tf_graph_status(g));
  CHECK(&counts, y == TF_NO_TENSOR && strstr(message, "has 16385 time steps") && strstr(message, "at most 16384"),
        "a GRU of 16385 steps: %s", message);
  printf("error     %s\n", message);
  tf_graph_destroy(g);
}

int main(void) {
  tf_rnn_options forward = tf_rnn_options_default(), both = forward, reverse = forward, both_bf = forward;
  both.direction = TF_RNN_BIDIRECTIONAL;
  reverse.direction = TF_RNN_REVERSE;
  both_bf.direction = TF_RNN_BIDIRECTIONAL;
  both_bf.layout = 1;
  tf_rnn_options gru_after_reset = forward, gru_after_reset_bf = both_bf;
  gru_after_reset.linear_before_reset = false;
  gru_after_reset_bf.linear_before_reset = false;
  const rnn_case cases[] = {
      {"lstm forward, b, h0, c0", true, 3, 2, 3, 2, forward, true, true, false, TF_OP_TANH},
      {"lstm bidirectional, layout 1, no b/h0/c0", true, 3, 2, 3, 2, both_bf, false, false, false, TF_OP_TANH},
      {"lstm reverse, b", true, 4, 1, 2, 3, reverse, true, false, false, TF_OP_TANH},
      {"lstm bidirectional, b, h0, c0", true, 2, 2, 2, 2, both, true, true, false, TF_OP_TANH},
      {"gru bidirectional, b, h0 (linear before reset)", false, 3, 2, 3, 2, both, true, true, false, TF_OP_TANH},
      {"gru forward, b, no h0 (linear before reset)", false, 3, 2, 2, 2, forward, true, false, false, TF_OP_TANH},
      {"gru forward, b, h0 (reset before linear)", false, 3, 2, 3, 2, gru_after_reset, true, true, false, TF_OP_TANH},
      {"gru bidirectional, layout 1, h0 (reset first)", false, 2, 3, 2, 2, gru_after_reset_bf, false, true, false,
       TF_OP_TANH},
      /* more steps than one concat takes (64): the outputs are concatenated in groups */
      {"lstm bidirectional, 70 steps", true, 70, 1, 1, 1, both, true, true, false, TF_OP_TANH},
      {"rnn tanh forward, b, h0", false, 3, 2, 3, 2, forward, true, true, true, TF_OP_TANH},
      {"rnn relu bidirectional, layout 1, b", false, 3, 2, 3, 2, both_bf, true, false, true, TF_OP_RELU},
      {"rnn sigmoid reverse, no b, h0", false, 4, 1, 2, 3, reverse, false, true, true, TF_OP_SIGMOID},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    check_case(&cases[i]);
  check_errors();
  return tf_test_finish("recurrent", &counts);
}
