/* dropout: the mask is reproducible for the same (session seed, micro-step, node seed) on any
 * thread count and in both builds; it changes with each of the three; the backward pass (dropout of
 * dy with the same attributes) drops exactly the forward's elements; kept elements are x / (1 - rate)
 * and the kept fraction on 10^6 elements lies within 3 sigma of 1 - rate; rate 0 copies. */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "harness.h"

#define N 1000000

static th_tensor dropout(const th_tensor *x, float rate, uint64_t node_seed, bool f64) {
  tf_attrs attrs = th_dropout(rate, node_seed);
  th_tensor inputs[1] = {*x}, outputs[1];
  th_run(TF_OP_DROPOUT, &attrs, inputs, 1, outputs, f64);
  return outputs[0];
}

/* Elements where exactly one of a and b is zero: the masks disagree there (x has no zeros). */
static int64_t mask_differences(const th_tensor *a, const th_tensor *b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a->count; i++)
    n += (a->values[i] == 0) != (b->values[i] == 0);
  return n;
}

int main(void) {
  tf_test_counts counts = {0, 0};
  th_seed(3);
  th_tensor x = th_random(0.5, 2, TH_SHAPE(N)), dy = th_random(-2, -0.5, TH_SHAPE(N));
  th_round_to_float(&x);
  th_round_to_float(&dy);
  th_context = (tf_cpu_context){.threads = 1, .optimizer_step = 1, .micro_step = 17, .seed = 2024};

  static const float rates[] = {0.1f, 0.5f, 0.9f};
  for (int k = 0; k < 3; k++) {
    const float rate = rates[k];
    th_tensor y = dropout(&x, rate, 11, true);
    // Kept fraction and values.
    int64_t kept = 0;
    bool scaled = true;
    const double scale = 1.0 / (1.0 - (double)rate);
    for (int64_t i = 0; i < N; i++) {
      if (y.values[i] != 0) {
        kept++;
        scaled = scaled && y.values[i] == x.values[i] * scale;
      }
    }
    const double expected = N * (1.0 - rate), sigma = sqrt(N * rate * (1.0 - rate));
    printf("rate %.1f: kept %lld of %d, expected %.0f +- %.0f (3 sigma), %.2f sigma away\n", (double)rate,
           (long long)kept, N, expected, 3 * sigma, fabs((double)kept - expected) / sigma);
    CHECK(&counts, fabs((double)kept - expected) <= 3 * sigma, "rate %g: kept %lld", (double)rate, (long long)kept);
    CHECK(&counts, scaled, "rate %g: kept elements are not x / (1 - rate)", (double)rate);

    // Reproducible: again, on 4 threads, and in the f32 build (same mask).
    th_context.threads = 4;
    th_tensor again = dropout(&x, rate, 11, true), f32 = dropout(&x, rate, 11, false);
    th_context.threads = 1;
    CHECK(&counts, th_bitwise_equal(&y, &again), "rate %g: a second run (4 threads) differs", (double)rate);
    CHECK(&counts, mask_differences(&y, &f32) == 0, "rate %g: the f32 build's mask differs", (double)rate);

    // The backward pass reuses the mask exactly.
    th_tensor dx = dropout(&dy, rate, 11, true);
    CHECK(&counts, mask_differences(&y, &dx) == 0, "rate %g: backward mask differs from forward", (double)rate);

    // Another micro-step, node seed or session seed gives another mask: about 2 p (1 - p) N
    // disagreements for independent masks.
    const double independent = 2.0 * rate * (1.0 - rate) * N;
    th_context.micro_step = 18;
    th_tensor next_step = dropout(&x, rate, 11, true);
    th_context.micro_step = 17;
    th_tensor other_node = dropout(&x, rate, 12, true);
    th_context.seed = 2025;
    th_tensor other_seed = dropout(&x, rate, 11, true);
    th_context.seed = 2024;
    const th_tensor *others[3] = {&next_step, &other_node, &other_seed};
    static const char *what[3] = {"micro-step", "node seed", "session seed"};
    for (int o = 0; o < 3; o++) {
      const int64_t differ = mask_differences(&y, others[o]);
      CHECK(&counts, fabs((double)differ - independent) < 0.02 * independent,
            "rate %g: another %s changes %lld mask bits, expected about %.0f", (double)rate, what[o], (long long)differ,
            independent);
    }
    printf("  reproducible (1 and 4 threads, f32 and f64), backward mask equal, new masks for another micro-step, "
           "node seed and session seed\n");
    th_release();
    x = th_random(0.5, 2, TH_SHAPE(N));
    dy = th_random(-2, -0.5, TH_SHAPE(N));
    th_round_to_float(&x);
    th_round_to_float(&dy);
  }
  th_tensor copy = dropout(&x, 0.0f, 11, true);
  CHECK(&counts, th_bitwise_equal(&copy, &x), "rate 0 is not a copy");
  th_release();
  return tf_test_finish("ops_elementwise dropout", &counts);
}
