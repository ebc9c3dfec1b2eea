/* Finite-difference gradient checks, in float64, of every backward kernel of the dense ops against
 * its forward kernel: conv1d/conv2d grad_input and grad_weight, max/avg pool grads, attention_grad,
 * embedding_grad; and of the gradients the compiler builds from forward kernels (matmul's four
 * transpose cases with broadcasting, conv_transpose2d through conv2d and conv2d_grad_weight).
 *
 * For L = sum(r * y) with random r, each sampled input element's central difference
 * (L(x + h) - L(x - h)) / 2h is compared with the analytic gradient (the backward kernel run with
 * dy = r); the error is max |numeric - analytic| / max |analytic|. Each backward kernel also runs
 * on 1, 2 and 3 threads: results must match the 1-thread run to 1e-12 and repeat bit for bit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dense_harness.h"

#define FD_STEP 1e-6
#define FD_TOLERANCE 1e-6
#define MAX_SAMPLES 300

static dense_rng rng = {20240611};

/* The worst error per op, printed at the end. */
static struct {
  const char *op;
  double worst;
} worst_by_op[32];

static void note_worst(const char *op, double error) {
  for (int i = 0; i < 32; i++) {
    if (!worst_by_op[i].op)
      worst_by_op[i].op = op;
    if (strcmp(worst_by_op[i].op, op) == 0) {
      worst_by_op[i].worst = fmax(worst_by_op[i].worst, error);
      return;
    }
  }
}

/* sum(r * op(inputs)), the forward kernel in f64 on one thread. Failures of the run go to `counts`. */
static double weighted_output(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, const dense_tensor *inputs,
                              int32_t n, const dense_tensor *r) {
  dense_tensor out[TF_MAX_OUTPUTS];
  int32_t k = dense_infer(op, attrs, inputs, n, out);
  if (k < 1)
    return NAN;
  dense_run(counts, op, attrs, true, 1, inputs, n, out, k, NULL);
  double sum = 0;
  for (int64_t i = 0; i < out[0].count; i++)
    sum += r->values[i] * out[0].values[i];
  dense_free_all(out, k);
  return sum;
}

/* Compares `analytic`, the gradient of sum(r * op(inputs)) with respect to inputs[which], with
 * central differences on up to MAX_SAMPLES elements. */
static void check_against_differences(tf_test_counts *c, const char *label, const char *grad_op, tf_op op,
                                      const tf_attrs *attrs, dense_tensor *inputs, int32_t n, int32_t which,
                                      const dense_tensor *r, const dense_tensor *analytic) {
  dense_tensor *x = &inputs[which];
  tf_test_counts runs = {0, 0};
  int64_t samples = x->count < MAX_SAMPLES ? x->count : MAX_SAMPLES;
  double worst = 0;
  for (int64_t s = 0; s < samples; s++) {
    int64_t e = x->count <= MAX_SAMPLES ? s : (int64_t)(dense_next(&rng) % (uint64_t)x->count);
    double saved = x->values[e], h = FD_STEP * fmax(1.0, fabs(saved));
    x->values[e] = saved + h;
    double plus = weighted_output(&runs, op, attrs, inputs, n, r);
    x->values[e] = saved - h;
    double minus = weighted_output(&runs, op, attrs, inputs, n, r);
    x->values[e] = saved;
    double numeric = (plus - minus) / (2 * h);
    worst = fmax(worst, isnan(numeric) ? INFINITY : fabs(numeric - analytic->values[e]));
  }
  double error = worst / fmax(dense_max_abs(analytic), 1e-12);
  c->failed += runs.failed;
  note_worst(grad_op, error);
  printf("%-4s %-44s %-22s %4lld samples  error %.2e\n", error < FD_TOLERANCE ? "ok" : "FAIL", label, grad_op,
         (long long)samples, error);
  CHECK(c, error < FD_TOLERANCE, "%s: %s error %.3e", label, grad_op, error);
}

/* Runs backward op `op` on 1, 2, 3 and again 3 threads; returns the 1-thread result in *grads
 * after checking that the others agree (bit for bit on a repeat). */
