/* The runtime: a session loads a plan onto a backend, allocates each region once, initialises
 * parameters, and runs the plan's steps. After tf_session_create() returns, no device memory is
 * allocated until tf_session_destroy(): the session counts every allocation so that tests (and
 * `tightfit train --check-memory`) can prove it. */
#ifndef TIGHTFIT_RUNTIME_H
#define TIGHTFIT_RUNTIME_H

#include "tightfit/plan.h"
#include "tightfit/target.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_session tf_session;

typedef struct tf_session_options {
  const char *backend; /* "cpu" (default), "vulkan", "cuda" */
  int32_t device;      /* device index */
  int32_t threads;     /* CPU threads; 0: the plan's */
  uint64_t seed;       /* parameter initialisation and dropout */
  /* where external safetensors initialisers are looked up first (NULL: "."), then in the graph's
   * folder the plan recorded (runtime/weights_path.c) */
  const char *weights_dir;
  /* f16 plans: optimizer steps in a row without overflow after which the loss scale doubles (0:
   * 2000, torch.cuda.amp.GradScaler's growth_interval) */
  int64_t loss_scale_growth_interval;
  /* A data-parallel job's rank (0 .. the plan's ranks - 1; 0 for one process): a ZeRO plan's session
   * holds and updates that rank's shard of the optimizer state only (tf_plan.zero). */
  int32_t rank;
} tf_session_options;

typedef struct tf_session_memory {
  int64_t planned_bytes;            /* tf_plan_total_bytes(plan) */
  int64_t allocated_bytes;          /* what the session asked the backend for */
  int64_t allocations;              /* device allocations made in tf_session_create() */
  int64_t allocations_after_create; /* must stay 0 */
} tf_session_memory;

/* Options with defaults (cpu, device 0, seed 0). */
tf_session_options tf_session_options_default(void);
/* Creates a session; the plan must outlive it. The caller destroys it. */
tf_status tf_session_create(const tf_plan *plan, const tf_session_options *options, tf_session **out) TF_MUST_USE;
void tf_session_destroy(tf_session *session);
tf_session_memory tf_session_memory_use(const tf_session *session);
/* How many of the plan's host steps the backend runs itself, ordered among its steps with no host
 * wait (an offloaded activation's copies, where the backend takes them: Vulkan, CUDA); 0 on the cpu. */
int32_t tf_session_host_steps_on_device(const tf_session *session);
/* What the device measured (Vulkan, CUDA); TF_ERR_UNSUPPORTED for a backend that cannot say (cpu). */
tf_status tf_session_device_memory(const tf_session *session, tf_device_memory *out) TF_MUST_USE;
/* Host memory of `bytes` (zeroed) that the session's device copies from at the link's full speed
 * (CUDA: page-locked), for a caller's staging of inputs (tf_feed_stage_in); NULL with *host NULL
 * when the backend has none. Give it back with tf_session_free_host before destroying the session. */
tf_status tf_session_alloc_host(tf_session *session, int64_t bytes, void **host) TF_MUST_USE;
void tf_session_free_host(tf_session *session, void *host);
const tf_plan *tf_session_plan(const tf_session *session);

/* Copies host data into buffer `name` (an input, label or parameter; in the io region, into the
 * half the next micro-batch uses). `bytes` must equal the buffer's size. A half parameter's f32
 * master (compile --param-dtype) takes the written values too, widened. */
tf_status tf_session_write(tf_session *session, const char *name, const void *data, int64_t bytes) TF_MUST_USE;
/* Checks host data about to be written into input or label `name` as the data feed checks a file
 * (runtime/data_check.h): floats finite, ids and labels inside the embedding's rows or the loss's
 * classes; an error names `name`, the sample and element, the value and the bound. Other buffers
 * pass unchecked. tf_session_write itself copies bytes as they are. */
tf_status tf_session_check_input(const tf_session *session, const char *name, const void *data,
                                 int64_t bytes) TF_MUST_USE;
/* Copies buffer `name` to the host. */
tf_status tf_session_read(tf_session *session, const char *name, void *data, int64_t bytes) TF_MUST_USE;

/* Copies bytes [offset, offset + bytes) of plan buffer `buffer` (an index into the plan's buffers)
 * to the host; allocates nothing. */
tf_status tf_session_read_range(tf_session *session, int32_t buffer, int64_t offset, void *data,
                                int64_t bytes) TF_MUST_USE;
/* Copies `bytes` of host data to bytes [offset, offset + bytes) of plan buffer `buffer`. */
tf_status tf_session_write_range(tf_session *session, int32_t buffer, int64_t offset, const void *data,
                                 int64_t bytes) TF_MUST_USE;

/* Where tf_session_find_nonfinite() found a NaN or an infinity. */
typedef struct tf_nonfinite {
  int32_t buffer; /* the plan buffer; -1 when every buffer checked is finite */
  int64_t index;  /* the element in it */
  double value;   /* NAN, INFINITY or -INFINITY */
} tf_nonfinite;

