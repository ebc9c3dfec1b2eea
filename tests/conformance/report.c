/* The suite's comparisons, its per-case lines and its per-op coverage table (report.h). */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "half_values.h"

#include "kernels/cpu/kernels.h"

/* The worst element of a comparison. */
typedef struct diff {
  double ratio;     /* |error| / bound: > 1 fails; infinite for a NaN on one side only */
  double abs;       /* the largest finite |error| */
  double magnitude; /* max |want| */
  int64_t at;       /* the element with the worst ratio, -1 when every element is equal */
} diff;

static double value_at(const void *values, bool f64, int64_t i) {
  return f64 ? ((const double *)values)[i] : (double)((const float *)values)[i];
}

/* `got` (float) against `want` (double when want_f64, else float) under t (conformance.h). */
static diff compare(const float *got, const void *want, bool want_f64, int64_t n, conf_tolerance t) {
  diff d = {0, 0, 0, -1};
  for (int64_t i = 0; i < n; i++)
    d.magnitude = fmax(d.magnitude, fabs(value_at(want, want_f64, i)));
  const double scale = t.floor >= 0 ? fmax(t.floor, d.magnitude) : 1.0;
  for (int64_t i = 0; i < n; i++) {
    const double g = got[i], w = value_at(want, want_f64, i), error = fabs(g - w);
    double ratio = 0;
    if (!(g == w || (isnan(g) && isnan(w)))) {
      const double bound = t.atol * scale + t.rtol * fabs(w);
      ratio = bound > 0 && !isnan(error) ? error / bound : INFINITY;
    }
    if (ratio > d.ratio) {
      d.ratio = ratio;
      d.at = i;
    }
    if (error > d.abs)
      d.abs = error;
  }
  return d;
}

static int64_t elements(const tf_plan_buffer *b) { return b->bytes / tf_dtype_size(b->dtype); }

/* The first element whose bytes differ, or -1. adamw8bit's codes (u8 optimizer state) may differ by
 * one, modulo 256 (an int8 m code -1 against 0): a value within rounding of a tie between two codes
 * rounds either way in f32 and f64, or on another backend. */
static int64_t first_difference(const tf_plan_buffer *b, const void *x, const void *y) {
  const int64_t size = tf_dtype_size(b->dtype);
  const bool codes = b->dtype == TF_U8 && b->role == TF_ROLE_OPTIMIZER_STATE;
  for (int64_t i = 0; i < elements(b); i++) {
    if (codes) {
      const uint8_t step = (uint8_t)(((const uint8_t *)x)[i] - ((const uint8_t *)y)[i]);
      if (step > 1 && step < 255)
        return i;
    } else if (memcmp((const char *)x + i * size, (const char *)y + i * size, (size_t)size) != 0) {
      return i;
    }
  }
  return -1;
}

