/* The host steps of a plan whose optimizer state (and gradients) are offloaded (compiler/offload.c):
 * the host region that holds what they keep, and the steps run on the host's cores with the CPU
 * kernels, each where the plan places it among the device steps (an activation's copy may be the
 * backend's to run, tf_host_steps_hand_copies). Each host step's device operands
 * are copied into a staging buffer (allocated once, at create: no allocation while steps run), the
 * kernel runs on them and on the host region in place, and the operands it writes are copied back. */
#ifndef TIGHTFIT_RUNTIME_HOST_STEPS_H
#define TIGHTFIT_RUNTIME_HOST_STEPS_H

#include "backends/backend.h"
#include "kernels/cpu/kernels.h"
#include "tightfit/plan.h"

typedef struct tf_host_steps {
  const tf_backend_vtable *backend; /* whose page-locked memory region and staging are, where it has some */
  void *state;
  void *region;  /* host_bytes, zeroed (the state's initial value) */
  void *staging; /* the largest host step's device operands, each 64-byte aligned */
  int64_t staging_bytes;
  bool region_from_backend, staging_from_backend; /* from tf_backend_vtable.alloc_host, else ordinary memory */
  int64_t pinned_bytes;   /* what of region and staging the backend gave (CUDA: page-locked), else 0 */
  tf_cpu_kernel *kernels; /* one per host step */
  bool *by_backend;       /* per host step: run by the backend within its steps (tf_host_steps_hand_copies) */
  int32_t n_by_backend;
  tf_cpu_tensor *tensors; /* scratch for one step's operand tensors */
} tf_host_steps;

/* Allocates the host region and the staging buffer (the backend's page-locked memory where it has
 * some: tf_backend_vtable.alloc_host) and finds each host step's CPU kernel; a plan without host
 * steps needs nothing (all NULL). An op with no CPU kernel, or a computing step's operand in half
 * precision, is refused. */
tf_status tf_host_steps_create(const tf_plan *plan, const tf_backend_vtable *backend, void *state,
                               tf_host_steps *out) TF_MUST_USE;
/* Whether host step `index` only copies an offloaded activation between the host region and a device
 * region (a micro-batch block reshape of one operand to one of equal bytes; compiler/offload_activations.c). */
bool tf_host_step_is_copy(const tf_plan *plan, int32_t index);
/* Hands the copies (tf_host_step_is_copy) that share their place with no other kind of host step to
 * a backend that takes them (tf_backend_vtable.take_host_copies) when the host region is its memory,
 * and marks them in by_backend; the caller then skips them. Before the backend's prepare. */
tf_status tf_host_steps_hand_copies(tf_host_steps *h, const tf_plan *plan) TF_MUST_USE;
/* Frees them; before the backend's state is destroyed. */
void tf_host_steps_destroy(tf_host_steps *h);
/* Runs host step `index`: its device operands down from the backend's regions, the kernel, the
 * written ones up again. The caller has synchronised the device steps before it. */
tf_status tf_host_step_run(const tf_host_steps *h, const tf_plan *plan, int32_t index, const tf_backend_vtable *backend,
                           void *state, void *const regions[TF_REGION_COUNT],
                           const tf_cpu_context *context) TF_MUST_USE;

#endif
