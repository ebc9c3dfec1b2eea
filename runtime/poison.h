/* Poisoned regions (TIGHTFIT_POISON_ARENA=1): a debugging switch that fills a session's arena and
 * input region with NaNs before the first step, instead of the zeros every backend allocates.
 * Nothing may read those bytes before a step or an upload writes them (the arena is reused by
 * liveness, so on a device they hold the last step's leftovers, and the gaps between buffers are
 * never written); a kernel that does (a product reading C with beta 0, a tile or vector load past its
 * operand) computes NaN, which the parity tests see on the first step. The parameters, gradients and
 * optimizer state keep their zeros: accumulated gradients and optimizer moments start there. */
#ifndef TIGHTFIT_RUNTIME_POISON_H
#define TIGHTFIT_RUNTIME_POISON_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "tightfit/plan.h"
#include "tightfit/status.h"

/* The word the regions are filled with: a quiet NaN as f32, and each of its halves (0x7fc0) a quiet
 * NaN as bf16 and as f16; as an i32 id or label 2,143,322,048, out of every table's range. */
#define TF_POISON_WORD 0x7fc07fc0u

/* Where TIGHTFIT_POISON_ARENA=1 (unset or "0": nothing; any other value an error), fills the arena
 * and input regions of `plan` (those allocated: `regions[r]` not NULL) with TF_POISON_WORD through
 * the backend's upload, a MiB at a time. Sessions call it after allocating, and so does the
 * conformance harness. */
tf_status tf_poison_if_asked(const tf_backend_vtable *backend, void *state, const tf_plan *plan,
                             void *const regions[TF_REGION_COUNT]);

#endif
