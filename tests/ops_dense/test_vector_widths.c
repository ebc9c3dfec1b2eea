/* The cross-entropy rows (kernels/cpu/xent_row.h) give the same bits at every vector width: the
 * loader picks the SSE2, AVX2 or AVX-512F clone of their loops by the CPU (TF_CPU_VECTOR_CLONES),
 * and a plan's losses and weights must not depend on which. Each width is built on its own
 * (vector_widths_variant.c, three times) and run on rows of 1 to 50,257 classes, lane counts and
 * tails of every kind, labels that do not count, exponentials that underflow, -inf logits:
 *   - every width's losses and gradients equal the baseline's byte for byte;
 *   - the single pass (tf_cpu_xent_row_train) equals the two passes byte for byte at each width;
 *   - the baseline's loss is within 1e-6 (of 1 + the loss) of a float64 reference, and its gradient's
 *     entries within 1e-6 of it (so equal garbage cannot pass).
 * The parameter updates' spans (kernels/cpu/update_span.h: accumulate, SGD with momentum, AdamW) over
 * lengths with every kind of tail, three steps: every width's tensors equal the test's own scalar
 * loops byte for byte.
 * A width the CPU lacks prints SKIP. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "vector_widths.h"

static tf_test_counts counts;

typedef void (*xent_rows_fn)(const tf_test_xent_case *, tf_test_xent_out *);

static float uniform(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((*state >> 8) / 16777216.0);
}

/* Rows of `classes` logits: spread `spread` around 0, every 7th row with a few -inf, every 5th
 * row's label -1. */
static tf_test_xent_case make_case(int64_t rows, int64_t classes, float spread, uint32_t seed, float **logits,
                                   int64_t **labels) {
  *logits = malloc(sizeof(float) * (size_t)(rows * classes));
  *labels = malloc(sizeof(int64_t) * (size_t)rows);
  uint32_t state = seed;
  for (int64_t i = 0; i < rows * classes; i++)
    (*logits)[i] = (uniform(&state) * 2 - 1) * spread;
  for (int64_t r = 0; r < rows; r++) {
    (*labels)[r] = r % 5 == 4 ? -1 : (int64_t)(uniform(&state) * (float)classes) % classes;
    for (int64_t k = 0; r % 7 == 3 && classes > 2 && k < 3; k++) {
      const int64_t c = (int64_t)(uniform(&state) * (float)classes) % classes;
      if (c != (*labels)[r])
        (*logits)[r * classes + c] = -INFINITY;
    }
  }
  return (tf_test_xent_case){*logits, *labels, rows, classes, 0.25f};
}

static tf_test_xent_out make_out(int64_t rows, int64_t classes) {
  return (tf_test_xent_out){calloc((size_t)rows, sizeof(double)), calloc((size_t)rows, sizeof(double)),
                            calloc((size_t)(rows * classes), sizeof(float)),
                            calloc((size_t)(rows * classes), sizeof(float))};
}

static void free_out(tf_test_xent_out *o) {
  free(o->loss);
  free(o->train_loss);
  free(o->gradient);
  free(o->train_gradient);
}

static bool same_bytes(const tf_test_xent_out *a, const tf_test_xent_out *b, int64_t rows, int64_t classes) {
  const size_t n = (size_t)(rows * classes);
  return !memcmp(a->loss, b->loss, sizeof(double) * (size_t)rows) &&
         !memcmp(a->train_loss, b->train_loss, sizeof(double) * (size_t)rows) &&
         !memcmp(a->gradient, b->gradient, sizeof(float) * n) &&
         !memcmp(a->train_gradient, b->train_gradient, sizeof(float) * n);
}

/* The baseline against float64: the largest relative loss error and absolute gradient error. */
static void against_reference(const tf_test_xent_case *c, const tf_test_xent_out *o, double *loss_error,
                              double *gradient_error) {
  *loss_error = *gradient_error = 0;
  for (int64_t r = 0; r < c->rows; r++) {
    const float *x = c->logits + r * c->classes;
    const int64_t label = c->labels[r];
    double best = -INFINITY, sum = 0;
    for (int64_t k = 0; k < c->classes; k++)
      best = x[k] > best ? x[k] : best;
    for (int64_t k = 0; k < c->classes; k++)
      sum += exp((double)x[k] - best);
    for (int64_t k = 0; k < c->classes; k++) {
      const double want = label < 0 ? 0 : (exp((double)x[k] - best) / sum - (k == label)) * c->scale;
      const double error = fabs((double)o->gradient[r * c->classes + k] - want);
      *gradient_error = error > *gradient_error ? error : *gradient_error;
    }
    if (label < 0)
      continue;
    const double want = log(sum) + best - x[label], error = fabs(o->loss[r] - want) / (fabs(want) + 1);
    *loss_error = error > *loss_error ? error : *loss_error;
  }
}

