/* The op conformance suite (in the spirit of ggml's test-backend-ops): one table of op cases
 * (cases.c) run on a backend, every step of each case's compiled plan checked against the float64
 * CPU reference kernels, and at the end a check that every op of the op table (core/ops.c,
 * TF_OP_COUNT) ran on that backend.
 *
 * A case is a small graph whose floating operands are parameters (loss = sum(op(...) x probe) with a
 * random probe, or a loss op), compiled into a training plan for the backend's target. Each case is
 * checked three ways (harness.c):
 *   1. step by step: every step (forward, backward, accumulate, global norm, update, zero) runs alone
 *      on the backend from the reference state; its outputs and in-place updates are compared with
 *      the f64 kernel on the same (float) inputs and with the f32 CPU kernel, then the f64 results
 *      (rounded to float) are carried on, so an error shows at the step that makes it;
 *   2. end to end: the plan runs as a session runs it (forward prefix, `accumulate` micro-batches on
 *      both io halves, the optimizer block) and its outputs, loss, gradients, parameters and
 *      optimizer state are compared with the same plan run by the f32 CPU kernels on the host;
 *   3. the inference plan of the same graph, end to end (step by step too for a case with nothing to
 *      train, which has no training plan).
 * Tolerances are in tolerance.c: per op for f32 data, bitwise for every other dtype and for a
 * cast's f32 output against the f32 CPU kernel. A case whose plan holds an op the backend does not claim is skipped on
 * it (and says so); one that needs what the backend refuses must be refused. Drivers: test_conformance_cpu,
 * test_vulkan_ops, test_cuda_ops. */
#ifndef TIGHTFIT_TESTS_CONFORMANCE_CONFORMANCE_H
#define TIGHTFIT_TESTS_CONFORMANCE_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "tightfit/graph.h"
#include "tightfit/plan_types.h"
#include "tightfit/status.h"
#include "tightfit/target.h"

/* What a case needs that not every backend has. A backend lists what it refuses; a case needing
 * one of those must be refused at session creation (TF_ERR_UNSUPPORTED), and that is checked. */
enum {
  CONF_NEEDS_I64 = 1u << 0,        /* i64 ids or labels */
  CONF_NEEDS_HALF = 1u << 1,       /* f16 or bf16 tensors */
  CONF_NEEDS_WIDE_HEADS = 1u << 2, /* attention heads wider than 128 */
};

/* The backend under test. */
typedef struct conf_backend {
  const char *name; /* as tf_backend_find() knows it: "cpu", "vulkan", "cuda" */
  tf_target_kind target;
  bool (*claims)(tf_op op); /* the ops it says it has a kernel for; NULL: every op */
  uint32_t refuses;         /* CONF_NEEDS_* it refuses */
  /* Set: the backend is checked without a device, each plan's steps only through this, the
   * backend's own acceptance of a step (NULL: accepted; else a status the harness frees); nothing
   * runs, and a step accepted counts as covered (a half step's half coverage included). */
  tf_status (*check_step)(const tf_plan *plan, int32_t step);
  /* Units u max(1, max |ref|) its steps of `op` on half data may add by rounding intermediate terms
   * to the half type (NULL: none; conf_cuda_rounded_terms for the cuda backend). */
  double (*rounded_terms)(tf_op op);
  /* A device from the backend's open_shared that every case's state borrows (NULL: each case opens
   * its own): the pipelines a case compiles are there for the next (test_vulkan_ops). */
  void *shared;
} conf_backend;

/* Inputs and labels: f32 normal; integers in [0, int_high), every 7th replaced by int_special when
 * `special` is set. With `patterns` (the casts' bit-exactness cases), f32 inputs hold the special
 * values of conf_special_f32 (signed zeros, infinities, NaNs, overflow, ties, f16 and f32
 * subnormals), then random bit patterns; f16 and bf16 inputs hold element k = bits k mod 65536
 * (every 16-bit value once from 65536 elements on); without, random bits. Seed 0 means seed 1. */
typedef struct conf_data {
  uint64_t seed;
  int32_t int_high, int_special;
  bool special;
  bool patterns;
} conf_data;

/* The f32 bit patterns an f32 input starts with under conf_data.patterns (harness.c). */
extern const uint32_t conf_special_f32[];
extern const int32_t conf_special_f32_count;

/* The end-to-end tolerance of a case (tolerance.c): test_vulkan_ops' families, |backend - cpu| <=
 * atol + rtol |cpu|, and for sums of tens of thousands of terms the same scaled by max(1, max |cpu|). */
typedef enum conf_family { CONF_SUMS = 0, CONF_MATH, CONF_EXACT, CONF_LONG_SUMS } conf_family;

/* The training configuration of a case: SGD with momentum 0.9, weight decay 0.01, clipping at 0.5
 * and 2 accumulated micro-batches; or AdamW (lr 1e-2, weight decay 0.01, 1 micro-batch), with f32 or
 * 8-bit moments (adamw8bit). */
