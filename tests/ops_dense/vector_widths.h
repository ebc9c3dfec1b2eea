/* The interface between test_vector_widths.c and its three builds of vector_widths_variant.c. */
#ifndef TIGHTFIT_TESTS_OPS_DENSE_VECTOR_WIDTHS_H
#define TIGHTFIT_TESTS_OPS_DENSE_VECTOR_WIDTHS_H

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

#endif