/* Scans, in plan order, every floating-point buffer whose role is in `roles` (a mask of
 * 1u << TF_ROLE_*) for the first NaN or infinity, reading the device in fixed chunks through the
 * caller's stack: no allocation, so it may run between training steps. */
tf_status tf_session_find_nonfinite(tf_session *session, uint32_t roles, tf_nonfinite *out) TF_MUST_USE;

/* Runs the micro-batch block once on the inputs written since the last call; *loss gets the loss
 * (NAN when the plan has none). Alternates the io halves; refuses, naming it, an input or label not
 * written since the micro-step that last read its half (it would train on zeros or an old batch). */
tf_status tf_session_micro_step(tf_session *session, double *loss) TF_MUST_USE;
/* Runs the optimizer block once (after `accumulate` micro-steps). When the plan has an overflow
 * check (f16 plans, plans that clip) and a gradient is not finite, the update is skipped:
 * parameters and optimizer state stay bit for bit as they were; tf_session_scaling() says so. An
 * f16 plan then halves its loss scale, and doubles it after the growth interval of good steps. */
tf_status tf_session_optimizer_step(tf_session *session) TF_MUST_USE;
/* Runs only the forward steps (evaluation): the loss and outputs are readable afterwards. Refuses,
 * as a micro-step does, an input or label not written since a micro-step read its half; may repeat. */
tf_status tf_session_forward(tf_session *session, double *loss) TF_MUST_USE;
/* Optimizer steps and micro-steps done so far. */
int64_t tf_session_optimizer_steps(const tf_session *session);
int64_t tf_session_micro_steps(const tf_session *session);
/* Sets the counters (checkpoint resume). */
void tf_session_set_counters(tf_session *session, int64_t optimizer_steps, int64_t micro_steps);

/* Dynamic loss scaling and skipped updates, as of the last optimizer step. */
typedef struct tf_session_scaling {
  bool scaled;             /* the plan scales its loss (f16); else the scale stays 1 */
  int32_t loss_scale_log2; /* the loss scale the next step uses is 2^loss_scale_log2 */
  int32_t previous_log2;   /* the scale the last optimizer step used */
  int64_t good_steps;      /* updates since the scale last changed or an update was skipped */
  int64_t skipped_steps;   /* optimizer steps whose update was skipped, in all */
  bool last_skipped;       /* the last optimizer step's update was skipped (a gradient not finite) */
} tf_session_scaling;
tf_session_scaling tf_session_scaling_state(const tf_session *session);
/* Restores the scaling state (checkpoint resume): the scale 2^loss_scale_log2 (within
 * TF_LOSS_SCALE_MIN_LOG2..MAX_LOG2; ignored by plans that do not scale), the good-step run and the
 * skipped count; TF_ERR_INVALID_ARGUMENT when out of range. */
tf_status tf_session_set_scaling(tf_session *session, int32_t loss_scale_log2, int64_t good_steps,
                                 int64_t skipped_steps) TF_MUST_USE;

/* Whether the session holds buffer `buffer`: every buffer, but under ZeRO the shards of the other
 * ranks (tf_plan_buffer.held_by), which it neither initialises, reads nor writes. */
bool tf_session_holds(const tf_session *session, int32_t buffer);
/* Where the session reads a buffer another rank holds: `read` fills data with its `bytes` (a ZeRO
 * job's rank 0 gathers the shards so to save a checkpoint, tools/dist.c). Without one (the default),
 * such a read is refused, naming the rank that holds it. */
typedef tf_status (*tf_session_remote_read)(void *context, int32_t buffer, void *data, int64_t bytes);
void tf_session_set_remote_read(tf_session *session, tf_session_remote_read read, void *context);
/* Called in each micro-batch block after the steps given to tf_session_set_pauses, the device
 * synchronised (a ZeRO stage-2 job reduces there the gradient buckets whose last step it was). */
typedef tf_status (*tf_session_pause)(void *context, int32_t step);
/* Pauses each micro-batch block after steps after[0, n) (ascending, inside the block; copied) to call
 * `pause`; n 0: no pauses. A host step of the block placed before step after[i] + 1 (host_at) runs
 * before that pause. */
tf_status tf_session_set_pauses(tf_session *session, const int32_t *after, int32_t n, tf_session_pause pause,
                                void *context) TF_MUST_USE;

/* Saves parameters, optimizer state and counters to a safetensors checkpoint (atomically:
 * temporary file, fsync, rename); `metadata` adds "key=value" pairs (may be NULL). */
tf_status tf_session_save(tf_session *session, const char *path, const char *const *metadata,
                          int32_t n_metadata) TF_MUST_USE;
/* Loads a checkpoint saved by any backend: every parameter and optimizer state buffer must be
 * present with its shape; counters are restored. */
tf_status tf_session_load(tf_session *session, const char *path) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
