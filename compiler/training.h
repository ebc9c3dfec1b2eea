/* The training graph: the product of the compiler's graph passes (freeze, lora, autocast, fuse_loss,
 * half_ops, autodiff, optimizer, then remat, running_stats, precision), which each rewrite it in
 * turn. The graph (`g`) is the compiler's own copy of the model, bound to concrete shapes; the
 * arrays here say what the graph alone cannot: each tensor's plan role, each node's phase. The
 * stages after it (compiler/stages.h: order, lifetimes, layout, plan) read it and never write it. */
#ifndef TIGHTFIT_COMPILER_TRAINING_H
#define TIGHTFIT_COMPILER_TRAINING_H

#include "graph/ir.h"
#include "tightfit/compiler.h"
#include "tightfit/plan.h"

typedef struct tf_training {
  tf_graph *g;
  tf_compile_options options;
  tf_training_config config; /* the graph's, with the options applied */
  tf_dtype matmul_math;      /* options.matmul_math, or autocast's half type (autocast.c) */
  int32_t loss;              /* tensor id */
  int32_t loss_seed;         /* the loss gradient's seed (f32 scalar constant, 1: f16 plans scale it), or -1 */
  int32_t overflow_check;    /* the sum of squares every update reads and skips on when not finite, or -1 */

  /* Per tensor (grown with the graph; index = tensor id). */
  tf_buffer_role *role;
  int32_t *grad;  /* parameter -> its accumulated gradient tensor (role gradient), else -1 */
  int32_t *owner; /* gradient / optimizer-state tensor -> its parameter, else -1 */
  bool *host;     /* a tensor in host memory (an offloaded activation's copy, offload_activations.c) */
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

  char remat_notes[320];       /* what remat chose, for the report */
  char precision_notes[448];   /* what the precision pass stored in half, for the report */
  int32_t half_nodes;          /* nodes on half data that half_ops.c put between casts */
  int32_t half_kernel_nodes;   /* nodes on half data left to the target's half kernels (half_ops.c) */
  int32_t autocast_nodes;      /* forward nodes autocast.c made write half data */
  int32_t autocast_casts;      /* casts autocast.c inserted */
  int32_t running_stats_nodes; /* batch_norm nodes whose running statistics the plan updates (running_stats.c) */
  int32_t recomputed_half;     /* precision.c: recomputed activations it stored in half */
  int32_t half_parameters;     /* master_weights.c: f32 parameters it stored in options.param_dtype */
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
/* A deep copy of a training graph before recompute (tf_remat): a search's trials each start from
 * one copy of the passes that no recompute choice changes. */
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
 * casts just before their readers (recomputed ones kept f32 when `recomputed_f32`); records what it
 * did for the report and how many recomputed activations it stored in half (recomputed_half). */
tf_status tf_precision_pass(tf_training *t, bool recomputed_f32) TF_MUST_USE;

/* offload_activations.c: with options.offload_activations, each activation the forward pass keeps
 * for the backward pass is copied to host memory right after its producer and copied back just before
 * its first backward (and first recompute) reader; the copies become host steps (offload.c). */
tf_status tf_offload_activations_pass(tf_training *t) TF_MUST_USE;

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

/* gelu_pair.c: gelu + gelu_grad of one f32 x -> gelu_pair + mul (cpu target; after recompute). */
tf_status tf_gelu_pair_pass(tf_training *t) TF_MUST_USE;

/* Removes node n, keeping the per-node arrays (phase, follows) in step with the graph. */
tf_status tf_training_remove_node(tf_training *t, int32_t n) TF_MUST_USE;
/* Removes the n_ids nodes `ids` (any order, each once) at once, as tf_training_remove_node does. */
tf_status tf_training_remove_nodes(tf_training *t, const int32_t *ids, int32_t n_ids) TF_MUST_USE;
/* The attributes of a cast to `to`. */
tf_attrs tf_training_cast_attrs(tf_dtype to);
/* Emits cast(x -> to) in `phase`, named after `name` (tf_training_emit); its output in *out. */
tf_status tf_training_emit_cast(tf_training *t, int32_t x, tf_dtype to, tf_phase phase, const char *name,
                                int32_t *out) TF_MUST_USE;

/* Whether node n, of a phase in `phases` (a mask of 1u << phase), reads x as data (not for its shape). */
bool tf_training_reads(const tf_training *t, int32_t n, int32_t x, uint32_t phases);
/* Makes what a new node writes replace x for the readers tf_training_reroute_reads found (*y: its
 * output), with `context` the caller's. */
typedef tf_status (*tf_training_make_tensor)(tf_training *t, const void *context, int32_t *y);
/* The nodes among [0, n_nodes) of a phase in `phases` (a mask of 1u << phase) that read x as data
 * read *y instead, which `make` adds at the first of them (a recompute node: the schedule places it
 * just before that reader); *y stays -1 when none reads x. */
tf_status tf_training_reroute_reads(tf_training *t, int32_t x, int32_t n_nodes, uint32_t phases,
                                    tf_training_make_tensor make, const void *context, int32_t *y) TF_MUST_USE;
/* Whether the micro-batch block adds each gradient part to its gradient on the host (--offload
 * gradients below ZeRO stage 2; at stage 2 the backward pass writes the device's buckets, which the
 * job reduces into the gradients' shards in host memory: compiler/offload.c). */
bool tf_training_host_accumulates(const tf_compile_options *options);
/* Whether tensor id lives in the arena: an activation of the device, not a copy in host memory. */
bool tf_training_in_arena(const tf_training *t, int32_t id);
/* How many node inputs read `tensor`. */
int32_t tf_training_readers(const tf_graph *g, int32_t tensor);

/* fuse_loss.c: each matmul [-> add(bias)] -> cross_entropy becomes linear_cross_entropy
 * (options.fuse_loss). Runs on the bound graph before autodiff. */
tf_status tf_fuse_loss_pass(tf_training *t) TF_MUST_USE;
/* fuse_loss.c, after autodiff: the fused head that produces the loss and its gradient node become
 * one linear_cross_entropy_train node of the forward pass (one micro-batch per step). */
tf_status tf_fuse_loss_train_pass(tf_training *t) TF_MUST_USE;
/* The rows of logits a fused loss head computes at a time when the options do not say: the CPU's
 * rule, or on CUDA with f32 products (no autocast) the GPU's. */
int64_t tf_fuse_loss_chunk_rows(const tf_compile_options *options, int64_t rows, int64_t classes);

/* What the driver asks of one recompute run (compile.c searches over it). */
typedef struct tf_remat_request {
  int32_t drop;       /* auto: how many segments to drop */
  int32_t phase;      /* which of the stride's phases of the cuts to keep */
  bool collect_saved; /* list the saved activations (remat's candidates) in the result */
} tf_remat_request;

/* What a recompute run found out. */
typedef struct tf_remat_result {
  int32_t n_segments;  /* droppable segments found */
  int32_t stride;      /* it kept every stride-th cut */
  int32_t *saved_list; /* with collect_saved: the saved activations, forward order (malloc; the caller frees) */
  int32_t n_saved;
} tf_remat_result;

/* remat.c: activation recompute (options.remat) as `request` asks; records what it chose in
 * t->remat_notes and what it found in *result (saved_list owned by the caller). */
tf_status tf_remat(tf_training *t, const tf_remat_request *request, tf_remat_result *result) TF_MUST_USE;
/* running_stats.c: each batch_norm's running statistics (inputs 3, 4) become state buffers that a
 * batch_norm_running node after it updates in the forward pass (training plans); runs after remat. */
tf_status tf_running_stats_pass(tf_training *t) TF_MUST_USE;

/* The passes, in pipeline order. */
tf_status tf_freeze_pass(tf_training *t) TF_MUST_USE; /* freeze.c: the options' frozen parameters */
tf_status tf_lora_pass(tf_training *t) TF_MUST_USE;   /* lora.c: low-rank adapters on linear weights */
/* master_weights.c: with options.param_dtype bf16/f16, every f32 parameter stored in that type. */
tf_status tf_master_weights_pass(tf_training *t) TF_MUST_USE;
/* master_weights.c: whether trained parameter `param` is half, so that it keeps an f32 master. */
bool tf_master_weights_needed(const tf_training *t, int32_t param);
tf_status tf_autodiff(tf_training *t) TF_MUST_USE;       /* autodiff.c: backward nodes, grads per parameter */
tf_status tf_optimizer_pass(tf_training *t) TF_MUST_USE; /* optimizer.c: accumulators, state, updates */

#endif