void conf_compare_step(tf_test_counts *counts, const char *backend, const char *label, const tf_plan *plan, int32_t s,
                       int32_t id, const void *got, const void *reference, const void *cpu, conf_step_errors *errors) {
  const tf_plan_step *step = &plan->steps[s];
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->dtype != TF_F32) { /* integers, f16, bf16: bit for bit */
    const int64_t at64 = first_difference(b, got, reference), at32 = first_difference(b, got, cpu);
    CHECK(counts, at64 < 0, "%s on %s: step %d '%s' (%s): %s output '%s' differs from the f64 reference at %lld", label,
          backend, s, step->name, tf_op_name(step->op), tf_dtype_name(b->dtype), b->name, (long long)at64);
    CHECK(counts, at32 < 0, "%s on %s: step %d '%s' (%s): %s output '%s' differs from the f32 CPU kernel at %lld",
          label, backend, s, step->name, tf_op_name(step->op), tf_dtype_name(b->dtype), b->name, (long long)at32);
    errors->worst64 = at64 >= 0 ? INFINITY : errors->worst64;
    errors->worst32 = at32 >= 0 ? INFINITY : errors->worst32;
    return;
  }
  const conf_tolerance t64 = conf_tolerance_f64(step->op), t32 = conf_tolerance_f32(step->op);
  const diff d64 = compare(got, reference, true, elements(b), t64);
  const diff d32 = compare(got, cpu, false, elements(b), t32);
  const float *y = got;
  CHECK(counts, d64.ratio <= 1.0,
        "%s on %s: step %d '%s' (%s): '%s'[%lld] = %.9g, f64 reference %.9g: %.3g x the tolerance (atol %.1e x "
        "max(%g, max |reference| %.3g) + rtol %.1e x |reference|)",
        label, backend, s, step->name, tf_op_name(step->op), b->name, (long long)d64.at, d64.at >= 0 ? y[d64.at] : 0.0,
        d64.at >= 0 ? value_at(reference, true, d64.at) : 0.0, d64.ratio, t64.atol, t64.floor, d64.magnitude, t64.rtol);
  CHECK(counts, d32.ratio <= 1.0,
        "%s on %s: step %d '%s' (%s): '%s'[%lld] = %.9g, f32 CPU kernel %.9g: %.3g x the tolerance (atol %.1e x "
        "max(1, max |cpu|) + rtol %.1e x |cpu|)",
        label, backend, s, step->name, tf_op_name(step->op), b->name, (long long)d32.at, d32.at >= 0 ? y[d32.at] : 0.0,
        d32.at >= 0 ? value_at(cpu, false, d32.at) : 0.0, d32.ratio, t32.atol, t32.rtol);
  if (step->op == TF_OP_CAST) { /* a cast's f32 result is exact: equal bits, signed zeros and NaNs too */
    const int64_t at = first_difference(b, got, cpu);
    uint32_t bits[2] = {0, 0};
    if (at >= 0) {
      memcpy(&bits[0], (const char *)got + at * 4, 4);
      memcpy(&bits[1], (const char *)cpu + at * 4, 4);
    }
    CHECK(counts, at < 0, "%s on %s: step %d '%s' (cast): f32 output '%s'[%lld] is 0x%08X, the f32 CPU kernel's 0x%08X",
          label, backend, s, step->name, b->name, (long long)at, bits[0], bits[1]);
    errors->worst32 = at >= 0 ? INFINITY : errors->worst32;
  }
  errors->worst64 = fmax(errors->worst64, d64.ratio);
  errors->abs64 = fmax(errors->abs64, d64.abs);
  errors->scaled64 = fmax(errors->scaled64, d64.magnitude > 0 ? d64.abs / d64.magnitude : 0);
  errors->worst32 = fmax(errors->worst32, d32.ratio);
}

/* Adds `absolute` to t's bound for values like want[0..n) (t.atol scales by max(floor, max |want|),
 * or by 1 with no floor). */
static void absolute_part(conf_tolerance *t, const void *want, bool want_f64, int64_t n, double absolute) {
  double magnitude = 0;
  for (int64_t i = 0; i < n; i++)
    magnitude = fmax(magnitude, fabs(value_at(want, want_f64, i)));
  const double scale = t->floor >= 0 ? fmax(t->floor, magnitude) : 1.0;
  if (scale > 0) {
    t->atol += absolute / scale;
  } else { /* all zeros: the bound is `absolute` itself */
    t->floor = -1.0;
    t->atol = absolute;
  }
}

