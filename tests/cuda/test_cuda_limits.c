/* TIGHTFIT_CUDA_LIMITS (kernels/cuda/device_limits.cu): the limits a big GPU lowers its kernels'
 * choices to, so that it runs the paths of a smaller card (issue 42). Host logic on any machine:
 * each accepted value and what it lowers an H200's limits to, each refused value and why, that a
 * value never raises a limit, and which attention path half plans then take (the line `tightfit
 * devices` prints). On a GPU also: the current device's limits under the variable. The kernels run
 * under it by scripts/gpu-verify (test_cuda_ops, a training run). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"
#include "kernels/cuda/kernels.h"

static tf_test_counts counts;

static const tf_cuda_limits H200 = {9, 0, 227 * 1024};

static void expect_cap(const char *value, tf_cuda_limits start, int major, int minor, int64_t shared) {
  tf_cuda_limits limits = start;
  const char *why = tf_cuda_limits_cap(value, &limits);
  const bool ok = !why && limits.major == major && limits.minor == minor && limits.shared_optin == shared;
  CHECK(&counts, ok, "'%s': got %d.%d %lld bytes (%s), wanted %d.%d %lld", value ? value : "(unset)", limits.major,
        limits.minor, (long long)limits.shared_optin, why ? why : "accepted", major, minor, (long long)shared);
  printf("%-4s TIGHTFIT_CUDA_LIMITS=%s on %d.%d/%lld: %d.%d, %lld bytes\n", ok ? "ok" : "FAIL",
         value ? value : "(unset)", start.major, start.minor, (long long)start.shared_optin, limits.major, limits.minor,
         (long long)limits.shared_optin);
}

static void expect_refused(const char *value, const char *wanted) {
  tf_cuda_limits limits = H200;
  const char *why = tf_cuda_limits_cap(value, &limits);
  const bool ok = why && strstr(why, wanted) && memcmp(&limits, &H200, sizeof(limits)) == 0;
  CHECK(&counts, ok, "'%s': %s (wanted a refusal naming '%s', limits untouched)", value, why ? why : "accepted",
        wanted);
  printf("%-4s TIGHTFIT_CUDA_LIMITS=%s refused: %s\n", ok ? "ok" : "FAIL", value, why ? why : "(accepted)");
}

static void expect_attention(const char *value, const char *wanted) {
  tf_cuda_limits limits = H200;
  tf_cuda_limits_cap(value, &limits);
  char text[256];
  tf_cuda_tensor_attention_describe(text, sizeof(text), limits.major, limits.minor, limits.shared_optin,
                                    TF_CUDA_ATTENTION_SPLIT);
  const bool ok = strstr(text, wanted) != NULL;
  CHECK(&counts, ok, "'%s': '%s' lacks '%s'", value, text, wanted);
  printf("%-4s an H200 under %s: %s\n", ok ? "ok" : "FAIL", value, text);
}

static void test_values(void) {
  expect_cap(NULL, H200, 9, 0, 227 * 1024);
  expect_cap("", H200, 9, 0, 227 * 1024);
  expect_cap("t4", H200, 7, 5, 64 * 1024);
  expect_cap("T4", H200, 7, 5, 64 * 1024);
  expect_cap("sm75", H200, 7, 5, 64 * 1024);
  expect_cap("a100", H200, 8, 0, 163 * 1024);
  expect_cap("l4", H200, 8, 9, 99 * 1024);
  expect_cap("v100", H200, 7, 0, 96 * 1024);
  expect_cap("8.6", H200, 8, 6, 227 * 1024);
  expect_cap("9.0:65536", H200, 9, 0, 65536);
  expect_cap("7.5:49152", H200, 7, 5, 49152);
  /* never raised: an A10 asked to act as an A100 keeps its own limits */
  expect_cap("a100", (tf_cuda_limits){8, 6, 99 * 1024}, 8, 0, 99 * 1024);
  expect_cap("9.0:300000", (tf_cuda_limits){7, 5, 64 * 1024}, 7, 5, 64 * 1024);
  expect_refused("h100x", "not t4");
  expect_refused("9", "not t4");
  expect_refused("7.5:", "byte count");
  expect_refused("7.5:-4096", "byte count");
  expect_refused("7.5:64k", "byte count");
  expect_refused("7.5:512", "byte count");
  expect_refused("7.5x", "not t4");
  expect_attention("t4", "CUDA cores (compute capability 7.5");
  expect_attention("a100", "tensor cores");
  expect_attention("9.0:65536", "D in {32}; gradient D in {none}");
}

/* On a GPU: the current device's limits follow the variable, and a bad value leaves them as they are. */
static void test_current(void) {
  tf_cuda_limits real, lowered;
  unsetenv("TIGHTFIT_CUDA_LIMITS");
  CHECK(&counts, tf_cuda_current_limits(&real), "the device's limits cannot be read");
  setenv("TIGHTFIT_CUDA_LIMITS", "t4", 1);
  CHECK(&counts, tf_cuda_current_limits(&lowered), "the device's limits cannot be read under t4");
  const bool ok = lowered.shared_optin == (real.shared_optin < 65536 ? real.shared_optin : 65536) &&
                  lowered.major * 10 + lowered.minor <= 75;
  CHECK(&counts, ok, "under t4: %d.%d %lld bytes", lowered.major, lowered.minor, (long long)lowered.shared_optin);
  printf("%-4s this device %d.%d with %lld bytes; under t4 %d.%d with %lld bytes\n", ok ? "ok" : "FAIL", real.major,
         real.minor, (long long)real.shared_optin, lowered.major, lowered.minor, (long long)lowered.shared_optin);
  unsetenv("TIGHTFIT_CUDA_LIMITS");
}

int main(void) {
  test_values();
  if (cuda_test_device() == 0)
    test_current();
  else
    printf("note: no CUDA device here: the current device's limits are checked where there is one\n");
  return tf_test_finish("TIGHTFIT_CUDA_LIMITS", &counts);
}
