/* The CUDA backend's device collectives (backends/cuda/cuda_nccl.c): NCCL loaded at run time.
 *
 * Without arguments (any machine, no GPU needed): TIGHTFIT_NCCL_LIBRARY naming a missing file, and a
 * library that is not NCCL, give errors that say so and how to go on; unset, NCCL loads from the
 * usual names (or, on a machine without it, the error names where it looked) and makes a
 * communicator id. With "device" or TIGHTFIT_TEST_NCCL=device (ctest test_cuda_nccl_device; SKIP, exit
 * 77, without a GPU): on a
 * session-like backend state, a communicator of one rank sums f32 and bf16 ranges in place (one
 * rank's sum is itself, the bytes around the range untouched), an all-reduce before the
 * communicator and a second communicator are refused, a missing library is the same clear error
 * through the vtable, and an i32 range is refused. Two ranks run in scripts/gpu-verify (item nccl). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "cuda_test.h"

static tf_test_counts counts;

/* tf_cuda_nccl_open under TIGHTFIT_NCCL_LIBRARY=value fails with a message holding every `wanted`. */
static void expect_open_refused(const char *value, const char *const *wanted, int n_wanted) {
  setenv("TIGHTFIT_NCCL_LIBRARY", value, 1);
  cuda_nccl *nccl = NULL;
  tf_status status = tf_cuda_nccl_open(&nccl);
  const char *message = status ? tf_status_message(status) : "(loaded)";
  bool ok = status != NULL && nccl == NULL;
  for (int i = 0; i < n_wanted; i++)
    ok = ok && strstr(message, wanted[i]) != NULL;
  CHECK(&counts, ok, "TIGHTFIT_NCCL_LIBRARY=%s: '%s'", value, message);
  printf("%-4s TIGHTFIT_NCCL_LIBRARY=%s: %s\n", ok ? "ok" : "FAIL", value, message);
  tf_status_free(status);
  tf_cuda_nccl_close(nccl);
  unsetenv("TIGHTFIT_NCCL_LIBRARY");
}

static void test_loading(void) {
  const char *missing[] = {"TIGHTFIT_NCCL_LIBRARY names /nonexistent/libnccl.so.2", "does not load",
                           "TIGHTFIT_DIST_NCCL=0"};
  expect_open_refused("/nonexistent/libnccl.so.2", missing, 3);
  const char *not_nccl[] = {"libm.so.6 has no ncclGetVersion", "it is not NCCL"};
  expect_open_refused("libm.so.6", not_nccl, 2);

  unsetenv("TIGHTFIT_NCCL_LIBRARY");
  cuda_nccl *nccl = NULL;
  tf_status status = tf_cuda_nccl_open(&nccl);
  if (status) { /* a machine without NCCL: the error must say where it looked */
    const char *message = tf_status_message(status);
    const bool ok = strstr(message, "looked for libnccl.so.2") && strstr(message, "TIGHTFIT_DIST_NCCL=0");
    CHECK(&counts, ok, "no NCCL here, and the error does not say where it looked: '%s'", message);
    printf("%-4s no NCCL on this machine: %s\n", ok ? "ok" : "FAIL", message);
    tf_status_free(status);
    return;
  }
  const int version = tf_cuda_nccl_version(nccl);
  CHECK(&counts, version >= 20000, "ncclGetVersion gave %d", version);
  printf("%-4s NCCL %d.%d.%d loaded as %s\n", version >= 20000 ? "ok" : "FAIL", version / 10000, version / 100 % 100,
         version % 100, tf_cuda_nccl_path(nccl));
  unsigned char id[TF_COLLECTIVE_ID_BYTES], zero[TF_COLLECTIVE_ID_BYTES] = {0};
  size_t bytes = 0;
  status = tf_cuda_nccl_unique_id(nccl, id, &bytes);
  const bool made = !status && bytes == 128 && memcmp(id, zero, bytes) != 0;
  CHECK(&counts, made, "ncclGetUniqueId: %s, %zu bytes", status ? tf_status_message(status) : "ok", bytes);
  printf("%-4s a communicator id: %zu bytes%s%s\n", made ? "ok" : "FAIL", bytes, status ? ": " : "",
         status ? tf_status_message(status) : "");
  tf_status_free(status);
  tf_cuda_nccl_close(nccl);
}

/* ---- on a GPU ---- */

enum { N = 1000, AT = 64 }; /* elements of each range, and where it starts in the region */

static uint16_t bf16_of(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return (uint16_t)(bits >> 16); /* the values are small integers: exact */
}

/* f32 values at AT and bf16 after them, each summed over a communicator of one rank: unchanged, and
 * so is every byte around them. */
