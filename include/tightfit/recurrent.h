/* Recurrent layers (LSTM, GRU, simple RNN) for the graph builder (tightfit/graph.h), in ONNX's conventions.
 *
 * A layer is a composite: it is unrolled over the time axis into ops the op table has (one matmul
 * for the input projection of every time step, then per step the recurrent matmul, slices, sigmoid,
 * tanh, mul and add), so every backend, autodiff, the planner and recompute handle it as any other
 * nodes. The number of nodes and the activations saved for the backward pass grow with T, which is
 * taken at its current size: the time axis must not be a symbol that is bound to another value later.
 *
 * Tensors (ONNX LSTM/GRU/RNN; G = 4 gates for LSTM in order i, o, f, c; G = 3 for GRU in order z, r, h;
 * G = 1 for RNN; dirs = 2 for a bidirectional layer, else 1):
 *   x  [T, N, I] (layout 0) or [N, T, I] (layout 1)
 *   w  [dirs, G*H, I]   input weights            r [dirs, G*H, H]  recurrent weights
 *   b  [dirs, 2*G*H]    input then recurrent biases (optional: TF_NO_TENSOR)
 *   h0, c0 [dirs, N, H] (layout 0) or [N, dirs, H] (layout 1): initial states (optional: zeros)
 * Outputs: Y [T, dirs, N, H] (layout 0) or [N, T, dirs, H] (layout 1); Y_h (and LSTM's Y_c) the
 * last states, shaped as h0. A reverse direction runs from t = T-1 down to 0 and writes Y in time
 * order. Errors stick in the graph as for every constructor. */
#ifndef TIGHTFIT_RECURRENT_H
#define TIGHTFIT_RECURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "tightfit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most time steps a layer unrolls (each about 15 nodes); more is an error. */
#define TF_RNN_MAX_STEPS 16384

typedef enum tf_rnn_direction {
  TF_RNN_FORWARD = 0,
  TF_RNN_REVERSE = 1,
  TF_RNN_BIDIRECTIONAL = 2,
} tf_rnn_direction;

typedef struct tf_rnn_options {
  int64_t hidden_size;        /* H; 0 takes it from r's last axis */
  tf_rnn_direction direction; /* forward, reverse or bidirectional (two directions) */
  int32_t layout;             /* 0: time-major tensors, 1: batch-major (ONNX's layout attribute) */
  bool linear_before_reset;   /* GRU: r * (h R_h^T + Rb_h) as PyTorch computes it (true), or (r * h) R_h^T */
} tf_rnn_options;

/* The options ONNX defaults to: forward, layout 0, hidden size from r, linear_before_reset true
 * (PyTorch's GRU). */
tf_rnn_options tf_rnn_options_default(void);

/* An LSTM layer (ONNX LSTM without peepholes, clip or input_forget; sigmoid/tanh/tanh): returns Y and,
 * when `outputs` is not NULL, stores Y, Y_h and Y_c in outputs[0..2] (TF_NO_TENSOR after an error).
 * b, h0 and c0 may be TF_NO_TENSOR. */
tf_tensor_id tf_lstm(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b, tf_tensor_id h0,
                     tf_tensor_id c0, const tf_rnn_options *options, tf_tensor_id outputs[3]);

/* A GRU layer (ONNX GRU; sigmoid/tanh): returns Y and, when `outputs` is not NULL, stores Y and Y_h
 * in outputs[0..1]. b and h0 may be TF_NO_TENSOR. */
tf_tensor_id tf_gru(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b, tf_tensor_id h0,
                    const tf_rnn_options *options, tf_tensor_id outputs[2]);

/* A simple RNN layer (ONNX RNN, PyTorch's nn.RNN): h_t = f(x_t W^T + Wb + Rb + h_(t-1) R^T) with f
 * `activation` (TF_OP_TANH, TF_OP_RELU or TF_OP_SIGMOID; the same in both directions): returns Y and,
 * when `outputs` is not NULL, stores Y and Y_h in outputs[0..1]. b and h0 may be TF_NO_TENSOR. */
tf_tensor_id tf_rnn(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id r, tf_tensor_id b, tf_tensor_id h0,
                    tf_op activation, const tf_rnn_options *options, tf_tensor_id outputs[2]);

#ifdef __cplusplus
}
#endif
#endif
