/* A tiny test harness: CHECK records a failure and goes on; tests print what they compare and end
 * with tf_test_finish(), which prints "N passed, N failed" and returns the exit code: 1 when a check
 * failed or when none ran. */
#ifndef TIGHTFIT_TESTS_CHECK_H
#define TIGHTFIT_TESTS_CHECK_H

#include <stdio.h>

#include "tightfit/status.h"

typedef struct tf_test_counts {
  int passed, failed;
} tf_test_counts;

#define CHECK(counts, cond, ...)                                                                                       \
  do {                                                                                                                 \
    if (cond) {                                                                                                        \
      (counts)->passed++;                                                                                              \
    } else {                                                                                                           \
      (counts)->failed++;                                                                                              \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                  \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fprintf(stderr, "\n");                                                                                           \
    }                                                                                                                  \
  } while (0)

/* Checks that `status` is OK (printing its message otherwise) and frees it. */
#define CHECK_OK(counts, status_expr)                                                                                  \
  do {                                                                                                                 \
    tf_status check_status_ = (status_expr);                                                                           \
    CHECK(counts, check_status_ == NULL, "%s", tf_status_message(check_status_));                                      \
    tf_status_free(check_status_);                                                                                     \
  } while (0)

static inline int tf_test_finish(const char *suite, const tf_test_counts *counts) {
  printf("%s: %d passed, %d failed\n", suite, counts->passed, counts->failed);
  if (counts->passed + counts->failed == 0) { /* a test that checked nothing has not passed */
    printf("FAIL %s: no check ran\n", suite);
    return 1;
  }
  return counts->failed ? 1 : 0;
}

#endif