void conf_compare_half_step(tf_test_counts *counts, const char *backend, const char *label, const tf_plan *plan,
                            int32_t s, int32_t id, const void *got, const double *reference, const float *cpu,
                            double terms, conf_step_errors *errors) {
  const tf_plan_step *step = &plan->steps[s];
  const tf_plan_buffer *b = &plan->buffers[id];
  const int64_t n = elements(b);
  float *y = malloc(sizeof(float) * (size_t)(n + 1));
  if (!y) {
    CHECK(counts, false, "%s: out of host memory", label);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    y[i] = tf_test_half_value(b->dtype, ((const uint16_t *)got)[i]);
  /* one rounding of the result to the half type against the f64 result, two (the device's and the
   * CPU's, of f32 results within t32) against the f32 CPU kernel: each within u |value| (unit
   * roundoff u) or, among f16's subnormals, half their spacing 2^-24 absolute */
  const double u = b->dtype == TF_BF16 ? 1.0 / 256.0 : 1.0 / 2048.0;
  const double tiny = b->dtype == TF_F16 ? ldexp(1.0, -25) : 0.0;
  conf_tolerance t64 = conf_tolerance_f64(step->op), t32 = conf_tolerance_f32(step->op);
  t64.rtol += 1.01 * u;
  t32.rtol += 2.02 * u;
  t64.atol += terms * u; /* the sums family's tolerances scale atol by max(1, max |ref|) */
  t32.atol += terms * u;
  absolute_part(&t64, reference, true, n, tiny);
  absolute_part(&t32, cpu, false, n, 2.0 * tiny);
  const diff d64 = compare(y, reference, true, n, t64), d32 = compare(y, cpu, false, n, t32);
  CHECK(counts, d64.ratio <= 1.0,
        "%s on %s: step %d '%s' (%s on %s): '%s'[%lld] = %.9g, f64 reference %.9g: %.3g x the tolerance (the f32 one "
        "+ %.3g relative)",
        label, backend, s, step->name, tf_op_name(step->op), tf_dtype_name(b->dtype), b->name, (long long)d64.at,
        d64.at >= 0 ? y[d64.at] : 0.0, d64.at >= 0 ? reference[d64.at] : 0.0, d64.ratio, 1.01 * u);
  CHECK(counts, d32.ratio <= 1.0,
        "%s on %s: step %d '%s' (%s on %s): '%s'[%lld] = %.9g, f32 CPU kernel %.9g: %.3g x the tolerance (the f32 "
        "one + %.3g relative)",
        label, backend, s, step->name, tf_op_name(step->op), tf_dtype_name(b->dtype), b->name, (long long)d32.at,
        d32.at >= 0 ? y[d32.at] : 0.0, d32.at >= 0 ? cpu[d32.at] : 0.0, d32.ratio, 2.02 * u);
  free(y);
  errors->worst64 = fmax(errors->worst64, d64.ratio);
  errors->abs64 = fmax(errors->abs64, d64.abs);
  errors->scaled64 = fmax(errors->scaled64, d64.magnitude > 0 ? d64.abs / d64.magnitude : 0);
  errors->worst32 = fmax(errors->worst32, d32.ratio);
}

void conf_record_step(conf_coverage *coverage, conf_result *result, const tf_plan *plan, int32_t s,
                      const conf_step_errors *errors) {
  const tf_plan_step *step = &plan->steps[s];
  const tf_op op = step->op;
  coverage->steps[op]++;
  coverage->worst64[op] = fmax(coverage->worst64[op], errors->worst64);
  coverage->abs64[op] = fmax(coverage->abs64[op], errors->abs64);
  coverage->scaled64[op] = fmax(coverage->scaled64[op], errors->scaled64);
  coverage->worst32[op] = fmax(coverage->worst32[op], errors->worst32);
  if (errors->worst64 > result->worst64) {
    result->worst64 = errors->worst64;
    snprintf(result->where64, sizeof(result->where64), "%s", tf_op_name(op));
  }
  if (errors->worst32 > result->worst32) {
    result->worst32 = errors->worst32;
    snprintf(result->where32, sizeof(result->where32), "%s", tf_op_name(op));
  }
}

void conf_compare_end(tf_test_counts *counts, const char *backend, const char *label, const char *stage,
                      const tf_plan_buffer *b, const void *got, const void *cpu, conf_tolerance tolerance,
                      conf_result *result) {
  diff d = {0, 0, 0, -1};
  if (b->dtype != TF_F32) {
    d.at = first_difference(b, got, cpu);
    d.ratio = d.at >= 0 ? INFINITY : 0;
    CHECK(counts, d.at < 0, "%s on %s, end to end after the %s: %s '%s' differs from the f32 CPU kernels' at %lld",
          label, backend, stage, tf_dtype_name(b->dtype), b->name, (long long)d.at);
  } else {
    d = compare(got, cpu, false, elements(b), tolerance);
    CHECK(counts, d.ratio <= 1.0,
          "%s on %s, end to end after the %s: '%s'[%lld] = %.9g, f32 CPU kernels %.9g (%.3g x the tolerance atol "
          "%.0e%s + rtol %.0e x |cpu|)",
          label, backend, stage, b->name, (long long)d.at, d.at >= 0 ? ((const float *)got)[d.at] : 0.0,
          d.at >= 0 ? ((const float *)cpu)[d.at] : 0.0, d.ratio, tolerance.atol,
          tolerance.floor >= 0 ? " x max(1, max |cpu|)" : "", tolerance.rtol);
  }
  if (d.ratio > result->worst_end) {
    result->worst_end = d.ratio;
    snprintf(result->where_end, sizeof(result->where_end), "%s after the %s", b->name, stage);
  }
}

void conf_print_result(bool ok, const char *backend, const char *label, const conf_result *result) {
  printf("%-4s %-6s %-50s ", ok ? "ok" : "FAIL", backend, label);
  if (result->note[0]) {
    printf("%s\n", result->note);
    return;
  }
  printf("%3d steps; vs f64 %.3f (%s), vs cpu f32 %.3f (%s); end to end %.3f (%s)\n", result->steps, result->worst64,
         result->where64[0] ? result->where64 : "-", result->worst32, result->where32[0] ? result->where32 : "-",
         result->worst_end, result->where_end[0] ? result->where_end : "-");
}

void conf_check_coverage(tf_test_counts *counts, const conf_backend *backend, const conf_coverage *coverage) {
  printf("\nconformance on %s: every op of the op table (core/ops.c, %d ops) as plan steps; against the f64 "
         "reference: the largest |error|, |error| / max |reference| and the worst fraction of the tolerance (atol x "
         "max(floor, max |reference|) + rtol x |reference|); against the f32 CPU kernel: the worst fraction of its "
         "tolerance\n",
         backend->name, (int)TF_OP_COUNT);
  printf("  %-22s %6s %10s %10s %8s %8s %8s %6s %8s\n", "op", "steps", "max|err|", "err/scale", "f64 tol", "atol",
         "rtol", "floor", "f32 tol");
  char missing[2048] = "";
  int32_t ran = 0, claimed = 0;
  for (int op = 0; op < TF_OP_COUNT; op++) {
    const char *name = tf_op_name((tf_op)op);
    const bool claims = !backend->claims || backend->claims((tf_op)op);
    const conf_tolerance t = conf_tolerance_f64((tf_op)op);
    printf("  %-22s %6d %10.2e %10.2e %8.3f %8.0e %8.1e %6g %8.3f%s\n", name, coverage->steps[op], coverage->abs64[op],
           coverage->scaled64[op], coverage->worst64[op], t.atol, t.rtol, t.floor, coverage->worst32[op],
           !coverage->in_table[op] ? "  NO CASE"
           : !claims               ? "  (not claimed by the backend)"
           : !coverage->steps[op]  ? "  NEVER RAN"
                                   : "");
    CHECK(counts, tf_cpu_kernel_get((tf_op)op, true) != NULL, "op %s has no f64 reference kernel", name);
    CHECK(counts, coverage->in_table[op], "op %s has no case: no plan of tests/conformance/cases.c holds it", name);
    claimed += claims;
    ran += coverage->steps[op] > 0;
    if (claims && coverage->steps[op] == 0) {
      CHECK(counts, false, "op %s never ran on %s", name, backend->name);
      size_t used = strlen(missing);
      snprintf(missing + used, sizeof(missing) - used, "%s%s", used ? ", " : "", name);
    }
  }
  printf("%s: %d of %d ops ran (%d claimed); %d cases refused as expected, %d skipped (an op not claimed)%s%s\n",
         backend->name, ran, (int)TF_OP_COUNT, claimed, coverage->refused, coverage->skipped,
         missing[0] ? "; never ran: " : "", missing);
}

void conf_check_half_coverage(tf_test_counts *counts, const conf_backend *backend, const conf_coverage *coverage) {
  const char *half = getenv("TIGHTFIT_CONFORMANCE_HALF");
  if (half && strcmp(half, "0") == 0)
    return;
  const tf_target target = tf_target_default(backend->target);
  int32_t ops = 0, steps = 0;
  for (int op = 0; op < TF_OP_COUNT; op++) {
    steps += coverage->half_steps[op];
    if (!tf_target_half_kernel(&target, (tf_op)op) || tf_op_moves_elements((tf_op)op) || !coverage->in_table[op])
      continue;
    ops++;
    CHECK(counts, coverage->half_steps[op] > 0, "%s: a half kernel of the %s target, never run on half data",
          tf_op_name((tf_op)op), backend->name);
  }
  printf("%s half kernels: %d ops, %d steps on f16/bf16 data checked step by step\n", backend->name, ops, steps);
}
