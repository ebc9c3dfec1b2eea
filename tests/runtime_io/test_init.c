/* runtime/init: fan conventions, the statistics of each distribution on 1e5 samples, bounds,
 * determinism, the documented keying (seed, name, index), independence of tensors' streams,
 * chunked filling, integer constants, and refused parameters. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/rng.h"
#include "runtime/init.h"

static tf_test_counts counts;

#define SAMPLES 100000

typedef struct stats {
  double mean, std, min, max;
} stats;

static stats measure(const float *v, int64_t n) {
  stats s = {0, 0, INFINITY, -INFINITY};
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < n; i++) {
    sum += v[i];
    s.min = fmin(s.min, v[i]);
    s.max = fmax(s.max, v[i]);
  }
  s.mean = sum / (double)n;
  for (int64_t i = 0; i < n; i++)
    squares += (v[i] - s.mean) * (v[i] - s.mean);
  s.std = sqrt(squares / (double)(n - 1));
  return s;
}

static double correlation(const float *a, const float *b, int64_t n) {
  stats sa = measure(a, n), sb = measure(b, n);
  double sum = 0;
  for (int64_t i = 0; i < n; i++)
    sum += (a[i] - sa.mean) * (b[i] - sb.mean);
  return sum / (double)(n - 1) / (sa.std * sb.std);
}

static void test_fans(void) {
  printf("fans:\n");
  const struct {
    int32_t rank;
    int64_t shape[TF_MAX_RANK];
    int64_t fan_in, fan_out;
  } cases[] = {
      {0, {0}, 1, 1},
      {1, {37}, 37, 37},
      {2, {300, 400}, 400, 300},    /* nn.Linear(400, 300).weight */
      {3, {8, 4, 5}, 20, 40},       /* conv1d [out, in, k] */
      {4, {64, 3, 5, 5}, 75, 1600}, /* conv2d [out, in/groups, kh, kw] */
      {4, {16, 8, 4, 4}, 128, 256}, /* conv_transpose2d [in, out/groups, kh, kw]: positional */
      {5, {2, 3, 4, 5, 6}, 360, 240},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int64_t fan_in = -1, fan_out = -1;
    CHECK_OK(&counts, tf_init_fans(cases[i].rank, cases[i].shape, &fan_in, &fan_out));
    CHECK(&counts, fan_in == cases[i].fan_in && fan_out == cases[i].fan_out,
          "rank %d: fans %" PRId64 "/%" PRId64 ", expected %" PRId64 "/%" PRId64, (int)cases[i].rank, fan_in, fan_out,
          cases[i].fan_in, cases[i].fan_out);
    printf("  rank %d: fan_in %" PRId64 ", fan_out %" PRId64 "\n", (int)cases[i].rank, fan_in, fan_out);
  }
  int64_t fan_in, fan_out;
  const int64_t negative[2] = {3, -1};
  tf_status status = tf_init_fans(2, negative, &fan_in, &fan_out);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "negative dimension accepted");
  tf_status_free(status);
  status = tf_init_fans(9, negative, &fan_in, &fan_out);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "rank 9 accepted");
  tf_status_free(status);
}

static void check_stats(const char *what, const float *v, int64_t n, double mean, double std, double low, double high) {
  stats s = measure(v, n);
  /* Five standard errors of the mean; 2% on the standard deviation (its standard error is
   * about 0.2% at 1e5 samples). */
  double mean_tolerance = 5 * std / sqrt((double)n) + 1e-12;
  bool ok =
      fabs(s.mean - mean) <= mean_tolerance && fabs(s.std - std) <= 0.02 * std + 1e-12 && s.min >= low && s.max <= high;
  CHECK(&counts, ok, "%s: mean %.5f (expected %.5f +- %.5f), std %.5f (expected %.5f), range [%g, %g] in [%g, %g]",
        what, s.mean, mean, mean_tolerance, s.std, std, s.min, s.max, low, high);
  printf("  %-34s mean %+.5f (want %+.5f)  std %.5f (want %.5f)  range [%+.4f, %+.4f]\n", what, s.mean, mean, s.std,
         std, s.min, s.max);
}