static int32_t run_backward(tf_test_counts *c, const char *label, tf_op op, const tf_attrs *attrs,
                            const dense_tensor *inputs, int32_t n, dense_tensor *grads) {
  int32_t k = dense_call(c, op, attrs, true, 1, inputs, n, grads);
  dense_tensor first[TF_MAX_OUTPUTS];
  for (int32_t threads = 2; threads <= 4 && k > 0; threads++) {
    dense_tensor again[TF_MAX_OUTPUTS];
    dense_call(c, op, attrs, true, threads == 4 ? 3 : threads, inputs, n, again);
    for (int32_t i = 0; i < k; i++) {
      double error = dense_relative_error(&again[i], &grads[i], 1e-300);
      CHECK(c, error < 1e-12, "%s: %s output %d on %d threads differs by %.3e from 1 thread", label, tf_op_name(op), i,
            threads, error);
      if (threads == 3)
        first[i] = dense_copy(&again[i]);
      if (threads == 4) {
        CHECK(c, dense_identical(&again[i], &first[i]), "%s: %s output %d differs between two 3-thread runs", label,
              tf_op_name(op), i);
        dense_free(&first[i]);
      }
    }
    dense_free_all(again, k);
  }
  return k;
}

/* The backend may run a kernel on fewer threads than its workspace was planned for (and a kernel
 * must never overrun the workspace it was given, even planned for fewer): same results, guards intact. */
static void check_planned_threads(tf_test_counts *c, const char *label, tf_op op, const tf_attrs *attrs,
                                  const dense_tensor *inputs, int32_t n, const dense_tensor *expected) {
  const int32_t runs[3][2] = {{2, 4}, {1, 3}, {3, 1}}; // {threads, planned threads}
  for (int r = 0; r < 3; r++) {
    dense_tensor out[TF_MAX_OUTPUTS];
    int32_t k = dense_infer(op, attrs, inputs, n, out);
    int64_t bytes = 0;
    dense_run_planned(c, op, attrs, true, runs[r][0], runs[r][1], inputs, n, out, k, &bytes);
    double error = 0;
    for (int32_t i = 0; i < k; i++)
      error = fmax(error, dense_relative_error(&out[i], &expected[i], 1e-300));
    CHECK(c, error < 1e-12, "%s: %s on %d threads with a workspace for %d: error %.3e", label, tf_op_name(op),
          runs[r][0], runs[r][1], error);
    dense_free_all(out, k);
  }
}

/* ---- convolutions ---- */

static void check_conv(tf_test_counts *c, const char *label, bool is_1d, const int64_t *x_shape, const int64_t *w_shape,
                       tf_attrs attrs, bool bias) {
  int32_t rank = is_1d ? 3 : 4;
  tf_op op = is_1d ? TF_OP_CONV1D : TF_OP_CONV2D;
  dense_tensor in[3] = {dense_random(&rng, rank, x_shape, -1, 1), dense_random(&rng, rank, w_shape, -1, 1)};
  if (bias)
    in[2] = dense_random(&rng, 1, w_shape, -1, 1);
  int32_t n = bias ? 3 : 2;
  dense_tensor y[1];
  if (dense_call(c, op, &attrs, true, 1, in, n, y) < 1) {
    dense_free_all(in, n);
    return;
  }
  dense_tensor r = dense_random(&rng, y[0].rank, y[0].shape, -1, 1);
  dense_tensor grad_in_args[3] = {r, in[1], in[0]}, grad_w_args[3] = {in[0], r, in[1]}, dx[1], dw[1];
  run_backward(c, label, is_1d ? TF_OP_CONV1D_GRAD_INPUT : TF_OP_CONV2D_GRAD_INPUT, &attrs, grad_in_args, 3, dx);
  run_backward(c, label, is_1d ? TF_OP_CONV1D_GRAD_WEIGHT : TF_OP_CONV2D_GRAD_WEIGHT, &attrs, grad_w_args, 3, dw);
  check_planned_threads(c, label, op, &attrs, in, n, y);
  check_planned_threads(c, label, is_1d ? TF_OP_CONV1D_GRAD_INPUT : TF_OP_CONV2D_GRAD_INPUT, &attrs, grad_in_args, 3,
                        dx);
  check_planned_threads(c, label, is_1d ? TF_OP_CONV1D_GRAD_WEIGHT : TF_OP_CONV2D_GRAD_WEIGHT, &attrs, grad_w_args, 3,
                        dw);
  char text[160];
  snprintf(text, sizeof(text), "%s x%s w%s", label, dense_shape_text(&in[0], 0), dense_shape_text(&in[1], 1));
  check_against_differences(c, text, is_1d ? "conv1d_grad_input" : "conv2d_grad_input", op, &attrs, in, n, 0, &r, dx);
  check_against_differences(c, text, is_1d ? "conv1d_grad_weight" : "conv2d_grad_weight", op, &attrs, in, n, 1, &r, dw);
  dense_free_all(in, n);
  dense_free_all(y, 1);
  dense_free(&r);
  dense_free_all(dx, 1);
  dense_free_all(dw, 1);
}

