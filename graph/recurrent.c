/* LSTM, GRU and simple RNN layers (include/tightfit/recurrent.h) unrolled over time into existing ops. The input
 * projection of all time steps is one matmul; each step adds only the recurrent product, so a step
 * costs one [N, H] x [H, G*H] matmul and elementwise ops on [1, N, *] slices. States stay rank 3
 * ([1, N, H]) so that no reshape needs the batch size, which may be a symbol. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "tightfit/recurrent.h"

#define MAX_CONCAT 64 /* TF_OP_VARIADIC: concat's most inputs */

typedef struct rnn_layer {
  const char *op;   /* "lstm", "gru" or "rnn", for messages */
  int32_t gates;    /* G */
  tf_op activation; /* the simple RNN's: TF_OP_TANH, TF_OP_RELU or TF_OP_SIGMOID */
  int64_t steps, batch, input, hidden, dirs;
  tf_dtype dtype;
  tf_rnn_options options;
} rnn_layer;

tf_rnn_options tf_rnn_options_default(void) {
  tf_rnn_options options = {0, TF_RNN_FORWARD, 0, true};
  return options;
}

static void fail(tf_graph *g, const char *format, ...) TF_PRINTF(2, 3);
static void fail(tf_graph *g, const char *format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  tf_ir_fail(g, tf_status_new(TF_ERR_SHAPE, "%s", message));
}

static const char *tensor_name(const tf_graph *g, tf_tensor_id id) {
  return id >= 0 && id < g->n_tensors ? g->tensors[id].name : "?";
}

/* "[2,12,*]" (a dim of -1 as *). */
static void format_dims(char *out, size_t size, const int64_t *dims, int32_t rank) {
  size_t used = (size_t)snprintf(out, size, "[");
  for (int32_t i = 0; i < rank && used < size; i++)
    used += (size_t)(dims[i] < 0 ? snprintf(out + used, size - used, "%s*", i ? "," : "")
                                 : snprintf(out + used, size - used, "%s%" PRId64, i ? "," : "", dims[i]));
  if (used < size)
    snprintf(out + used, size - used, "]");
}

/* Checks that tensor `id` (the layer's operand `what`) exists, has the layer's dtype and the shape
 * dims[0..rank); a dim of -1 is not checked. */
static bool check_operand(tf_graph *g, const rnn_layer *layer, const char *what, tf_tensor_id id, int32_t rank,
                          const int64_t *dims) {
  if (g->status)
    return false;
  if (id < 0 || id >= g->n_tensors) {
    fail(g, "%s: %s is tensor id %" PRId32 ", outside 0..%" PRId32, layer->op, what, id, g->n_tensors - 1);
    return false;
  }
  const tf_ir_tensor *t = &g->tensors[id];
  bool same = t->rank == rank;
  for (int32_t i = 0; same && i < rank; i++)
    same = dims[i] < 0 || t->shape[i] == dims[i];
  if (!same || t->dtype != layer->dtype) {
    char want[160], got[160];
    format_dims(want, sizeof(want), dims, rank);
    format_dims(got, sizeof(got), t->shape, t->rank);
    fail(g,
         "%s: %s '%s' is %s %s, expected %s %s (T=%" PRId64 ", N=%" PRId64 ", I=%" PRId64 ", H=%" PRId64
         ", directions=%" PRId64 ")",
         layer->op, what, t->name, tf_dtype_name(t->dtype), got, tf_dtype_name(layer->dtype), want, layer->steps,
         layer->batch, layer->input, layer->hidden, layer->dirs);
    return false;
  }
  return true;
}

