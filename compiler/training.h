/* State shared by the passes that turn a model graph into a plan: autodiff, optimizer, schedule,
 * liveness, assign and emit. The graph (`g`) is the compiler's own copy, bound to concrete shapes;
 * the arrays here say what the graph alone cannot: each tensor's plan role, each node's phase, the
 * schedule, live intervals and arena offsets. */
#ifndef TIGHTFIT_COMPILER_TRAINING_H
#define TIGHTFIT_COMPILER_TRAINING_H

#include "graph/ir.h"
#include "tightfit/compiler.h"
#include "tightfit/plan.h"

typedef struct tf_training {
  tf_graph *g;
  tf_compile_options options;
  tf_training_config config; /* the graph's, with the options applied */
  int32_t loss;              /* tensor id */
  int32_t loss_seed;         /* the loss gradient's seed (f32 scalar constant, 1: f16 plans scale it), or -1 */
  int32_t overflow_check;    /* the sum of squares every update reads and skips on when not finite, or -1 */

  /* Per tensor (grown with the graph; index = tensor id). */
  tf_buffer_role *role;
  int32_t *grad;  /* parameter -> its accumulated gradient tensor (role gradient), else -1 */
  int32_t *owner; /* gradient / optimizer-state tensor -> its parameter, else -1 */
  int32_t capacity_tensors;
  /* Gradient parts of parameters used more than once (tied weights), after the first (which is
   * grad[p] after autodiff): pairs (parameter, part). The optimizer pass accumulates each part on
   * its own, right after the step that produces it, so no part waits for the others in the arena. */
  int32_t *extra_parts;
  int32_t n_extra_parts, capacity_extra_parts;

  /* The f32 outputs of nodes on half data that half_ops.c put between casts, each with the half
   * tensor its cast down writes: pairs (f32 output, half tensor). A backward reader of such an
   * output reads the half tensor cast back (precision.c), as a half kernel's would. */
  int32_t *narrowed;
  int32_t n_narrowed, capacity_narrowed;
  /* Per node. */
  tf_phase *phase;
  int32_t *follows; /* a node the schedule places right after another (precision's casts): that node, else -1 */
  int32_t capacity_nodes;
  int32_t n_forward_nodes; /* nodes [0, n_forward_nodes) are the model's forward pass */

  /* Schedule: node ids in execution order; [0, micro_steps) is the micro-batch block. */
  int32_t *schedule;
  int32_t n_schedule, micro_steps;

  /* Liveness and assignment, per tensor (arena tensors only; others -1). */
  int32_t *first, *last;
  int32_t *alias_of; /* a reshape output placed on its input (that input's id), else -1 */
  int64_t *offset;
  int64_t region_bytes[TF_REGION_COUNT];
  /* Per scheduled step: its workspace bytes and, once assigned, the workspace's arena offset. */
  int64_t *workspace_bytes, *workspace_offset;
  int64_t arena_lower_bound, arena_naive;
  int32_t peak_step;
  int64_t *live_bytes;         /* n_schedule entries */
  char remat_notes[320];       /* what remat chose, for the report */
  char schedule_notes[320];    /* which order the schedule kept and both arenas, for the report */
  char precision_notes[448];   /* what the precision pass stored in half, for the report */
  int32_t half_nodes;          /* nodes on half data that half_ops.c put between casts */
  int32_t half_kernel_nodes;   /* nodes on half data left to the target's half kernels (half_ops.c) */
  int32_t autocast_nodes;      /* forward nodes autocast.c made write half data */
  int32_t autocast_casts;      /* casts autocast.c inserted */
  int32_t running_stats_nodes; /* batch_norm nodes whose running statistics the plan updates (running_stats.c) */
  int32_t options_remat_drop;  /* auto: how many segments to drop (the driver searches it) */
  int32_t remat_phase;         /* which of remat_stride phases of the cuts to keep (the driver tries each) */
  int32_t remat_stride;        /* set by remat: it keeps every remat_stride-th cut */
  bool recomputed_f32;         /* precision: keep recomputed activations f32 under a half policy */
  int32_t recomputed_half;     /* set by precision: recomputed activations it stored in half */
  int32_t n_segments;          /* set by remat: segments found */
  int32_t *saved_list;         /* set by remat when asked (collect_saved): saved activations, forward order */
  int32_t n_saved;
  bool collect_saved;
} tf_training;