/* conv_transpose2d has no backward kernel: the compiler differentiates it with conv2d (dx) and
 * conv2d_grad_weight with image and response swapped (dw), output_padding dropped. */
static void check_conv_transpose(tf_test_counts *c, const char *label, const int64_t *x_shape, const int64_t *w_shape,
                                 tf_attrs attrs) {
  dense_tensor in[3] = {dense_random(&rng, 4, x_shape, -1, 1), dense_random(&rng, 4, w_shape, -1, 1)};
  dense_tensor y[1];
  if (dense_infer(TF_OP_CONV_TRANSPOSE2D, &attrs, in, 2, y) < 1) {
    CHECK(c, false, "%s: shape rule refused", label);
    dense_free_all(in, 2);
    return;
  }
  in[2] = dense_random(&rng, 1, y[0].shape + 1, -1, 1); // bias [O]
  dense_tensor r = dense_random(&rng, y[0].rank, y[0].shape, -1, 1);
  tf_attrs conv = attrs;
  conv.u.conv.output_padding[0] = conv.u.conv.output_padding[1] = 0;
  dense_tensor dx_args[2] = {r, in[1]}, dw_args[3] = {r, in[0], in[1]}, dx[1], dw[1];
  run_backward(c, label, TF_OP_CONV2D, &conv, dx_args, 2, dx);
  run_backward(c, label, TF_OP_CONV2D_GRAD_WEIGHT, &conv, dw_args, 3, dw);
  char text[160];
  snprintf(text, sizeof(text), "%s x%s w%s", label, dense_shape_text(&in[0], 0), dense_shape_text(&in[1], 1));
  check_against_differences(c, text, "conv_transpose2d dx", TF_OP_CONV_TRANSPOSE2D, &attrs, in, 3, 0, &r, dx);
  check_against_differences(c, text, "conv_transpose2d dw", TF_OP_CONV_TRANSPOSE2D, &attrs, in, 3, 1, &r, dw);
  dense_free_all(in, 3);
  dense_free_all(y, 1);
  dense_free(&r);
  dense_free_all(dx, 1);
  dense_free_all(dw, 1);
}