static void check_case(int64_t rows, int64_t classes, float spread, uint32_t seed) {
  float *logits;
  int64_t *labels;
  const tf_test_xent_case c = make_case(rows, classes, spread, seed, &logits, &labels);
  const struct {
    const char *name, *feature;
    xent_rows_fn run;
  } widths[] = {{"sse2", NULL, tf_test_xent_rows_sse2},
                {"avx2", "avx2", tf_test_xent_rows_avx2},
                {"avx512f", "avx512f", tf_test_xent_rows_avx512}};
  tf_test_xent_out base = make_out(rows, classes);
  widths[0].run(&c, &base);
  double loss_error, gradient_error;
  against_reference(&c, &base, &loss_error, &gradient_error);
  CHECK(&counts, loss_error < 1e-6 && gradient_error < 1e-6,
        "%lld x %lld (spread %g): loss off by %.3g (relative to 1 + it), gradient by %.3g", (long long)rows,
        (long long)classes, (double)spread, loss_error, gradient_error);
  for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
    const bool runs = !widths[w].feature || (!strcmp(widths[w].feature, "avx2") ? __builtin_cpu_supports("avx2")
                                                                                : __builtin_cpu_supports("avx512f"));
    if (!runs) {
      if (rows * classes > 50000) /* once per width, on the large case */
        printf("SKIP %s: this CPU does not run it\n", widths[w].name);
      continue;
    }
    tf_test_xent_out out = make_out(rows, classes);
    widths[w].run(&c, &out);
    CHECK(&counts, same_bytes(&out, &base, rows, classes), "%s: %lld x %lld rows differ from sse2's", widths[w].name,
          (long long)rows, (long long)classes);
    CHECK(&counts,
          !memcmp(out.loss, out.train_loss, sizeof(double) * (size_t)rows) &&
              !memcmp(out.gradient, out.train_gradient, sizeof(float) * (size_t)(rows * classes)),
          "%s: %lld x %lld: the single pass differs from the two passes", widths[w].name, (long long)rows,
          (long long)classes);
    free_out(&out);
  }
  free_out(&base);
  free(logits);
  free(labels);
}

/* The updates as plain scalar loops, written here from the formulas in kernels/cpu/optimizer.c. */
static void scalar_updates(const tf_test_update_case *c) {
  for (int t = 1; t <= c->steps; t++) {
    float s[4], a[9];
    tf_test_update_coefficients(t, s, a);
    for (int64_t i = 0; i < c->n; i++) {
      c->acc[i] += c->grad[i];
      const float g = c->acc[i] * s[0] + s[2] * c->sgd_param[i];
      c->buffer[i] = s[3] * c->buffer[i] + g;
      c->sgd_param[i] -= s[1] * c->buffer[i];
      const float h = c->acc[i] * a[0];
      c->adam_param[i] *= a[1];
      c->m[i] = c->m[i] * a[2] + a[3] * h;
      c->v[i] = c->v[i] * a[4] + a[5] * h * h;
      c->adam_param[i] -= a[6] * (c->m[i] / (sqrtf(c->v[i]) / a[7] + a[8]));
    }
  }
}

enum { UPDATE_ARRAYS = 6 }; /* acc, sgd_param, buffer, adam_param, m, v */

static tf_test_update_case make_update_case(const float *grad, float *storage, int64_t n) {
  uint32_t state = 7;
  for (int64_t i = 0; i < UPDATE_ARRAYS * n; i++)
    storage[i] = i / n == 5 ? uniform(&state) : (uniform(&state) * 2 - 1); /* v >= 0 */
  return (tf_test_update_case){
      grad, storage, storage + n, storage + 2 * n, storage + 3 * n, storage + 4 * n, storage + 5 * n, n, 3};
}

static void check_updates(int64_t n) {
  float *grad = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)(UPDATE_ARRAYS * n));
  float *got = malloc(sizeof(float) * (size_t)(UPDATE_ARRAYS * n));
  uint32_t state = (uint32_t)n;
  for (int64_t i = 0; i < n; i++)
    grad[i] = i % 11 == 0 ? 0.0f : (uniform(&state) * 2 - 1) * (i % 3 ? 1.0f : 1e-6f);
  const tf_test_update_case reference = make_update_case(grad, want, n);
  scalar_updates(&reference);
  const struct {
    const char *name, *feature;
    void (*run)(const tf_test_update_case *);
  } widths[] = {{"sse2", NULL, tf_test_updates_sse2},
                {"avx2", "avx2", tf_test_updates_avx2},
                {"avx512f", "avx512f", tf_test_updates_avx512}};
  for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
    if (widths[w].feature &&
        !(!strcmp(widths[w].feature, "avx2") ? __builtin_cpu_supports("avx2") : __builtin_cpu_supports("avx512f")))
      continue;
    const tf_test_update_case c = make_update_case(grad, got, n);
    widths[w].run(&c);
    CHECK(&counts, !memcmp(got, want, sizeof(float) * (size_t)(UPDATE_ARRAYS * n)),
          "%s: the updates of %lld elements differ from the scalar loops'", widths[w].name, (long long)n);
  }
  free(grad);
  free(want);
  free(got);
}

int main(void) {
  const int64_t lengths[] = {1, 3, 4, 7, 8, 15, 16, 17, 63, 64, 65, 16384 + 37};
  for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
    check_updates(lengths[i]);
  const int64_t classes[] = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 100, 1000, 4099};
  uint32_t seed = 1;
  for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
    check_case(10, classes[i], 4.0f, seed++);
    check_case(10, classes[i], 60.0f, seed++); /* most exponentials underflow */
  }
  check_case(3, 50257, 8.0f, seed++); /* gpt2's vocabulary */
  return tf_test_finish("vector_widths", &counts);
}
