/* The cross-entropy rows of kernels/cpu/xent_row.h and the update spans of kernels/cpu/update_span.h
 * built at one vector width, for
 * test_vector_widths.c: CMakeLists.txt compiles this file three times, with the kernels' flags and
 * the loader's clones off (TF_CPU_NO_CLONES), for the baseline, -mavx2 and -mavx512f, each under its
 * own name (VARIANT). */
#include <string.h>

#include "kernels/cpu/update_span.h"
#include "kernels/cpu/xent_row.h"
#include "vector_widths.h"

#define WIDTHS_NAME2(a, b) a##_##b
#define WIDTHS_NAME(a, b) WIDTHS_NAME2(a, b)

void WIDTHS_NAME(tf_test_xent_rows, VARIANT)(const tf_test_xent_case *c, tf_test_xent_out *out) {
  for (int64_t r = 0; r < c->rows; r++) {
    const float *x = c->logits + r * c->classes;
    float *two_pass = out->gradient + r * c->classes, *single = out->train_gradient + r * c->classes;
    const int64_t label = c->labels[r];
    out->loss[r] = label >= 0 ? tf_cpu_xent_row_loss(x, c->classes, label) : 0;
    tf_cpu_xent_row_gradient(x, two_pass, c->classes, label, c->scale);
    memcpy(single, x, sizeof(float) * (size_t)c->classes);
    out->train_loss[r] = label >= 0 ? tf_cpu_xent_row_train(single, c->classes, label, c->scale) : 0;
    if (label < 0)
      tf_cpu_xent_row_gradient(single, single, c->classes, label, c->scale);
  }
}

void WIDTHS_NAME(tf_test_updates, VARIANT)(const tf_test_update_case *c) {
  for (int t = 1; t <= c->steps; t++) {
    float s[4], a[9];
    tf_test_update_coefficients(t, s, a);
    const tf_cpu_sgd_coefficients sgd = {s[0], s[1], s[2], s[3], true, true};
    const tf_cpu_adamw_coefficients adam = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]};
    tf_cpu_accumulate_span(c->acc, c->grad, c->n);
    tf_cpu_sgd_span(c->sgd_param, c->acc, c->buffer, c->n, &sgd);
    tf_cpu_adamw_span(c->adam_param, c->acc, c->m, c->v, c->n, &adam);
  }
}
