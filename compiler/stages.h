/* The compiler's stages after the training graph, each a product of its own that reads the ones
 * before it and never writes them: the order (the schedule), the lifetimes (liveness), the layout
 * (assignment), then the plan (emit). compile.c's driver owns their order and their memory:
 *
 *   tf_training --tf_order_model / tf_order_memory_aware, tf_order_move_updates--> tf_order
 *   tf_training + tf_order --tf_lifetimes_find--> tf_lifetimes
 *   tf_training + tf_order + tf_lifetimes --tf_layout_assign--> tf_layout
 *   all four --tf_emit--> tf_plan */
#ifndef TIGHTFIT_COMPILER_STAGES_H
#define TIGHTFIT_COMPILER_STAGES_H

#include "compiler/training.h"

/* The order: node ids in execution order; [0, micro_steps) is the micro-batch block, the rest the
 * optimizer block. */
typedef struct tf_order {
  int32_t *steps;
  int32_t n_steps, micro_steps;
  char notes[320]; /* which order the driver kept and both arenas, for the report */
} tf_order;

/* The lifetimes, per tensor (arena tensors only; others -1): the step that writes it and the last
 * step that reads it; per step, its kernel's workspace bytes. */
typedef struct tf_lifetimes {
  int32_t *first, *last;
  int64_t *workspace_bytes;
} tf_lifetimes;

/* The layout: every buffer's offset in its region (per tensor; -1 for none), each step's workspace
 * offset in the arena, the regions' sizes, and the arena's bounds for the report. */
typedef struct tf_layout {
  int32_t *alias_of; /* a tensor placed on another's memory (that tensor's id), else -1 */
  int64_t *offset;
  int64_t *workspace_offset;
  int64_t region_bytes[TF_REGION_COUNT];
  int64_t host_bytes; /* the tensors in host memory (t->host), each at its offset */
  int64_t arena_lower_bound, arena_naive;
  int32_t peak_step;
  int64_t *live_bytes; /* per step: arena bytes live */
} tf_layout;

/* schedule.c: the model order: the forward pass, the backward pass as autodiff emitted it (each
 * accumulation right after what completes it, recompute just before its first reader), the optimizer
 * block. */
tf_status tf_order_model(const tf_training *t, tf_order *out) TF_MUST_USE;
/* schedule_memory.c: another valid order of the micro-batch block with a lower peak. */
tf_status tf_order_memory_aware(const tf_training *t, tf_order *out) TF_MUST_USE;
/* schedule_updates.c: with options.update_in_backward, the optimizer steps moved into the backward
 * pass, each right after the last step that touches its operands. */
tf_status tf_order_move_updates(const tf_training *t, tf_order *order) TF_MUST_USE;
void tf_order_free(tf_order *order);

/* liveness.c: each arena tensor's live interval and each step's workspace over `order`. */
tf_status tf_lifetimes_find(const tf_training *t, const tf_order *order, tf_lifetimes *out) TF_MUST_USE;
void tf_lifetimes_free(tf_lifetimes *lifetimes);

/* assign.c: offsets in every region, the arena packed over `lifetimes`. */
tf_status tf_layout_assign(const tf_training *t, const tf_order *order, const tf_lifetimes *lifetimes,
                           tf_layout *out) TF_MUST_USE;
void tf_layout_free(tf_layout *layout);

/* emit.c: the plan and its report from the four products (*out owned by the caller). */
tf_status tf_emit(const tf_training *t, const tf_order *order, const tf_lifetimes *lifetimes, const tf_layout *layout,
                  tf_plan **out) TF_MUST_USE;
/* emit.c: appends `line` (ending in a newline) to a compiled plan's notes; on no memory the note is
 * lost and the plan stays whole. */
void tf_plan_note(tf_plan *plan, const char *line);
/* Makes an emitted training plan's steps that touch host memory (the offloaded activations'
 * copies, compiler/offload_activations.c) host steps, and with `optimizer` offloads its optimizer
 * state, with `gradients` its gradients too, to host memory (compiler/offload.c): the updates (and
 * the gradients' accumulation and the whole optimizer block) become host steps, what they keep
 * TF_REGION_HOST, and the device overhead is recomputed for `target`. Refused on the cpu target and
 * where a host step would need the device's arena. */
tf_status tf_offload_pass(tf_plan *plan, const tf_target *target, bool optimizer, bool gradients) TF_MUST_USE;

/* Shards an emitted data-parallel training plan's optimizer state across its ranks (ZeRO stage 1,
 * compiler/zero.c): the state cut into equal runs, an update held by the rank of its run or split
 * into ranges at the cuts (views of its parameter and gradient, pieces of its state), the state
 * region the largest shard, the device overhead recomputed for `target`. Stage 2 shards the
 * gradients alike, the backward pass writing buckets reduced to their owners (compiler/zero2.c). */
tf_status tf_zero_pass(tf_plan *plan, const tf_target *target, int32_t stage) TF_MUST_USE;

/* workspace.c: bytes of scratch the target's kernel for `node` needs. */
int64_t tf_workspace_bytes(const tf_target *target, const tf_graph *g, const tf_ir_node *node);

#endif
