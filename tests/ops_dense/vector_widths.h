/* The interface between test_vector_widths.c and its three builds of vector_widths_variant.c. */
#ifndef TIGHTFIT_TESTS_OPS_DENSE_VECTOR_WIDTHS_H
#define TIGHTFIT_TESTS_OPS_DENSE_VECTOR_WIDTHS_H

#include <math.h>
#include <stdint.h>

typedef struct tf_test_xent_case {
  const float *logits;   /* [rows, classes] */
  const int64_t *labels; /* [rows]; -1: the row does not count */
  int64_t rows, classes;
  float scale;
} tf_test_xent_case;

typedef struct tf_test_xent_out {
  double *loss, *train_loss;        /* [rows]: tf_cpu_xent_row_loss, tf_cpu_xent_row_train */
  float *gradient, *train_gradient; /* [rows, classes]: tf_cpu_xent_row_gradient, _train in place */
} tf_test_xent_out;

/* Each row's loss and gradient, two-pass and single-pass, built for one vector width. */
void tf_test_xent_rows_sse2(const tf_test_xent_case *c, tf_test_xent_out *out);
void tf_test_xent_rows_avx2(const tf_test_xent_case *c, tf_test_xent_out *out);
void tf_test_xent_rows_avx512(const tf_test_xent_case *c, tf_test_xent_out *out);

/* The parameter updates' spans (kernels/cpu/update_span.h) over n elements for `steps` steps: each
 * step accumulates grad into acc, then updates sgd_param (momentum in buffer) and adam_param (m, v)
 * from acc, with coefficients that change from step to step. */
typedef struct tf_test_update_case {
  const float *grad;
  float *acc, *sgd_param, *buffer, *adam_param, *m, *v;
  int64_t n;
  int steps;
} tf_test_update_case;

void tf_test_updates_sse2(const tf_test_update_case *c);
void tf_test_updates_avx2(const tf_test_update_case *c);
void tf_test_updates_avx512(const tf_test_update_case *c);

/* The coefficients of step t (>= 1), shared by the widths and the test's own scalar loop. */
static inline void tf_test_update_coefficients(int t, float *sgd, float *adam) {
  const float s[] = {0.5f, 0.01f, 0.001f, 0.9f}; /* factor, lr, decay, momentum */
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999;
  const float a[] = {(float)(1.0 / t),
                     (float)(1.0 - lr * 0.01),
                     (float)b1,
                     (float)(1.0 - b1),
                     (float)b2,
                     (float)(1.0 - b2),
                     (float)(lr / (1.0 - pow(b1, t))),
                     (float)sqrt(1.0 - pow(b2, t)),
                     1e-8f};
  for (int i = 0; i < 4; i++)
    sgd[i] = s[i];
  for (int i = 0; i < 9; i++)
    adam[i] = a[i];
}

#endif