/* Grows the per-tensor and per-node arrays to the graph's current size (new entries: activation,
 * -1, forward). */
tf_status tf_training_reserve(tf_training *t) TF_MUST_USE;
/* Adds a node of training-only or graph op `op` whose outputs are new activations named after
 * `name` (made unique), infers their shapes, and records the node's phase. Output ids go to
 * outputs[0..op's n_outputs). */
tf_status tf_training_emit(tf_training *t, tf_op op, const int32_t *inputs, int32_t n_inputs, const tf_attrs *attrs,
                           tf_phase phase, const char *name, int32_t *outputs) TF_MUST_USE;
/* Adds a tensor of `role` (gradient, optimizer state or constant) shaped like tensor `like`. */
int32_t tf_training_tensor_like(tf_training *t, int32_t like, tf_buffer_role role, const char *name, tf_status *status);
/* Whether a plan of `g` under `config` may store f16 activations (an f16 policy, a node's f16
 * override, or an f16 tensor in the graph): such plans scale their loss and skip overflowed
 * updates (compiler/optimizer.c). */
bool tf_training_stores_f16(const tf_graph *g, const tf_training_config *config);
/* Adds a scalar f32 constant of value `value` (role constant). */
int32_t tf_training_scalar(tf_training *t, double value, const char *name, tf_status *status);
/* A deep copy of a state before recompute and scheduling (before those arrays exist): a search's
 * trials each start from one copy of the passes that no recompute choice changes. */
tf_status tf_training_copy(const tf_training *from, tf_training *to) TF_MUST_USE;
void tf_training_free(tf_training *t);

/* Node ids in the order a rewriting pass wants them (half_ops.c, autocast.c: each node's input
 * casts, the node, its output casts), then given to tf_ir_reorder_nodes. */
typedef struct tf_node_order {
  int32_t *ids;
  int32_t n, capacity;
} tf_node_order;
/* Appends node `id`; `pass` names the pass in the out-of-memory message. */
tf_status tf_node_order_push(tf_node_order *o, int32_t id, const char *pass) TF_MUST_USE;
/* Output i of node n through a cast: the node writes a new activation of dtype `written` (named
 * after the output, into *wrote), and a new cast node (*cast) writes the output itself, its id and
 * name kept, as `kept`. Shapes are not inferred. */
tf_status tf_training_cast_output(tf_training *t, int32_t n, int32_t i, tf_dtype written, tf_dtype kept, int32_t *wrote,
                                  int32_t *cast) TF_MUST_USE;

/* precision.c: the saved activations stored in bf16/f16 (config.precision), read back through f32
 * casts just before their readers; records what it did for the report. */
tf_status tf_precision_pass(tf_training *t) TF_MUST_USE;

/* autocast.c: with options.autocast bf16/f16, the forward graph computes on half activations
 * (autocast's op lists: products on half operands, norms and softmax in f32, promotion where f32
 * and half meet); parameters and the loss stay f32. Runs on the bound graph before fuse_loss. */
tf_status tf_autocast_pass(tf_training *t) TF_MUST_USE;

/* half_ops.c: each node (not a cast) on f16/bf16 floating data computes in f32 between casts of its
 * half inputs and outputs; *lowered: how many nodes. Runs on the bound graph before autodiff. */
tf_status tf_half_ops_pass(tf_training *t, int32_t *lowered) TF_MUST_USE;

/* half_ops.c: tf_training_emit, except that a node on f16/bf16 data that the target has no half
 * kernel for (tf_target_half_kernel) computes in f32 between casts (its half inputs widened, its
 * f32 outputs rounded to their type): autodiff's backward nodes of half kernels. */
tf_status tf_training_emit_half(tf_training *t, tf_op op, const int32_t *inputs, int32_t n_inputs,
                                const tf_attrs *attrs, tf_phase phase, const char *name, int32_t *outputs) TF_MUST_USE;
/* half_ops.c: whether the target's half kernel of node n's op runs it on inputs[0..n_inputs) in place of
 * the node's own (some f16/bf16 where the node reads f32 copies of them), its outputs keeping their
 * dtypes (tf_target_mixed_half_kernel: attention's gradient reading half q, k, v beside an f32 dy). */