static void test_distributions(float *v) {
  printf("distributions (%d samples):\n", SAMPLES);
  const int64_t flat[1] = {SAMPLES};
  tf_init init = {TF_INIT_NORMAL, 0.5, 2.0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "normal", 1, flat, 7, v));
  check_stats("normal(0.5, 2)", v, SAMPLES, 0.5, 2.0, -INFINITY, INFINITY);

  init = (tf_init){TF_INIT_UNIFORM, -1.0, 3.0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "uniform", 1, flat, 7, v));
  check_stats("uniform(-1, 3)", v, SAMPLES, 1.0, 4.0 / sqrt(12.0), -1.0, nextafter(3.0, 0));

  const int64_t linear[2] = {250, 400}; /* 1e5 elements */
  double bound = sqrt(6.0 / 650.0);
  init = (tf_init){TF_INIT_XAVIER_UNIFORM, 1.0, 0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "fc.weight", 2, linear, 7, v));
  check_stats("xavier_uniform [250,400] gain 1", v, SAMPLES, 0.0, bound / sqrt(3.0), -bound, bound);
  stats s = measure(v, SAMPLES);
  CHECK(&counts, s.max > 0.999 * bound && s.min < -0.999 * bound, "xavier does not reach its bound %g", bound);

  const int64_t conv[4] = {100, 40, 5, 5}; /* 1e5 elements; fan_in 1000, fan_out 2500 */
  bound = 2.0 * sqrt(6.0 / 3500.0);
  init = (tf_init){TF_INIT_XAVIER_UNIFORM, 2.0, 0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "conv.weight", 4, conv, 7, v));
  check_stats("xavier_uniform [100,40,5,5] gain 2", v, SAMPLES, 0.0, bound / sqrt(3.0), -bound, bound);

  init = (tf_init){TF_INIT_KAIMING_NORMAL, sqrt(2.0), 0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "fc.weight", 2, linear, 7, v));
  check_stats("kaiming_normal [250,400] gain sqrt2", v, SAMPLES, 0.0, sqrt(2.0) / sqrt(400.0), -INFINITY, INFINITY);
  CHECK_OK(&counts, tf_init_fill_f32(&init, "conv.weight", 4, conv, 7, v));
  check_stats("kaiming_normal [100,40,5,5]", v, SAMPLES, 0.0, sqrt(2.0) / sqrt(1000.0), -INFINITY, INFINITY);
  CHECK_OK(&counts, tf_init_fill_f32(&init, "bias", 1, flat, 7, v));
  check_stats("kaiming_normal [1e5] (fan_in 1e5)", v, SAMPLES, 0.0, sqrt(2.0) / sqrt((double)SAMPLES), -INFINITY,
              INFINITY);

  /* [1, 1 + 2^-23): only 1.0f lies inside, though rounding could reach the excluded bound. */
  init = (tf_init){TF_INIT_UNIFORM, 1.0, 1.0 + ldexp(1.0, -23), NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "narrow", 1, flat, 7, v));
  bool below = true;
  for (int i = 0; i < SAMPLES; i++)
    below = below && v[i] == 1.0f;
  CHECK(&counts, below, "uniform reached its excluded upper bound");
  printf("  uniform on [1, 1+2^-23): every value 1.0f, the excluded bound never reached\n");
}

static void test_constants(float *v) {
  printf("constants:\n");
  const int64_t shape[2] = {3, 5};
  const struct {
    tf_init_kind kind;
    double a, b;
  } cases[] = {{TF_INIT_ZEROS, 0, 0}, {TF_INIT_ONES, 0, 0}, {TF_INIT_FILL, -2.5, 0}, {TF_INIT_ARANGE, 2.0, 0.5}};
  for (size_t k = 0; k < 4; k++) {
    tf_init init = {cases[k].kind, cases[k].a, cases[k].b, NULL, NULL};
    CHECK_OK(&counts, tf_init_fill_f32(&init, "c", 2, shape, 1, v));
    bool ok = true;
    for (int i = 0; i < 15; i++) {
      float want = k == 0 ? 0.0f : k == 1 ? 1.0f : k == 2 ? -2.5f : (float)(2.0 + 0.5 * i);
      ok = ok && v[i] == want;
    }
    CHECK(&counts, ok, "%s values wrong", tf_init_name(cases[k].kind));
    printf("  %-8s [3,5]: %g %g ... %g\n", tf_init_name(cases[k].kind), v[0], v[1], v[14]);
  }

  int32_t ids[64];
  const int64_t positions[2] = {4, 16};
  tf_init arange = {TF_INIT_ARANGE, 0, 1, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_i32(&arange, "position_ids", 2, positions, 1, ids));
  bool ok = true;
  for (int i = 0; i < 64; i++)
    ok = ok && ids[i] == i;
  CHECK(&counts, ok, "i32 arange wrong");
  int64_t wide[5];
  const int64_t five[1] = {5};
  tf_init big = {TF_INIT_ARANGE, 3e9, -2e9, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_i64(&big, "wide", 1, five, 1, wide));
  CHECK(&counts, wide[0] == 3000000000LL && wide[4] == -5000000000LL, "i64 arange wrong: %" PRId64 " %" PRId64, wide[0],
        wide[4]);
  tf_init fill = {TF_INIT_FILL, -7, 0.25 /* b is ignored by fill */, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_i32(&fill, "sevens", 1, five, 1, ids));
  CHECK(&counts, ids[0] == -7 && ids[4] == -7, "i32 fill wrong");
  /* A mask's ones (ONNX ConstantOfShape of a bool 1: BioGPT's default attention mask). */
  uint8_t mask[5] = {0};
  tf_init ones = {TF_INIT_FILL, 1, 0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_range(&ones, "mask", 1, five, 1, TF_U8, 0, 5, mask));
  CHECK(&counts, mask[0] == 1 && mask[4] == 1, "u8 fill wrong: %d %d", mask[0], mask[4]);
  printf("  i32 arange(0, 1) [4,16]: 0 1 ... 63; i64 arange(3e9, -2e9): %" PRId64 " ... %" PRId64 "; i32 fill(-7)\n",
         wide[0], wide[4]);
}