static void test_sum_one_rank(void *state) {
  const int64_t bytes = (int64_t)AT * 4 + N * 4 + N * 2 + 256;
  unsigned char *before = malloc((size_t)bytes), *after = malloc((size_t)bytes);
  for (int64_t i = 0; i < bytes; i++)
    before[i] = (unsigned char)(i * 7 + 3);
  for (int i = 0; i < N; i++) {
    const float f = (float)(i % 97) - 48.0f;
    memcpy(before + AT * 4 + i * 4, &f, 4);
    const uint16_t h = bf16_of((float)(i % 13) - 6.0f);
    memcpy(before + AT * 4 + N * 4 + i * 2, &h, 2);
  }
  void *region = NULL;
  CHECK_OK(&counts, tf_backend_cuda.alloc_region(state, bytes, &region));
  CHECK_OK(&counts, tf_backend_cuda.upload(state, region, 0, before, bytes));
  tf_status status = tf_backend_cuda.allreduce_sum(state, region, AT * 4, N, TF_F32);
  CHECK(&counts, status && strstr(tf_status_message(status), "before collective_init"),
        "an all-reduce before the communicator: %s", status ? tf_status_message(status) : "accepted");
  tf_status_free(status);

  unsigned char id[TF_COLLECTIVE_ID_BYTES];
  size_t id_bytes = 0;
  CHECK_OK(&counts, tf_backend_cuda.collective_id(state, id, &id_bytes));
  CHECK_OK(&counts, tf_backend_cuda.collective_init(state, 0, 1, id, id_bytes));
  status = tf_backend_cuda.collective_init(state, 0, 1, id, id_bytes);
  CHECK(&counts, status && strstr(tf_status_message(status), "exists already"), "a second communicator: %s",
        status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  CHECK_OK(&counts, tf_backend_cuda.allreduce_sum(state, region, AT * 4, N, TF_F32));
  CHECK_OK(&counts, tf_backend_cuda.allreduce_sum(state, region, AT * 4 + N * 4, N, TF_BF16));
  status = tf_backend_cuda.allreduce_sum(state, region, 0, 4, TF_I32);
  CHECK(&counts, status && strstr(tf_status_message(status), "not i32"), "an i32 all-reduce: %s",
        status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  CHECK_OK(&counts, tf_backend_cuda.synchronize(state));
  CHECK_OK(&counts, tf_backend_cuda.download(state, region, 0, after, bytes));
  const bool same = memcmp(before, after, (size_t)bytes) == 0;
  CHECK(&counts, same, "one rank's sum changed bytes of the region");
  printf("%-4s one rank: %d f32 and %d bf16 elements summed in place, %lld bytes as they were\n", same ? "ok" : "FAIL",
         N, N, (long long)bytes);
  tf_backend_cuda.free_region(state, region);
  free(before);
  free(after);
}

/* `status` (consumed) must name the missing library and the way around it. */
static void expect_missing_nccl(const char *entry, tf_status status) {
  const bool clear = status && strstr(tf_status_message(status), "/nonexistent/libnccl.so.2") &&
                     strstr(tf_status_message(status), "TIGHTFIT_DIST_NCCL=0");
  CHECK(&counts, clear, "%s without NCCL: %s", entry, status ? tf_status_message(status) : "accepted");
  printf("%-4s %s without NCCL: %s\n", clear ? "ok" : "FAIL", entry, status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
}

static int test_device(void) {
  const int device = cuda_test_device();
  if (device != 0)
    return device;
  tf_backend_options options = {.device = 0, .threads = 0};
  void *state = NULL;
  CHECK_OK(&counts, tf_backend_cuda.create(&options, &state));
  if (!state)
    return tf_test_finish("NCCL on the device", &counts);
  /* the missing library through the vtable, before NCCL is loaded into this state: both entries a
   * rank calls first (collective_device loads NCCL on every rank, backend.h) say so clearly */
  setenv("TIGHTFIT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  char key[128] = "";
  expect_missing_nccl("collective_device", tf_backend_cuda.collective_device(state, key, sizeof(key)));
  unsigned char id[TF_COLLECTIVE_ID_BYTES];
  size_t id_bytes = 0;
  expect_missing_nccl("collective_id", tf_backend_cuda.collective_id(state, id, &id_bytes));
  unsetenv("TIGHTFIT_NCCL_LIBRARY");

  CHECK_OK(&counts, tf_backend_cuda.collective_device(state, key, sizeof(key)));
  CHECK(&counts, strlen(key) > 4, "the device's key: '%s'", key);
  printf("ok   cuda:0 is %s\n", key);

  test_sum_one_rank(state);
  tf_backend_cuda.destroy(state);
  return tf_test_finish("NCCL on the device", &counts);
}

int main(int argc, char **argv) {
  const char *part = getenv("TIGHTFIT_TEST_NCCL"); /* scripts/gpu-verify's run_test passes variables only */
  if ((argc > 1 && strcmp(argv[1], "device") == 0) || (part && strcmp(part, "device") == 0))
    return test_device();
  test_loading();
  return tf_test_finish("NCCL loading", &counts);
}