/* Reads the sizes from x and r and checks every operand against them. */
static bool check_layer(tf_graph *g, rnn_layer *layer, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b,
                        tf_tensor_id h0, tf_tensor_id c0) {
  if (g->status)
    return false;
  const tf_rnn_options *o = &layer->options;
  if (o->direction != TF_RNN_FORWARD && o->direction != TF_RNN_REVERSE && o->direction != TF_RNN_BIDIRECTIONAL) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT,
                                "%s: direction %d is not forward (0), reverse (1) or "
                                "bidirectional (2)",
                                layer->op, (int)o->direction));
    return false;
  }
  if (o->layout != 0 && o->layout != 1) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: layout %" PRId32 " is not 0 ([T, N, I]) or 1 ([N, T, I])",
                                layer->op, o->layout));
    return false;
  }
  for (int32_t i = 0; i < 2; i++) {
    tf_tensor_id id = i ? r : x;
    if (id < 0 || id >= g->n_tensors || g->tensors[id].rank != 3) {
      fail(g, "%s: %s '%s' must have rank 3 (%s)", layer->op, i ? "r" : "x", tensor_name(g, id),
           i ? "[directions, G*H, H]" : (o->layout ? "[N, T, I]" : "[T, N, I]"));
      return false;
    }
  }
  const tf_ir_tensor *xt = &g->tensors[x], *rt = &g->tensors[r];
  layer->dtype = xt->dtype;
  layer->steps = xt->shape[o->layout ? 1 : 0];
  layer->batch = xt->shape[o->layout ? 0 : 1];
  layer->input = xt->shape[2];
  layer->hidden = o->hidden_size ? o->hidden_size : rt->shape[2];
  layer->dirs = o->direction == TF_RNN_BIDIRECTIONAL ? 2 : 1;
  if (layer->hidden < 1 || layer->steps < 1) {
    fail(g, "%s: hidden size %" PRId64 " and time steps %" PRId64 " (x '%s') must be at least 1", layer->op,
         layer->hidden, layer->steps, xt->name);
    return false;
  }
  if (layer->steps > TF_RNN_MAX_STEPS) {
    fail(g,
         "%s: x '%s' has %" PRId64 " time steps; a recurrent layer is unrolled into about 15 nodes a step, and "
         "takes at most %d steps",
         layer->op, xt->name, layer->steps, TF_RNN_MAX_STEPS);
    return false;
  }
  const int64_t dirs = layer->dirs, gh = layer->gates * layer->hidden, n = layer->batch, h = layer->hidden;
  const int64_t w_dims[3] = {dirs, gh, layer->input}, r_dims[3] = {dirs, gh, h}, b_dims[2] = {dirs, 2 * gh};
  const int64_t state_dims[3] = {o->layout ? n : dirs, o->layout ? dirs : n, h};
  return check_operand(g, layer, "w", w, 3, w_dims) && check_operand(g, layer, "r", r, 3, r_dims) &&
         (b == TF_NO_TENSOR || check_operand(g, layer, "b", b, 2, b_dims)) &&
         (h0 == TF_NO_TENSOR || check_operand(g, layer, "h0", h0, 3, state_dims)) &&
         (c0 == TF_NO_TENSOR || check_operand(g, layer, "c0", c0, 3, state_dims));
}

/* Direction d's [rows, cols] matrix of a [dirs, rows, cols] weight. */
static tf_tensor_id direction_matrix(tf_graph *g, tf_tensor_id w, int64_t d, int64_t rows, int64_t cols) {
  return tf_reshape(g, tf_slice(g, w, 0, d, d + 1, 1), TF_SHAPE(tf_fixed(rows), tf_fixed(cols)));
}

/* Direction d's [1, N, H] slice of an initial state (already [dirs, N, H]), or TF_NO_TENSOR. */
static tf_tensor_id direction_state(tf_graph *g, tf_tensor_id state, int64_t d) {
  return state == TF_NO_TENSOR ? TF_NO_TENSOR : tf_slice(g, state, 0, d, d + 1, 1);
}

/* a + b, where either may be absent (TF_NO_TENSOR). */
static tf_tensor_id add_optional(tf_graph *g, tf_tensor_id a, tf_tensor_id b) {
  if (a == TF_NO_TENSOR)
    return b;
  return b == TF_NO_TENSOR ? a : tf_add(g, a, b);
}

/* concat of n tensors along `axis`, in groups of at most MAX_CONCAT. */
static tf_tensor_id concat_many(tf_graph *g, tf_tensor_id *xs, int64_t n, int32_t axis) {
  while (n > 1 && !g->status) {
    int64_t groups = 0;
    for (int64_t start = 0; start < n; start += MAX_CONCAT) {
      int64_t count = n - start < MAX_CONCAT ? n - start : MAX_CONCAT;
      xs[groups++] = count == 1 ? xs[start] : tf_concat(g, xs + start, (int32_t)count, axis);
    }
    n = groups;
  }
  return g->status ? TF_NO_TENSOR : xs[0];
}