static void check_convolutions(tf_test_counts *c) {
  // conv2d: padding, strides, dilations, groups (depthwise too), 1x1 direct and strided, width 1,
  // strides that skip input rows, and an image big enough to be lowered in two blocks of positions
  // that split a row (16 x 3 x 3 x 63 x 61 and 32 x 3 x 3 x 48 x 39 > TF_CPU_CONV_COLUMN_LIMIT).
  check_conv(c, "conv2d pad (1,0) bias", false, (int64_t[]){2, 3, 7, 6}, (int64_t[]){4, 3, 3, 2},
             dense_conv_attrs(1, 1, 1, 0, 1, 1, 1, 0, 0), true);
  check_conv(c, "conv2d s(2,3) p(2,1) d(2,1) g2", false, (int64_t[]){1, 4, 9, 8}, (int64_t[]){6, 2, 3, 3},
             dense_conv_attrs(2, 3, 2, 1, 2, 1, 2, 0, 0), false);
  check_conv(c, "conv2d depthwise g6 bias", false, (int64_t[]){3, 6, 5, 5}, (int64_t[]){6, 1, 3, 3},
             dense_conv_attrs(1, 1, 1, 1, 1, 1, 6, 0, 0), true);
  check_conv(c, "conv2d 1x1 direct", false, (int64_t[]){2, 5, 4, 7}, (int64_t[]){3, 5, 1, 1},
             dense_conv_attrs(1, 1, 0, 0, 1, 1, 1, 0, 0), true);
  check_conv(c, "conv2d 1x1 stride 2", false, (int64_t[]){2, 3, 5, 6}, (int64_t[]){4, 3, 1, 1},
             dense_conv_attrs(2, 2, 0, 0, 1, 1, 1, 0, 0), false);
  check_conv(c, "conv2d width 1 s(3,1) d(2,1)", false, (int64_t[]){1, 3, 11, 1}, (int64_t[]){2, 3, 4, 1},
             dense_conv_attrs(3, 1, 0, 0, 2, 1, 1, 0, 0), false);
  check_conv(c, "conv2d stride > kernel", false, (int64_t[]){1, 2, 9, 9}, (int64_t[]){3, 2, 2, 2},
             dense_conv_attrs(4, 3, 1, 0, 1, 1, 1, 0, 0), true);
  check_conv(c, "conv2d kernel = image", false, (int64_t[]){2, 2, 5, 3}, (int64_t[]){3, 2, 5, 3},
             dense_conv_attrs(1, 1, 0, 0, 1, 1, 1, 0, 0), false);
  check_conv(c, "conv2d two position blocks", false, (int64_t[]){1, 16, 63, 61}, (int64_t[]){2, 16, 3, 3},
             dense_conv_attrs(1, 1, 1, 1, 1, 1, 1, 0, 0), true);
  check_conv(c, "conv2d 3 images, 2 blocks each", false, (int64_t[]){3, 64, 48, 37}, (int64_t[]){4, 32, 3, 3},
             dense_conv_attrs(1, 1, 1, 2, 1, 1, 2, 0, 0), false);
  // conv1d
  check_conv(c, "conv1d s2 p1 d2 g2 bias", true, (int64_t[]){2, 4, 13}, (int64_t[]){6, 2, 3},
             dense_conv_attrs(2, 0, 1, 0, 2, 0, 2, 0, 0), true);
  check_conv(c, "conv1d 1x1 direct", true, (int64_t[]){3, 3, 7}, (int64_t[]){5, 3, 1},
             dense_conv_attrs(1, 0, 0, 0, 1, 0, 1, 0, 0), false);
  check_conv(c, "conv1d depthwise s3 p2", true, (int64_t[]){1, 6, 10}, (int64_t[]){6, 1, 4},
             dense_conv_attrs(3, 0, 2, 0, 1, 0, 6, 0, 0), true);
  // conv_transpose2d through the compiler's formulas
  check_conv_transpose(c, "conv_transpose2d s(2,1) p(1,0) op(1,0)", (int64_t[]){2, 4, 3, 5}, (int64_t[]){4, 3, 3, 3},
                       dense_conv_attrs(2, 1, 1, 0, 1, 1, 1, 1, 0));
  check_conv_transpose(c, "conv_transpose2d s(3,2) d(1,2) op(2,1) g3", (int64_t[]){1, 6, 4, 4}, (int64_t[]){6, 2, 2, 3},
                       dense_conv_attrs(3, 2, 0, 1, 1, 2, 3, 2, 1));
  check_conv_transpose(c, "conv_transpose2d 1x1 direct", (int64_t[]){2, 2, 3, 3}, (int64_t[]){2, 5, 1, 1},
                       dense_conv_attrs(1, 1, 0, 0, 1, 1, 1, 0, 0));
}

/* ---- pooling ---- */

