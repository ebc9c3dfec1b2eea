/* The suite's comparisons and what it prints (report.c), shared by harness.c. */
#ifndef TIGHTFIT_TESTS_CONFORMANCE_REPORT_H
#define TIGHTFIT_TESTS_CONFORMANCE_REPORT_H

#include "conformance.h"
#include "tightfit/plan.h"

/* The worst errors of one step's written buffers. */
typedef struct conf_step_errors {
  double worst64, abs64, scaled64; /* vs the f64 reference: fraction of the tolerance, |error|, |error| / scale */
  double worst32;                  /* vs the f32 CPU kernel: fraction of the tolerance */
} conf_step_errors;

/* What one case showed on one backend, for its line. */
typedef struct conf_result {
  int32_t steps;
  double worst64, worst32, worst_end; /* fractions of the tolerances */
  char where64[128], where32[128], where_end[128];
  char note[512]; /* why the case did not run, when it did not */
} conf_result;

/* Compares buffer `id` written by step s: `got` (device bytes) against `reference` (the f64 host's
 * buffer) and `cpu` (the f32 kernel's bytes); failures recorded in counts, errors folded in. */
void conf_compare_step(tf_test_counts *counts, const char *backend, const char *label, const tf_plan *plan, int32_t s,
                       int32_t id, const void *got, const void *reference, const void *cpu, conf_step_errors *errors);

/* The same for a half (f16, bf16) buffer written by a step that computes on half data (a half
 * kernel): `got` widened against the f64 and f32 results before their rounding to the half type,
 * within the op's tolerances plus one half rounding (f64) or two (f32), plus `terms` u max(1, max |ref|)
 * (conf_backend.rounded_terms). */
void conf_compare_half_step(tf_test_counts *counts, const char *backend, const char *label, const tf_plan *plan,
                            int32_t s, int32_t id, const void *got, const double *reference, const float *cpu,
                            double terms, conf_step_errors *errors);

/* Folds step s's errors into the op's coverage and the case's result. */
void conf_record_step(conf_coverage *coverage, conf_result *result, const tf_plan *plan, int32_t s,
                      const conf_step_errors *errors);

/* Compares buffer `b` at the end of `stage` of an end-to-end run: `got` (device bytes) against `cpu`
 * (the f32 host chain's), |got - cpu| <= atol + rtol |cpu|. */
void conf_compare_end(tf_test_counts *counts, const char *backend, const char *label, const char *stage,
                      const tf_plan_buffer *b, const void *got, const void *cpu, conf_tolerance tolerance,
                      conf_result *result);

/* The case's line: "ok"/"FAIL", backend, label, steps and worst errors (or the note). */
void conf_print_result(bool ok, const char *backend, const char *label, const conf_result *result);

#endif
