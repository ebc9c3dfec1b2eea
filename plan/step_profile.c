/* The step profile's tables (plan/step_profile.h). */
#include "plan/step_profile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t step;
  double ms;
} step_time;

static int slower_first(const void *a, const void *b) {
  const double x = ((const step_time *)a)->ms, y = ((const step_time *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void write_ops(const tf_plan *plan, const double *step_ms, double total, FILE *out) {
  double by_op[TF_OP_COUNT] = {0};
  int32_t count[TF_OP_COUNT] = {0};
  for (int32_t i = 0; i < plan->n_steps; i++) {
    const tf_op op = plan->steps[i].op;
    if (op >= 0 && op < TF_OP_COUNT) {
      by_op[op] += step_ms[i];
      count[op]++;
    }
  }
  fprintf(out, "%-34s %12s %8s %7s\n", "op", "total ms", "steps", "share");
  for (;;) { /* ops by total, slowest first */
    int best = -1;
    for (int op = 0; op < TF_OP_COUNT; op++)
      if (count[op] && (best < 0 || by_op[op] > by_op[best]))
        best = op;
    if (best < 0)
      break;
    fprintf(out, "%-34s %12.3f %8d %6.1f%%\n", tf_op_name((tf_op)best), by_op[best], count[best],
            total > 0 ? 100.0 * by_op[best] / total : 0.0);
    count[best] = 0;
  }
}

/* A product's shape as the profile prints it: "[M,K]^T x [K,N] f32" (A's and B's shapes as stored,
 * ^T where the step reads one transposed, C's type). */
static void product_shape(const tf_plan *plan, const tf_plan_step *step, char *text, size_t size) {
  size_t used = 0;
  for (int k = 0; k < 2 && used < size; k++) {
    const tf_plan_buffer *b = &plan->buffers[step->inputs[step->n_inputs - 2 + k]];
    const bool transposed = k == 0 ? step->attrs.u.matmul.transpose_a : step->attrs.u.matmul.transpose_b;
    used += (size_t)snprintf(text + used, size - used, "%s[", k ? " x " : "");
    for (int32_t d = 0; d < b->rank && used < size; d++)
      used += (size_t)snprintf(text + used, size - used, "%s%lld", d ? "," : "", (long long)b->shape[d]);
    if (used < size)
      used += (size_t)snprintf(text + used, size - used, "]%s", transposed ? "^T" : "");
  }
  // the type of C: the output, or a matmul_accumulate's first input (it has no output)
  const int32_t c = step->n_outputs > 0 ? step->outputs[0] : step->inputs[0];
  if (used < size)
    snprintf(text + used, size - used, " %s", tf_dtype_name(plan->buffers[c].dtype));
}

static bool is_product(const tf_plan_step *step) {
  return (step->op == TF_OP_MATMUL || step->op == TF_OP_MATMUL_ACCUMULATE) && step->n_inputs >= 2 &&
         step->attrs.kind == TF_ATTR_MATMUL;
}

typedef struct product_group {
  char shape[160];
  tf_op op;
  int32_t steps;
  double ms, flops;
} product_group;

/* "# products by shape": the matmul steps grouped by shape, slowest group first, with their rate
 * (the steps' estimated FLOPs times their timed calls over their time): where a backend's products
 * fall short of its peak. The 16 slowest groups are listed, the rest summed in a line. */
static void write_products(const tf_plan *plan, const double *step_ms, const int64_t *step_calls, FILE *out) {
  enum { SHOWN = 16 };
  product_group *groups = calloc((size_t)(plan->n_steps ? plan->n_steps : 1), sizeof(product_group));
  if (!groups)
    return;
  int32_t n = 0;
  for (int32_t i = 0; i < plan->n_steps; i++) {
    const tf_plan_step *step = &plan->steps[i];
    if (!is_product(step))
      continue;
    char shape[sizeof(groups[0].shape)];
    product_shape(plan, step, shape, sizeof(shape));
    int32_t g = 0;
    while (g < n && (groups[g].op != step->op || strcmp(groups[g].shape, shape) != 0))
      g++;
    if (g == n) {
      snprintf(groups[n].shape, sizeof(groups[n].shape), "%s", shape);
      groups[n++].op = step->op;
    }
    groups[g].steps++;
    groups[g].ms += step_ms[i];
    groups[g].flops += step->flops * (double)step_calls[i];
  }
  if (n > 0)
    fprintf(out, "# products by shape (A x B as stored, ^T: read transposed)\n%-18s %-44s %6s %11s %10s\n", "op",
            "shape", "steps", "total ms", "GFLOP/s");
  for (int32_t shown = 0; shown < SHOWN; shown++) { /* groups by total, slowest first */
    int32_t best = -1;
    for (int32_t g = 0; g < n; g++)
      if (groups[g].steps && (best < 0 || groups[g].ms > groups[best].ms))
        best = g;
    if (best < 0)
      break;
    const product_group *b = &groups[best];
    fprintf(out, "%-18s %-44s %6d %11.3f %10.1f\n", tf_op_name(b->op), b->shape, b->steps, b->ms,
            b->ms > 0 ? b->flops / (b->ms * 1e6) : 0.0);
    groups[best].steps = 0;
  }
  int32_t rest = 0, rest_steps = 0;
  double rest_ms = 0;
  for (int32_t g = 0; g < n; g++)
    if (groups[g].steps) {
      rest++;
      rest_steps += groups[g].steps;
      rest_ms += groups[g].ms;
    }
  if (rest)
    fprintf(out, "# and %d shapes more (%d steps, %.3f ms) not listed\n", rest, rest_steps, rest_ms);
  free(groups);
}

void tf_step_profile_write(const tf_plan *plan, const double *step_ms, const int64_t *step_calls, int64_t runs,
                           const char *backend, FILE *out) {
  double total = 0;
  for (int32_t i = 0; i < plan->n_steps; i++)
    total += step_ms[i];
  fprintf(out, "# tightfit %s profile: %d steps, %lld runs, %.3f ms in steps\n", backend, plan->n_steps,
          (long long)runs, total);
  write_ops(plan, step_ms, total, out);
  step_time *steps = malloc(sizeof(step_time) * (size_t)(plan->n_steps ? plan->n_steps : 1));
  if (!steps)
    return;
  for (int32_t i = 0; i < plan->n_steps; i++)
    steps[i] = (step_time){i, step_ms[i]};
  qsort(steps, (size_t)plan->n_steps, sizeof(step_time), slower_first);
  fprintf(out, "# slowest steps\n");
  for (int32_t k = 0; k < plan->n_steps && k < 25; k++) {
    const tf_plan_step *step = &plan->steps[steps[k].step];
    fprintf(out, "%5d %-28s %-40s %10.3f ms\n", steps[k].step, tf_op_name(step->op), step->name ? step->name : "?",
            steps[k].ms);
  }
  free(steps);
  write_products(plan, step_ms, step_calls, out);
}

void tf_step_profile_write_phases(const tf_plan *plan, const double *step_ms, const int64_t *step_calls, FILE *out) {
  double by_phase[TF_PHASE_COUNT] = {0}, total = 0;
  int32_t steps[TF_PHASE_COUNT] = {0};
  int64_t calls[TF_PHASE_COUNT] = {0};
  for (int32_t i = 0; i < plan->n_steps; i++) {
    const tf_phase phase = plan->steps[i].phase;
    total += step_ms[i];
    if (phase >= 0 && phase < TF_PHASE_COUNT) {
      by_phase[phase] += step_ms[i];
      steps[phase]++;
      calls[phase] += step_calls[i];
    }
  }
  fprintf(out, "# phases\n%-34s %12s %8s %8s %7s\n", "phase", "total ms", "steps", "calls", "share");
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++) /* in the order a step runs them */
    if (steps[phase])
      fprintf(out, "%-34s %12.3f %8d %8lld %6.1f%%\n", tf_phase_name((tf_phase)phase), by_phase[phase], steps[phase],
              (long long)calls[phase], total > 0 ? 100.0 * by_phase[phase] / total : 0.0);
}

FILE *tf_step_profile_open(const char *path) {
  if (!path || !path[0])
    return NULL;
  return strcmp(path, "-") == 0 ? stderr : fopen(path, "w");
}

void tf_step_profile_close(FILE *out) {
  if (out && out != stderr)
    fclose(out);
}

tf_status tf_step_profile_check(const char *variable, const char *path) {
  FILE *out = tf_step_profile_open(path);
  if (!out)
    return tf_status_new(TF_ERR_IO, "%s: cannot write the profile to '%s': %s", variable, path ? path : "",
                         strerror(errno));
  tf_step_profile_close(out);
  return NULL;
}