static void check_pool(tf_test_counts *c, const char *label, bool is_max, const int64_t *x_shape, tf_attrs attrs) {
  tf_op op = is_max ? TF_OP_MAX_POOL2D : TF_OP_AVG_POOL2D;
  dense_tensor x[1] = {dense_random(&rng, 4, x_shape, -1, 1)}, y[1];
  if (dense_infer(op, &attrs, x, 1, y) < 1) {
    CHECK(c, false, "%s: shape rule refused", label);
    dense_free_all(x, 1);
    return;
  }
  dense_tensor r = dense_random(&rng, y[0].rank, y[0].shape, -1, 1), dx[1];
  dense_tensor max_args[2] = {x[0], r}, avg_args[2] = {r, x[0]};
  run_backward(c, label, is_max ? TF_OP_MAX_POOL2D_GRAD : TF_OP_AVG_POOL2D_GRAD, &attrs, is_max ? max_args : avg_args,
               2, dx);
  char text[160];
  snprintf(text, sizeof(text), "%s x%s", label, dense_shape_text(&x[0], 0));
  check_against_differences(c, text, is_max ? "max_pool2d_grad" : "avg_pool2d_grad", op, &attrs, x, 1, 0, &r, dx);
  dense_free_all(x, 1);
  dense_free_all(y, 1);
  dense_free(&r);
  dense_free_all(dx, 1);
}

static void check_pools(tf_test_counts *c) {
  for (int is_max = 1; is_max >= 0; is_max--) {
    check_pool(c, is_max ? "max k(3,2) s2 p1" : "avg k(3,2) s2 p1", is_max, (int64_t[]){2, 3, 7, 9},
               dense_pool_attrs(3, 2, 2, 2, 1, 1));
    check_pool(c, is_max ? "max k2 s(1,2) p(0,1)" : "avg k2 s(1,2) p(0,1)", is_max, (int64_t[]){1, 2, 8, 5},
               dense_pool_attrs(2, 2, 1, 2, 0, 1));
    check_pool(c, is_max ? "max k5 s1 p2 (overlapping)" : "avg k5 s1 p2 (overlapping)", is_max, (int64_t[]){1, 1, 5, 5},
               dense_pool_attrs(5, 5, 1, 1, 2, 2));
    check_pool(c, is_max ? "max k(1,3) s(3,1)" : "avg k(1,3) s(3,1)", is_max, (int64_t[]){3, 2, 7, 4},
               dense_pool_attrs(1, 3, 3, 1, 0, 1));
  }
}

/* ---- attention ---- */

static void check_attention(tf_test_counts *c, int64_t batch, int64_t tq, int64_t tk, int32_t heads, int64_t depth,
                            bool causal, float scale) {
  int64_t width = heads * depth;
  dense_tensor in[3] = {dense_random(&rng, 3, (int64_t[]){batch, tq, width}, -2, 2),
                        dense_random(&rng, 3, (int64_t[]){batch, tk, width}, -2, 2),
                        dense_random(&rng, 3, (int64_t[]){batch, tk, width}, -1, 1)};
  tf_attrs attrs = dense_attention_attrs(heads, causal, scale);
  dense_tensor r = dense_random(&rng, 3, (int64_t[]){batch, tq, width}, -1, 1);
  dense_tensor grad_args[4] = {in[0], in[1], in[2], r}, grads[3];
  char label[160];
  snprintf(label, sizeof(label), "attention N%lld Tq%lld Tk%lld H%d D%lld%s%s", (long long)batch, (long long)tq,
           (long long)tk, heads, (long long)depth, causal ? " causal" : "", scale != 0 ? " scale" : "");
  if (run_backward(c, label, TF_OP_ATTENTION_GRAD, &attrs, grad_args, 4, grads) == 3) {
    check_planned_threads(c, label, TF_OP_ATTENTION_GRAD, &attrs, grad_args, 4, grads);
    dense_tensor y[1];
    if (dense_call(c, TF_OP_ATTENTION, &attrs, true, 1, in, 3, y) == 1) {
      check_planned_threads(c, label, TF_OP_ATTENTION, &attrs, in, 3, y);
      dense_free_all(y, 1);
    }
    const char *names[3] = {"attention_grad dq", "attention_grad dk", "attention_grad dv"};
    for (int32_t i = 0; i < 3; i++)
      check_against_differences(c, label, names[i], TF_OP_ATTENTION, &attrs, in, 3, i, &r, &grads[i]);
    dense_free_all(grads, 3);
  }
  dense_free_all(in, 3);
  dense_free(&r);
}