static void test_keying(float *v, float *w) {
  printf("keying:\n");
  const int64_t flat[1] = {SAMPLES};
  tf_init init = {TF_INIT_NORMAL, 0.0, 1.0, NULL, NULL};
  /* The documented key: element i = mean + std x tf_rng_normal(seed, TF_INIT_RNG_STEP, hash(name), i). */
  CHECK_OK(&counts, tf_init_fill_f32(&init, "h.0.attn.qkv.weight", 1, flat, 1234, v));
  bool keyed = true;
  for (uint64_t i = 0; i < 1000; i++)
    keyed = keyed && v[i] == (float)tf_rng_normal(1234, TF_INIT_RNG_STEP, tf_rng_hash("h.0.attn.qkv.weight"), i);
  CHECK(&counts, keyed, "values are not keyed by (seed, step, hash(name), index)");

  CHECK_OK(&counts, tf_init_fill_f32(&init, "h.0.attn.qkv.weight", 1, flat, 1234, w));
  CHECK(&counts, memcmp(v, w, SAMPLES * sizeof(float)) == 0, "the same call gave different values");
  printf("  same (seed, name) twice: identical; element i = tf_rng_normal(seed, TF_INIT_RNG_STEP, hash(name), i)\n");

  CHECK_OK(&counts, tf_init_fill_f32(&init, "h.1.attn.qkv.weight", 1, flat, 1234, w));
  double other_name = correlation(v, w, SAMPLES);
  CHECK_OK(&counts, tf_init_fill_f32(&init, "h.0.attn.qkv.weight", 1, flat, 1235, w));
  double other_seed = correlation(v, w, SAMPLES);
  CHECK(&counts, fabs(other_name) < 0.02 && fabs(other_seed) < 0.02, "streams correlate: names %.4f, seeds %.4f",
        other_name, other_seed);
  printf("  correlation with another name %+.4f, with another seed %+.4f\n", other_name, other_seed);

  /* A prefix of a larger tensor of the same name has the same values: nothing depends on the shape
   * but the scale of xavier/kaiming. */
  const int64_t small[2] = {10, 10};
  CHECK_OK(&counts, tf_init_fill_f32(&init, "h.0.attn.qkv.weight", 2, small, 1234, w));
  CHECK(&counts, memcmp(v, w, 100 * sizeof(float)) == 0, "values depend on the shape");

  /* Chunks in any order equal the whole, as threads would fill it. */
  memset(w, 0, SAMPLES * sizeof(float));
  for (int64_t begin = SAMPLES - 7000; begin > -7000; begin -= 7000) {
    int64_t start = begin < 0 ? 0 : begin, end = begin + 7000;
    CHECK_OK(&counts,
             tf_init_fill_range(&init, "h.0.attn.qkv.weight", 1, flat, 1234, TF_F32, start, end - start, w + start));
  }
  CHECK(&counts, memcmp(v, w, SAMPLES * sizeof(float)) == 0, "chunked fill differs from the whole");
  printf("  15 chunks filled back to front equal the whole tensor; a [10,10] tensor equals the first 100 values\n");
}