/* The state of one direction: h and c ([1, N, H], TF_NO_TENSOR for zeros). */
typedef struct rnn_state {
  tf_tensor_id h, c;
} rnn_state;

/* One LSTM step on gates = x_t W^T + biases [1, N, 4H] (gate order i, o, f, c). */
static rnn_state lstm_step(tf_graph *g, const rnn_layer *layer, tf_tensor_id gates, tf_tensor_id recurrent,
                           rnn_state s) {
  const int64_t h = layer->hidden;
  if (s.h != TF_NO_TENSOR)
    gates = tf_add(g, gates, tf_matmul(g, s.h, recurrent, false, true));
  tf_tensor_id iof = tf_unary(g, TF_OP_SIGMOID, tf_slice(g, gates, 2, 0, 3 * h, 1));
  tf_tensor_id i = tf_slice(g, iof, 2, 0, h, 1), o = tf_slice(g, iof, 2, h, 2 * h, 1);
  tf_tensor_id candidate = tf_unary(g, TF_OP_TANH, tf_slice(g, gates, 2, 3 * h, 4 * h, 1));
  tf_tensor_id input_part = tf_mul(g, i, candidate);
  if (s.c != TF_NO_TENSOR)
    s.c = tf_add(g, tf_mul(g, tf_slice(g, iof, 2, 2 * h, 3 * h, 1), s.c), input_part);
  else
    s.c = input_part;
  s.h = tf_mul(g, o, tf_unary(g, TF_OP_TANH, s.c));
  return s;
}

/* The GRU's recurrent weights and biases of one direction, split as the steps use them. */
typedef struct gru_weights {
  tf_tensor_id r_all, r_zr, r_h;    /* [3H, H], [2H, H], [H, H] */
  tf_tensor_id rb_all, rb_zr, rb_h; /* [1, 3H], [1, 2H], [1, H] or TF_NO_TENSOR (linear_before_reset) */
} gru_weights;

/* One GRU step on xt = x_t W^T + Wb (+ Rb without linear_before_reset) [1, N, 3H] (order z, r, h). */
static tf_tensor_id gru_step(tf_graph *g, const rnn_layer *layer, tf_tensor_id xt, const gru_weights *wt,
                             tf_tensor_id state) {
  const int64_t h = layer->hidden;
  const bool before_reset = layer->options.linear_before_reset;
  tf_tensor_id h_zr = TF_NO_TENSOR, h_n = TF_NO_TENSOR; /* the recurrent parts of z, r and of n */
  if (before_reset) {
    if (state != TF_NO_TENSOR) {
      tf_tensor_id product = add_optional(g, tf_matmul(g, state, wt->r_all, false, true), wt->rb_all);
      h_zr = tf_slice(g, product, 2, 0, 2 * h, 1);
      h_n = tf_slice(g, product, 2, 2 * h, 3 * h, 1);
    } else {
      h_zr = wt->rb_zr;
      h_n = wt->rb_h;
    }
  } else if (state != TF_NO_TENSOR) {
    h_zr = tf_matmul(g, state, wt->r_zr, false, true);
  }
  tf_tensor_id zr = tf_unary(g, TF_OP_SIGMOID, add_optional(g, tf_slice(g, xt, 2, 0, 2 * h, 1), h_zr));
  tf_tensor_id z = tf_slice(g, zr, 2, 0, h, 1), reset = tf_slice(g, zr, 2, h, 2 * h, 1);
  if (before_reset)
    h_n = h_n == TF_NO_TENSOR ? TF_NO_TENSOR : tf_mul(g, reset, h_n);
  else if (state != TF_NO_TENSOR)
    h_n = tf_matmul(g, tf_mul(g, reset, state), wt->r_h, false, true);
  tf_tensor_id n = tf_unary(g, TF_OP_TANH, add_optional(g, tf_slice(g, xt, 2, 2 * h, 3 * h, 1), h_n));
  /* (1 - z) n + z h = n + z (h - n): no constant of ones */
  if (state == TF_NO_TENSOR)
    return tf_sub(g, n, tf_mul(g, z, n));
  return tf_add(g, n, tf_mul(g, z, tf_sub(g, state, n)));
}