static void check_attentions(tf_test_counts *c) {
  check_attention(c, 2, 5, 7, 2, 3, false, 0);
  check_attention(c, 1, 7, 5, 3, 2, true, 0); // Tq > Tk, causal: the last rows see every key
  check_attention(c, 2, 4, 9, 1, 5, true, 0.7f);
  check_attention(c, 1, 37, 41, 2, 4, true, 0); // two query blocks
  check_attention(c, 1, 37, 41, 2, 4, false, 0);
  check_attention(c, 3, 1, 1, 1, 1, true, 0);
}

/* ---- embedding ---- */

static void check_embedding(tf_test_counts *c, tf_dtype id_type, int32_t rank, const int64_t *ids_shape, int64_t rows,
                            int64_t depth) {
  // ids include out-of-range values (-2, -1, V, V + 1): zero rows, no gradient. Few rows, so repeats.
  dense_tensor in[2] = {dense_random_ids(&rng, id_type, rank, ids_shape, -2, rows + 2),
                        dense_random(&rng, 2, (int64_t[]){rows, depth}, -1, 1)};
  tf_attrs none = dense_no_attrs();
  dense_tensor y[1];
  if (dense_infer(TF_OP_EMBEDDING, &none, in, 2, y) < 1) {
    CHECK(c, false, "embedding: shape rule refused");
    dense_free_all(in, 2);
    return;
  }
  dense_tensor r = dense_random(&rng, y[0].rank, y[0].shape, -1, 1), grad_args[3] = {in[0], r, in[1]}, dtable[1];
  run_backward(c, "embedding", TF_OP_EMBEDDING_GRAD, &none, grad_args, 3, dtable);
  char label[160];
  snprintf(label, sizeof(label), "embedding %s ids%s V%lld D%lld", id_type == TF_I32 ? "i32" : "i64",
           dense_shape_text(&in[0], 0), (long long)rows, (long long)depth);
  check_against_differences(c, label, "embedding_grad", TF_OP_EMBEDDING, &none, in, 2, 1, &r, dtable);
  dense_free_all(in, 2);
  dense_free_all(y, 1);
  dense_free(&r);
  dense_free_all(dtable, 1);
}

/* ---- matmul, differentiated as the compiler does (compiler/autodiff_rules.c) ---- */

/* Sums g over the axes that broadcasting added or stretched, to `like`'s shape (the compiler's sum_to). */
static dense_tensor sum_to(const dense_tensor *g, const dense_tensor *like) {
  dense_tensor out = dense_zeros(like->dtype, like->rank, like->shape);
  int64_t index[TF_MAX_RANK] = {0};
  for (int64_t e = 0; e < g->count; e++) {
    int64_t rest = e, target = 0, stride = 1;
    for (int32_t d = g->rank - 1; d >= 0; d--) {
      index[d] = rest % g->shape[d];
      rest /= g->shape[d];
    }
    for (int32_t d = like->rank - 1; d >= 0; d--) {
      int32_t gd = d + g->rank - like->rank;
      target += (like->shape[d] == 1 ? 0 : index[gd]) * stride;
      stride *= like->shape[d];
    }
    out.values[target] += g->values[e];
  }
  return out;
}

static dense_tensor matmul_of(tf_test_counts *c, const dense_tensor *a, const dense_tensor *b, bool ta, bool tb) {
  tf_attrs attrs = dense_matmul_attrs(ta, tb);
  dense_tensor in[2] = {*a, *b}, out[1];
  run_backward(c, "matmul as a gradient", TF_OP_MATMUL, &attrs, in, 2, out);
  return out[0];
}