static void expect_error(const char *what, tf_status status, tf_code code, const char *phrase) {
  const char *message = tf_status_message(status);
  bool ok = status && tf_status_code(status) == code && strstr(message, phrase);
  CHECK(&counts, ok, "%s: expected %s with \"%s\", got %s: %s", what, tf_code_name(code), phrase,
        status ? tf_code_name(tf_status_code(status)) : "success", message);
  if (ok)
    printf("  refused %-22s %s\n", what, message);
  tf_status_free(status);
}

static void test_refusals(float *v) {
  printf("refusals:\n");
  const int64_t shape[2] = {4, 4};
  int32_t ids[16];
  tf_init external = {TF_INIT_EXTERNAL, 0, 0, "weights.safetensors", "w"};
  expect_error("external", tf_init_fill_f32(&external, "w", 2, shape, 1, v), TF_ERR_UNSUPPORTED, "safetensors");
  tf_init none = {TF_INIT_NONE, 0, 0, NULL, NULL};
  expect_error("none", tf_init_fill_f32(&none, "x", 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT, "no initializer");
  tf_init nan = {TF_INIT_NORMAL, 0, NAN, NULL, NULL};
  expect_error("NaN std", tf_init_fill_f32(&nan, "w", 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT, "finite");
  tf_init negative = {TF_INIT_NORMAL, 0, -1, NULL, NULL};
  expect_error("negative std", tf_init_fill_f32(&negative, "w", 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT, "negative");
  tf_init reversed = {TF_INIT_UNIFORM, 2, 1, NULL, NULL};
  expect_error("uniform a > b", tf_init_fill_f32(&reversed, "w", 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT,
               "exceeds high");
  tf_init gain = {TF_INIT_KAIMING_NORMAL, -1, 0, NULL, NULL};
  expect_error("negative gain", tf_init_fill_f32(&gain, "w", 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT, "gain");
  tf_init normal = {TF_INIT_NORMAL, 0, 1, NULL, NULL};
  expect_error("no name", tf_init_fill_f32(&normal, NULL, 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT, "tensor name");
  expect_error("random integers", tf_init_fill_i32(&normal, "ids", 2, shape, 1, ids), TF_ERR_INVALID_ARGUMENT,
               "float tensor");
  tf_init half = {TF_INIT_FILL, 2.5, 0, NULL, NULL};
  expect_error("fractional fill", tf_init_fill_i32(&half, "ids", 2, shape, 1, ids), TF_ERR_INVALID_ARGUMENT,
               "integer values");
  tf_init overflow = {TF_INIT_ARANGE, 2147483640.0, 1, NULL, NULL};
  expect_error("i32 overflow", tf_init_fill_i32(&overflow, "ids", 2, shape, 1, ids), TF_ERR_INVALID_ARGUMENT,
               "range of i32");
  tf_init minus_one = {TF_INIT_FILL, -1, 0, NULL, NULL};
  expect_error("u8 of -1", tf_init_fill_range(&minus_one, "mask", 2, shape, 1, TF_U8, 0, 16, ids),
               TF_ERR_INVALID_ARGUMENT, "range of u8");
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_error("rank 9", tf_init_fill_f32(&normal, "w", 9, nine, 1, v), TF_ERR_INVALID_ARGUMENT, "rank 9");
  expect_error("range past end", tf_init_fill_range(&normal, "w", 2, shape, 1, TF_F32, 10, 7, v),
               TF_ERR_INVALID_ARGUMENT, "outside its 16 elements");
  expect_error("f16 range", tf_init_fill_range(&normal, "w", 2, shape, 1, TF_F16, 0, 16, v), TF_ERR_UNSUPPORTED, "f16");
  expect_error("NULL init", tf_init_fill_f32(NULL, "w", 2, shape, 1, v), TF_ERR_INVALID_ARGUMENT, "NULL");

  /* An empty tensor is fine even where its fan would be zero. */
  const int64_t empty[2] = {0, 5};
  tf_init kaiming = {TF_INIT_KAIMING_NORMAL, 1, 0, NULL, NULL};
  CHECK_OK(&counts, tf_init_fill_f32(&kaiming, "empty", 2, empty, 1, NULL));
}

int main(void) {
  float *v = malloc(SAMPLES * sizeof(float)), *w = malloc(SAMPLES * sizeof(float));
  if (!v || !w)
    return 1;
  test_fans();
  test_distributions(v);
  test_constants(v);
  test_keying(v, w);
  test_refusals(v);
  free(v);
  free(w);
  return tf_test_finish("test_init", &counts);
}