/* One simple RNN step: f(x_t W^T + biases + h R^T) on [1, N, H]. */
static tf_tensor_id rnn_step(tf_graph *g, const rnn_layer *layer, tf_tensor_id xt, tf_tensor_id recurrent,
                             tf_tensor_id state) {
  if (state != TF_NO_TENSOR)
    xt = tf_add(g, xt, tf_matmul(g, state, recurrent, false, true));
  return tf_unary(g, layer->activation, xt);
}

/* One direction d over x [T, N, I]: its outputs [T, N, H] and the last state in *last. */
static tf_tensor_id run_direction(tf_graph *g, const rnn_layer *layer, int64_t d, tf_tensor_id x, tf_tensor_id w,
                                  tf_tensor_id r, tf_tensor_id b, rnn_state *last) {
  const int64_t gh = layer->gates * layer->hidden, h = layer->hidden;
  const bool lstm = layer->gates == 4, reverse = layer->options.direction == TF_RNN_REVERSE || d == 1;
  tf_tensor_id projected = tf_matmul(g, x, direction_matrix(g, w, d, gh, layer->input), false, true);
  tf_tensor_id recurrent = direction_matrix(g, r, d, gh, h);
  gru_weights wt = {recurrent, TF_NO_TENSOR, TF_NO_TENSOR, TF_NO_TENSOR, TF_NO_TENSOR, TF_NO_TENSOR};
  if (b != TF_NO_TENSOR) {
    tf_tensor_id bd = tf_slice(g, b, 0, d, d + 1, 1);
    tf_tensor_id wb = tf_slice(g, bd, 1, 0, gh, 1), rb = tf_slice(g, bd, 1, gh, 2 * gh, 1);
    if (lstm || layer->gates == 1 || !layer->options.linear_before_reset) {
      projected = tf_add(g, projected, tf_add(g, wb, rb));
    } else {
      projected = tf_add(g, projected, wb);
      wt.rb_all = rb;
      wt.rb_zr = tf_slice(g, rb, 1, 0, 2 * h, 1);
      wt.rb_h = tf_slice(g, rb, 1, 2 * h, 3 * h, 1);
    }
  }
  if (layer->gates == 3 && !layer->options.linear_before_reset) {
    wt.r_zr = tf_slice(g, recurrent, 0, 0, 2 * h, 1);
    wt.r_h = tf_slice(g, recurrent, 0, 2 * h, 3 * h, 1);
  }
  tf_tensor_id *outputs = calloc((size_t)layer->steps, sizeof(tf_tensor_id));
  if (!outputs) {
    tf_ir_fail(
        g, tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for %" PRId64 " time steps", layer->op, layer->steps));
    return TF_NO_TENSOR;
  }
  rnn_state s = *last;
  for (int64_t step = 0; step < layer->steps && !g->status; step++) {
    const int64_t t = reverse ? layer->steps - 1 - step : step;
    tf_tensor_id xt = tf_slice(g, projected, 0, t, t + 1, 1);
    if (lstm)
      s = lstm_step(g, layer, xt, recurrent, s);
    else if (layer->gates == 1)
      s.h = rnn_step(g, layer, xt, recurrent, s.h);
    else
      s.h = gru_step(g, layer, xt, &wt, s.h);
    outputs[t] = s.h;
  }
  *last = s;
  tf_tensor_id y = g->status ? TF_NO_TENSOR : concat_many(g, outputs, layer->steps, 0);
  free(outputs);
  return y;
}

/* The layer: x, h0 and c0 in any layout; outputs[0..2] = Y, Y_h, Y_c in the layer's layout. */
static void run_layer(tf_graph *g, rnn_layer *layer, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b,
                      tf_tensor_id h0, tf_tensor_id c0, tf_tensor_id outputs[3]) {
  static const int32_t swap01[3] = {1, 0, 2}, batch_major[4] = {2, 0, 1, 3};
  outputs[0] = outputs[1] = outputs[2] = TF_NO_TENSOR;
  if (!check_layer(g, layer, x, w, r, b, h0, c0))
    return;
  const bool batch_first = layer->options.layout == 1;
  if (batch_first) {
    x = tf_transpose(g, x, swap01, 3);
    h0 = h0 == TF_NO_TENSOR ? h0 : tf_transpose(g, h0, swap01, 3);
    c0 = c0 == TF_NO_TENSOR ? c0 : tf_transpose(g, c0, swap01, 3);
  }
  tf_tensor_id ys[2], hs[2], cs[2];
  for (int64_t d = 0; d < layer->dirs; d++) {
    rnn_state s = {direction_state(g, h0, d), direction_state(g, c0, d)};
    tf_tensor_id y = run_direction(g, layer, d, x, w, r, b, &s);
    /* [T, N, H] -> [T, 1, N, H]: the batch may be a symbol, so it is the inferred axis */
    ys[d] = tf_reshape(g, y, TF_SHAPE(tf_fixed(layer->steps), tf_fixed(1), tf_fixed(-1), tf_fixed(layer->hidden)));
    hs[d] = s.h;
    cs[d] = s.c;
  }
  if (g->status)
    return;
  outputs[0] = layer->dirs == 1 ? ys[0] : tf_concat(g, ys, 2, 1);
  outputs[1] = layer->dirs == 1 ? hs[0] : tf_concat(g, hs, 2, 0);
  if (layer->gates == 4)
    outputs[2] = layer->dirs == 1 ? cs[0] : tf_concat(g, cs, 2, 0);
  if (batch_first) {
    outputs[0] = tf_transpose(g, outputs[0], batch_major, 4);
    for (int32_t i = 1; i < 3; i++)
      outputs[i] = outputs[i] == TF_NO_TENSOR ? TF_NO_TENSOR : tf_transpose(g, outputs[i], swap01, 3);
  }
  if (g->status)
    outputs[0] = outputs[1] = outputs[2] = TF_NO_TENSOR;
}

tf_tensor_id tf_lstm(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b, tf_tensor_id h0,
                     tf_tensor_id c0, const tf_rnn_options *options, tf_tensor_id outputs[3]) {
  rnn_layer layer = {.op = "lstm", .gates = 4, .options = options ? *options : tf_rnn_options_default()};
  tf_tensor_id results[3];
  run_layer(g, &layer, x, w, r, b, h0, c0, results);
  for (int32_t i = 0; outputs && i < 3; i++)
    outputs[i] = results[i];
  return results[0];
}

tf_tensor_id tf_gru(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b, tf_tensor_id h0,
                    const tf_rnn_options *options, tf_tensor_id outputs[2]) {
  rnn_layer layer = {.op = "gru", .gates = 3, .options = options ? *options : tf_rnn_options_default()};
  tf_tensor_id results[3];
  run_layer(g, &layer, x, w, r, b, h0, TF_NO_TENSOR, results);
  for (int32_t i = 0; outputs && i < 2; i++)
    outputs[i] = results[i];
  return results[0];
}

tf_tensor_id tf_rnn(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b, tf_tensor_id h0,
                    tf_op activation, const tf_rnn_options *options, tf_tensor_id outputs[2]) {
  rnn_layer layer = {
      .op = "rnn", .gates = 1, .activation = activation, .options = options ? *options : tf_rnn_options_default()};
  tf_tensor_id results[3] = {TF_NO_TENSOR, TF_NO_TENSOR, TF_NO_TENSOR};
  if (activation != TF_OP_TANH && activation != TF_OP_RELU && activation != TF_OP_SIGMOID)
    tf_ir_fail(
        g, tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "rnn: activation op %d is not tanh, relu or sigmoid (TF_OP_TANH, TF_OP_RELU, TF_OP_SIGMOID)",
                         (int)activation));
  else
    run_layer(g, &layer, x, w, r, b, h0, TF_NO_TENSOR, results);
  for (int32_t i = 0; outputs && i < 2; i++)
    outputs[i] = results[i];
  return results[0];
}
