/* The plan's data: plain structs that mirror schema/plan.fbs, filled by the FlatBuffers shim
 * (schema/plan_fb.h) and read by the runtime and backends. What a plan means, its invariants and
 * the functions over it (verify, load, save, sums) are in tightfit/plan.h. */
#ifndef TIGHTFIT_PLAN_TYPES_H
#define TIGHTFIT_PLAN_TYPES_H

#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_PLAN_VERSION 1
#define TF_PLAN_MAX_RANKS 1024 /* the processes of a data-parallel job, at most */

typedef enum tf_buffer_role {
  TF_ROLE_PARAMETER = 0,
  TF_ROLE_CONSTANT,
  TF_ROLE_GRADIENT,
  TF_ROLE_OPTIMIZER_STATE,
  TF_ROLE_INPUT,
  TF_ROLE_LABEL,
  TF_ROLE_ACTIVATION,
  TF_ROLE_WORKSPACE,
  TF_ROLE_STATE, /* running statistics: kept across steps, updated by the forward pass, not trained */
  TF_ROLE_COUNT
} tf_buffer_role;

typedef enum tf_phase {
  TF_PHASE_FORWARD = 0,
  TF_PHASE_RECOMPUTE,
  TF_PHASE_BACKWARD,
  TF_PHASE_ACCUMULATE,
  TF_PHASE_OPTIMIZER,
  TF_PHASE_COUNT
} tf_phase;

typedef struct tf_plan_buffer {
  char *name;
  tf_buffer_role role;
  tf_region region;
  int64_t offset; /* within the region, a multiple of the plan's alignment */
  int64_t bytes;  /* exactly dtype size x elements */
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int32_t first_step, last_step; /* arena: live from its writing step to its last reader; else -1, -1 */
  tf_init init;                  /* parameters and constants; strings owned by the plan */
  int32_t owner;                 /* gradients and optimizer state: the parameter buffer they belong to; else -1 */
  int32_t io_twin;               /* inputs and labels: the other half of the double buffer; else -1 */
  int32_t alias_of;              /* an output placed on its input, same offset and bytes: a reshape's (a
                                  * view; the input may live on) or one written over an input that dies
                                  * at that step (element-wise ops, cross_entropy_grad); else -1 */
  bool unbatched;                /* inputs and labels: the graph's first dim is not the micro-batch N (a
                                  * static shape, or a tensor shared by every sample): fed whole, one
                                  * file of exactly this shape; else false: shape[0] == micro_batch */
  int32_t held_by;               /* ZeRO (tf_plan.zero): 1 + the only rank that holds it (its shard of the
                                  * optimizer state, at stage 2 of the gradients too, laid out on the other
                                  * ranks' shards); 0: every rank (at stage 2 a gradient so is a bucket);
                                  * -1: no rank whole, its views (pieces) held one by a rank each */
  int32_t view_of;               /* ZeRO: 1 + the buffer P this one is bytes [view_at, view_at + bytes) of, a
                                  * flat range that one rank updates: on P's own memory (offset = P's
                                  * offset + view_at) when every rank holds P, else a piece of P held in
                                  * pieces (held_by -1), at its own offset in its rank's shard; 0: none */
  int64_t view_at;               /* with view_of: the range's first byte within view_of; else 0 */
} tf_plan_buffer;

typedef struct tf_plan_step {
  char *name; /* the graph node it comes from, for messages */
  tf_op op;
  tf_attrs attrs; /* reshape/expand targets hold numbers only */
  tf_phase phase;
  int32_t n_inputs;
  int32_t *inputs; /* buffer ids */
  int32_t n_outputs;
  int32_t outputs[TF_MAX_OUTPUTS];
  int32_t workspace; /* a workspace buffer live at this step only, or -1 */
  double flops;      /* estimated floating-point operations */
  int32_t held_by;   /* ZeRO: 1 + the only rank that runs it (the update of a parameter, or of a range of one,
                      * whose state it holds); 0: every rank */
} tf_plan_step;

