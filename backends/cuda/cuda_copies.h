/* An offloaded activation's copies run by the CUDA backend among its steps (the backend contract's
 * take_host_copies): where each runs, and where the steps must wait for them. Plain C over a
 * tf_plan (no CUDA): the tests check the schedule without a GPU.
 *
 * A copy's place is its host step's (host_at), except where it falls inside a fused group's span
 * (the launch step does every member's work): a copy down then runs after the span, a copy back
 * before it, when no step in between touches the bytes it moves; else the group is not kept.
 *
 * A copy back (host region -> device) runs on the compute stream at its place: the step after it
 * reads what it writes. A copy down (device -> host region) may run on a side stream beside the
 * steps after it (`beside`; not when the step right after it writes its source's bytes, or launches
 * a kept group one of whose members does), and the compute stream waits for the copies down issued
 * so far (one event, the side stream being in order) before
 *   - the first step from its place on that writes bytes its source lies in (outputs, operands
 *     updated in place, the workspace), or the first step of a kept group's span holding one:
 *     join_before;
 *   - a copy back (it may read the host bytes a copy down is still writing);
 *   - the end of every run (cuda_graphs.c: a graph captures no open fork, and what a range wrote is
 *     there when it returns). */
#ifndef TIGHTFIT_BACKENDS_CUDA_CUDA_COPIES_H
#define TIGHTFIT_BACKENDS_CUDA_CUDA_COPIES_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cuda/cuda_fuse.h"
#include "tightfit/plan.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_cuda_copy {
  int32_t host_step; /* its index in plan->host_steps */
  int32_t at;        /* runs before device step `at`; at == micro_steps: after the block's last step */
  bool down;         /* device -> host region */
  bool beside;       /* a copy down that may run beside the steps after it (else in order, as a copy back) */
} tf_cuda_copy;

typedef struct tf_cuda_copy_schedule {
  tf_cuda_copy *copies; /* in run order: by place, then in host-step order */
  int32_t n_copies;
  int32_t *first;    /* the copies before device step a are [first[a], first[a + 1]), a in 0..micro_steps */
  bool *join_before; /* per micro-batch step: wait for the copies down before it (it writes a source's bytes) */
} tf_cuda_copy_schedule;

/* The schedule of the host steps marked in `taken` (n_host_steps flags; each a copy of the
 * micro-batch block, runtime/host_steps.h) beside the fused groups `groups` (cuda_fuse.h): kept[g]
 * says whether group g stays. The caller frees it with tf_cuda_copy_schedule_free. */
tf_status tf_cuda_copy_schedule_make(const tf_plan *plan, const bool *taken, const tf_cuda_fusion *groups,
                                     int32_t n_groups, bool *kept, tf_cuda_copy_schedule *out) TF_MUST_USE;
void tf_cuda_copy_schedule_free(tf_cuda_copy_schedule *schedule);
/* Whether device step `step` writes bytes of `buffer` (an output, an operand updated in place, or
 * its workspace, by region and byte range); with `reads`, whether it reads or writes any. */
bool tf_cuda_step_touches_bytes_of(const tf_plan *plan, int32_t step, int32_t buffer, bool reads);

#ifdef __cplusplus
}
#endif

#endif