bool tf_training_half_kernel_takes(const tf_training *t, int32_t n, const int32_t *inputs);
/* slice_grads.c, after autodiff: a sum of slice_grads that tile one axis of a tensor becomes one
 * concat of the slices' gradients. */
tf_status tf_slice_grads_pass(tf_training *t) TF_MUST_USE;

/* Removes node n, keeping the per-node arrays (phase, follows) in step with the graph. */
tf_status tf_training_remove_node(tf_training *t, int32_t n) TF_MUST_USE;
/* Removes the n_ids nodes `ids` (any order, each once) at once, as tf_training_remove_node does. */
tf_status tf_training_remove_nodes(tf_training *t, const int32_t *ids, int32_t n_ids) TF_MUST_USE;
/* The attributes of a cast to `to`. */
tf_attrs tf_training_cast_attrs(tf_dtype to);
/* Emits cast(x -> to) in `phase`, named after `name` (tf_training_emit); its output in *out. */
tf_status tf_training_emit_cast(tf_training *t, int32_t x, tf_dtype to, tf_phase phase, const char *name,
                                int32_t *out) TF_MUST_USE;

/* How many node inputs read `tensor`. */
int32_t tf_training_readers(const tf_graph *g, int32_t tensor);

/* fuse_loss.c: each matmul [-> add(bias)] -> cross_entropy becomes linear_cross_entropy
 * (options.fuse_loss). Runs on the bound graph before autodiff. */
tf_status tf_fuse_loss_pass(tf_training *t) TF_MUST_USE;
/* fuse_loss.c, after autodiff: the fused head that produces the loss and its gradient node become
 * one linear_cross_entropy_train node of the forward pass (one micro-batch per step). */
tf_status tf_fuse_loss_train_pass(tf_training *t) TF_MUST_USE;
/* The rows of logits a fused loss head computes at a time when the options do not say. */
int64_t tf_fuse_loss_chunk_rows(int64_t rows, int64_t classes);

/* remat.c: activation recompute (options.remat); records what it chose in *notes (may be NULL). */
tf_status tf_remat(tf_training *t) TF_MUST_USE;
/* running_stats.c: each batch_norm's running statistics (inputs 3, 4) become state buffers that a
 * batch_norm_running node after it updates in the forward pass (training plans); runs after remat. */
tf_status tf_running_stats_pass(tf_training *t) TF_MUST_USE;

/* The passes, in pipeline order. */
tf_status tf_freeze_pass(tf_training *t) TF_MUST_USE;         /* freeze.c: the options' frozen parameters */
tf_status tf_lora_pass(tf_training *t) TF_MUST_USE;           /* lora.c: low-rank adapters on linear weights */
tf_status tf_autodiff(tf_training *t) TF_MUST_USE;            /* autodiff.c: backward nodes, grads per parameter */
tf_status tf_optimizer_pass(tf_training *t) TF_MUST_USE;      /* optimizer.c: accumulators, state, updates */
tf_status tf_schedule(tf_training *t) TF_MUST_USE;            /* schedule.c: execution order and blocks */
tf_status tf_schedule_memory(tf_training *t) TF_MUST_USE;     /* schedule_memory.c: a lower-peak order */
tf_status tf_schedule_updates(tf_training *t) TF_MUST_USE;    /* schedule_updates.c: updates in the backward pass */
tf_status tf_liveness(tf_training *t) TF_MUST_USE;            /* liveness.c: live intervals, workspaces */
tf_status tf_assign(tf_training *t) TF_MUST_USE;              /* assign.c: offsets in every region */
tf_status tf_emit(tf_training *t, tf_plan **out) TF_MUST_USE; /* emit.c: the plan and its report */
/* emit.c: appends `line` (ending in a newline) to a compiled plan's notes; on no memory the note is
 * lost and the plan stays whole. */
void tf_plan_note(tf_plan *plan, const char *line);

/* workspace.c: bytes of scratch the target's kernel for `node` needs. */
int64_t tf_workspace_bytes(const tf_target *target, const tf_graph *g, const tf_ir_node *node);

#endif