typedef enum conf_optimizer { CONF_SGD = 0, CONF_ADAMW, CONF_ADAMW8BIT } conf_optimizer;

typedef struct conf_settings {
  conf_data data;
  conf_optimizer optimizer;
  conf_family family;
  bool forward_only; /* nothing to train (e.g. through an integer cast): the inference plan only */
  uint32_t needs;    /* CONF_NEEDS_* */
  tf_dtype storage;  /* f32; f16/bf16: the row run on half data (conf_run_table_half) */
  tf_dtype params;   /* f32; f16/bf16: parameters stored half with f32 masters (compile param_dtype) */
  bool gelu_pair;    /* compiled with gelu_pair on for every target (the cpu target's default only) */
} conf_settings;

/* Per op, on one backend: plan steps run and the worst errors seen. */
typedef struct conf_coverage {
  bool in_table[TF_OP_COUNT]; /* some case's plan holds the op */
  int32_t steps[TF_OP_COUNT];
  int32_t half_steps[TF_OP_COUNT]; /* ... of them computed on f16/bf16 data (a half kernel) */
  double worst64[TF_OP_COUNT];     /* vs the f64 reference, a fraction of the tolerance */
  double abs64[TF_OP_COUNT];       /* ... the largest |error| */
  double scaled64[TF_OP_COUNT];    /* ... the largest |error| / max |reference| of its buffer */
  double worst32[TF_OP_COUNT];     /* vs the f32 CPU kernel, a fraction of the tolerance */
  int32_t refused;                 /* cases refused as expected */
  int32_t skipped;                 /* cases skipped: an op the backend does not claim */
} conf_coverage;

/* Checks `graph` (destroyed here) on `backend`: the three checks above, one line printed. */
void conf_check_graph(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage, const char *label,
                      tf_graph *graph, const conf_settings *settings);

/* Runs every case of the table (cases.c) on `backend`. */
void conf_run_table(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage);
/* Runs again the table's rows whose label begins with `prefix`, those a half run takes (not the cast
 * rows nor rows with nothing to train): on f32 data (`storage` TF_F32), or on f16/bf16 as
 * conf_run_table_half does (nothing under TIGHTFIT_CONFORMANCE_HALF=0); each label followed by
 * "(note)". A driver's second pass over some rows under another setting (test_vulkan_ops:
 * attention without its tiles). */
void conf_run_rows(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage, const char *prefix,
                   tf_dtype storage, const char *note);
/* Runs the table's rows on half data (`storage` f16 or bf16): each float operand cast to it before
 * the op, the result widened after it (compiler/half_ops.c turns that into f32 arithmetic between
 * casts), with the same three checks; not the cast rows, nor rows with nothing to train. With
 * TIGHTFIT_CONFORMANCE_HALF=0 in the environment it runs nothing and says so (the reruns of the
 * suite that check something else: no subgroups, compute-sanitizer). */
void conf_run_table_half(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage,
                         tf_dtype storage);

/* Prints the per-op table of what ran and the worst errors, and fails for every op in
 * [0, TF_OP_COUNT) that no case holds, and every op the backend claims that never ran on it. */
void conf_check_coverage(tf_test_counts *counts, const conf_backend *backend, const conf_coverage *coverage);
/* Fails for every op the backend's target runs on half data itself (tf_target_half_kernel; the
 * layout moves aside) that no step of the rows on half data ran as such, step by step against the
 * f64 reference; prints how many did. Nothing under TIGHTFIT_CONFORMANCE_HALF=0. */
void conf_check_half_coverage(tf_test_counts *counts, const conf_backend *backend, const conf_coverage *coverage);

/* ---- tolerances (tolerance.c) ---- */

/* Element i of a buffer passes when |y - ref| <= atol * scale + rtol * |ref|, scale being
 * max(floor, max |ref| over the buffer), or 1 when floor < 0. */
typedef struct conf_tolerance {
  double atol, rtol, floor;
} conf_tolerance;

/* f32 output of `op` against the f64 reference on the same inputs. */
conf_tolerance conf_tolerance_f64(tf_op op);
/* f32 output of `op` against the f32 CPU kernel on the same inputs. */
conf_tolerance conf_tolerance_f32(tf_op op);
/* A case's end-to-end results against the f32 CPU kernels. */
conf_tolerance conf_tolerance_family(conf_family family);
/* ... for a case run on half data (conf_settings.storage f16 or bf16): the family's plus 4 units of
 * the half type, scaled by max(1, max |cpu|); the family's own for f32. */
conf_tolerance conf_tolerance_half(conf_family family, tf_dtype storage);
/* conf_backend.rounded_terms of the cuda backend: its tensor-core attention rounds P and dS. */
double conf_cuda_rounded_terms(tf_op op);

#endif