typedef struct tf_plan_report {
  int64_t role_bytes[TF_ROLE_COUNT]; /* summed buffer bytes per role (arena roles without reuse) */
  int64_t arena_lower_bound;         /* max over steps of the bytes live at that step (aligned sizes) */
  int64_t arena_naive;               /* every arena buffer summed, no reuse */
  int32_t peak_step;                 /* the step where the arena's live bytes peak */
  int64_t *live_bytes;               /* n_steps entries: arena bytes live at each step (aligned sizes) */
  double flops[TF_PHASE_COUNT];      /* per micro-batch block (forward, recompute, backward, ...) */
  char *notes;                       /* the options chosen and why, one per line */
} tf_plan_report;

typedef struct tf_plan {
  uint32_t version;
  char *graph_name;
  char *target; /* "cpu", "vulkan", "cuda" */
  int64_t alignment;
  int64_t region_bytes[TF_REGION_COUNT];
  int32_t n_buffers;
  tf_plan_buffer *buffers;
  int32_t n_steps;
  tf_plan_step *steps;
  int32_t micro_steps;
  int32_t accumulate;                /* k >= 1 */
  int64_t micro_batch, global_batch; /* micro_batch x accumulate == global_batch */
  int32_t n_symbols;
  char **symbol_names;
  int64_t *symbol_values;
  bool training; /* false: an inference plan (forward steps only) */
  tf_training_config training_config;
  int32_t loss; /* buffer id of the loss, or -1 */
  int32_t n_outputs;
  int32_t *outputs; /* buffer ids of the graph's outputs */
  tf_plan_report report;
  tf_device_overhead overhead; /* the target's device overhead for this plan (none on the CPU) */
  /* f16 plans (dynamic loss scaling): the loss gradient's seed, an f32 scalar constant the runtime
   * sets to the loss scale; else -1. */
  int32_t loss_scale_seed;
  /* The f32 scalar sum of squares of the accumulated gradients, written in the optimizer block and
   * live to its end: every update reads it and is skipped when it is not finite, and the runtime
   * reads it after the block to learn so; -1 when the updates read none (no f16, no clipping). */
  int32_t overflow_check;
  /* TF_F32, or TF_BF16 / TF_F16: the matrix products (matmul, conv, the fused loss heads) may round
   * their f32 operands to that type and accumulate in f32 where the backend has the units for it
   * (CUDA: tensor cores); backends without them compute in f32. */
  tf_dtype matmul_math;
  /* The absolute folder of the graph file the plan was compiled from (NULL: unknown): an external
   * initializer's relative file not found beside the plan is looked for there. */
  char *graph_dir;
  /* Offloaded optimizer state and gradients (compiler/offload.c): steps the runtime runs on the host's
   * cores, each device operand copied to the host and back (its own index space: host step i;
   * buffers as the device steps'). host_at[i] is the device step host step i runs before (n_steps:
   * after the last); a host step in phase optimizer belongs to the optimizer block, any other to the
   * micro-batch block (the gradients' accumulation, run with every micro-batch). What they keep (the
   * optimizer state, offloaded gradients, what they write) lies in TF_REGION_HOST, host_bytes of
   * host memory. None: 0, NULL, NULL, 0. */
  int32_t n_host_steps;
  tf_plan_step *host_steps;
  int32_t *host_at;
  int64_t host_bytes;
  /* Data parallel: the processes of the job this plan is one rank of (each runs this plan on its own
   * micro-batches; the gradients are summed across them before the optimizer block, and every
   * update scales by 1 / (accumulate x ranks)); 0 or 1: one process. global_batch counts them all. */
  int32_t ranks;
  /* ZeRO stage of a data-parallel plan: 0, every rank holds the whole optimizer state; 1, each rank
   * holds and updates its shard (held_by: whole parameters' state, and pieces of split ones whose
   * ranges it updates over views, view_of), the optimizer-state region is the largest shard, and the
   * owners send the updated parameters and ranges to every rank after the block; 2, the gradients
   * sharded alike, the micro-batch block writing each into a bucket every rank holds (a gradient of
   * the gradients region held by every rank), reduced to the shard's owners after its last step
   * there (compiler/zero2.c). */
  int32_t zero;
} tf_plan;

#ifdef __cplusplus
}
#endif
#endif