static void check_matmul(tf_test_counts *c, int32_t rank_a, const int64_t *a_shape, int32_t rank_b,
                         const int64_t *b_shape, bool ta, bool tb) {
  dense_tensor in[2] = {dense_random(&rng, rank_a, a_shape, -1, 1), dense_random(&rng, rank_b, b_shape, -1, 1)};
  tf_attrs attrs = dense_matmul_attrs(ta, tb);
  dense_tensor y[1];
  if (dense_infer(TF_OP_MATMUL, &attrs, in, 2, y) < 1) {
    CHECK(c, false, "matmul: shape rule refused");
    dense_free_all(in, 2);
    return;
  }
  dense_tensor dy = dense_random(&rng, y[0].rank, y[0].shape, -1, 1), *a = &in[0], *b = &in[1];
  dense_tensor da_full = !ta  ? matmul_of(c, &dy, b, false, !tb)
                         : tb ? matmul_of(c, b, &dy, true, true)
                              : matmul_of(c, b, &dy, false, true);
  dense_tensor db_full;
  if (b->rank == 2 && a->rank > 2 && !ta) {
    dense_tensor a2 = dense_flat_rows(a), dy2 = dense_flat_rows(&dy);
    db_full = tb ? matmul_of(c, &dy2, &a2, true, false) : matmul_of(c, &a2, &dy2, true, false);
  } else if (!ta) {
    db_full = tb ? matmul_of(c, &dy, a, true, false) : matmul_of(c, a, &dy, true, false);
  } else {
    db_full = tb ? matmul_of(c, &dy, a, true, true) : matmul_of(c, a, &dy, false, false);
  }
  dense_tensor da = sum_to(&da_full, a), db = sum_to(&db_full, b);
  char label[160];
  snprintf(label, sizeof(label), "matmul a%s%s b%s%s", dense_shape_text(a, 0), ta ? "T" : "", dense_shape_text(b, 1),
           tb ? "T" : "");
  check_against_differences(c, label, "matmul d/da", TF_OP_MATMUL, &attrs, in, 2, 0, &dy, &da);
  check_against_differences(c, label, "matmul d/db", TF_OP_MATMUL, &attrs, in, 2, 1, &dy, &db);
  dense_tensor *all[] = {&in[0], &in[1], &y[0], &dy, &da_full, &db_full, &da, &db};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    dense_free(all[i]);
}

static void check_matmuls(tf_test_counts *c) {
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    int64_t m = 5, k = 7, n = 3;
    check_matmul(c, 2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k}, 2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n}, ta,
                 tb);
    // batch broadcasting both ways: a [3,1,.,.] with b [2,.,.]
    check_matmul(c, 4, ta ? (int64_t[]){3, 1, k, m} : (int64_t[]){3, 1, m, k}, 3,
                 tb ? (int64_t[]){2, n, k} : (int64_t[]){2, k, n}, ta, tb);
    // a linear layer: batched a, rank-2 b (one gemm over the flattened rows when a is not transposed)
    check_matmul(c, 3, ta ? (int64_t[]){2, k, m} : (int64_t[]){2, m, k}, 2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n},
                 ta, tb);
    // rank-2 a shared by a batched b
    check_matmul(c, 2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k}, 4,
                 tb ? (int64_t[]){2, 1, n, k} : (int64_t[]){2, 1, k, n}, ta, tb);
  }
  check_matmul(c, 3, (int64_t[]){1, 1, 11}, 3, (int64_t[]){13, 11, 1}, false, false); // m = n = 1, batch from b
  check_matmul(c, 4, (int64_t[]){2, 3, 17, 19}, 2, (int64_t[]){19, 23}, false, false);
}

/* Empty operands (a zero batch, K = 0, Tk = 0, no ids): kernels must write every output element
 * (zeros where nothing is summed) and touch nothing else. */
static void check_empty(tf_test_counts *c) {
  struct {
    const char *label;
    tf_op op;
    tf_attrs attrs;
    int32_t n;
    int32_t ranks[4];
    int64_t shapes[4][4];
  } cases[] = {
      {"matmul K = 0", TF_OP_MATMUL, dense_matmul_attrs(false, false), 2, {2, 2}, {{3, 0}, {0, 4}}},
      {"matmul batch 0", TF_OP_MATMUL, dense_matmul_attrs(false, true), 2, {3, 2}, {{0, 3, 2}, {4, 2}}},
      {"conv2d batch 0",
       TF_OP_CONV2D,
       dense_conv_attrs(1, 1, 1, 1, 1, 1, 1, 0, 0),
       2,
       {4, 4},
       {{0, 2, 5, 5}, {3, 2, 3, 3}}},
      {"conv2d_grad_weight batch 0",
       TF_OP_CONV2D_GRAD_WEIGHT,
       dense_conv_attrs(1, 1, 1, 1, 1, 1, 1, 0, 0),
       3,
       {4, 4, 4},
       {{0, 2, 5, 5}, {0, 3, 5, 5}, {3, 2, 3, 3}}},
      {"attention Tk = 0",
       TF_OP_ATTENTION,
       dense_attention_attrs(2, false, 0),
       3,
       {3, 3, 3},
       {{2, 3, 4}, {2, 0, 4}, {2, 0, 4}}},
      {"attention_grad Tk = 0",
       TF_OP_ATTENTION_GRAD,
       dense_attention_attrs(2, true, 0),
       4,
       {3, 3, 3, 3},
       {{2, 3, 4}, {2, 0, 4}, {2, 0, 4}, {2, 3, 4}}},
      {"attention_grad Tq = 0",
       TF_OP_ATTENTION_GRAD,
       dense_attention_attrs(1, false, 0),
       4,
       {3, 3, 3, 3},
       {{1, 0, 4}, {1, 5, 4}, {1, 5, 4}, {1, 0, 4}}},
      {"max_pool2d batch 0", TF_OP_MAX_POOL2D, dense_pool_attrs(2, 2, 2, 2, 0, 0), 1, {4}, {{0, 3, 4, 4}}},
      {"embedding_grad no ids", TF_OP_EMBEDDING_GRAD, dense_no_attrs(), 3, {1, 2, 2}, {{0}, {0, 3}, {5, 3}}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    dense_tensor in[4], out[TF_MAX_OUTPUTS];
    for (int32_t j = 0; j < cases[i].n; j++)
      in[j] = dense_random(&rng, cases[i].ranks[j], cases[i].shapes[j], -1, 1);
    if (cases[i].op == TF_OP_EMBEDDING_GRAD)
      in[0].dtype = TF_I64;
    for (int f64 = 0; f64 < 2; f64++) {
      int32_t k = dense_call(c, cases[i].op, &cases[i].attrs, f64, 2, in, cases[i].n, out);
      double largest = 0;
      for (int32_t j = 0; j < k; j++)
        largest = fmax(largest, dense_max_abs(&out[j]));
      bool zero = k > 0 && largest == 0;
      printf("%-4s %-44s %s outputs all zero\n", zero ? "ok" : "FAIL", cases[i].label, f64 ? "f64" : "f32");
      CHECK(c, zero, "%s (%s): outputs not all zero (largest %g)", cases[i].label, f64 ? "f64" : "f32", largest);
      if (k > 0)
        dense_free_all(out, k);
    }
    dense_free_all(in, cases[i].n);
  }
}

int main(void) {
  dense_setup();
  tf_test_counts counts = {0, 0};
  check_matmuls(&counts);
  check_convolutions(&counts);
  check_pools(&counts);
  check_attentions(&counts);
  check_embedding(&counts, TF_I32, 2, (int64_t[]){3, 5}, 7, 5);
  check_embedding(&counts, TF_I64, 1, (int64_t[]){11}, 4, 33);
  check_embedding(&counts, TF_I64, 3, (int64_t[]){2, 2, 3}, 3, 17);
  check_empty(&counts);
  printf("\nworst finite-difference error per gradient (tolerance %.0e, h = %.0e):\n", FD_TOLERANCE, FD_STEP);
  for (int i = 0; i < 32 && worst_by_op[i].op; i++)
    printf("  %-24s %.2e\n", worst_by_op[i].op, worst_by_op[i].worst);
  return tf_test_finish("test_dense_gradcheck", &counts);
}
