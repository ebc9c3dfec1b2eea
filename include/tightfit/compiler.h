/* The compiler: a model graph -> a training (or inference) plan whose memory is exact.
 * Pipeline (one file per pass in compiler/): load, shapes, autodiff, optimizer, schedule,
 * liveness, assign, emit. The compiler never calls a backend: a target is described by the plain
 * capabilities struct of tightfit/target.h. */
#ifndef TIGHTFIT_COMPILER_H
#define TIGHTFIT_COMPILER_H

#include "tightfit/graph.h"
#include "tightfit/plan.h"
#include "tightfit/target.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_remat_mode {
  TF_REMAT_NONE = 0,    /* keep every activation the backward pass reads */
  TF_REMAT_CHECKPOINTS, /* keep only segment boundaries (the residual stream), recompute the rest */
  TF_REMAT_AUTO,        /* recompute the least that makes the plan fit remat_budget */
  TF_REMAT_LIST         /* recompute exactly the activations named in remat_list */
} tf_remat_mode;

/* SMALLEST: the plan compiled with the head fused and not, the smaller device total kept (not fused
 * on a tie: the unfused step is faster). */
typedef enum tf_fuse_loss {
  TF_FUSE_LOSS_AUTO = 0,
  TF_FUSE_LOSS_OFF,
  TF_FUSE_LOSS_ON,
  TF_FUSE_LOSS_SMALLEST
} tf_fuse_loss;

/* A rewrite that leaves the trained weights bit for bit the same: off, on, or SMALLEST (the plan
 * compiled both ways where the rewrite is legal, the smaller device total kept; off on a tie). */
typedef enum tf_choice { TF_CHOICE_OFF = 0, TF_CHOICE_ON = 1, TF_CHOICE_SMALLEST = 2 } tf_choice;
#define TF_FUSE_LOSS_AUTO_CLASSES 8192
#define TF_FUSE_LOSS_AUTO_BYTES ((int64_t)128 << 20)

/* Where compile pairs a gelu with its derivative (tf_compile_options.gelu_pair): AUTO, on the cpu
 * target, where the GELU's evaluation costs more than the second output (on a GPU it is bound by
 * memory); ON, on every target (the conformance suite runs the op on each backend); OFF, nowhere. */
typedef enum tf_gelu_pair { TF_GELU_PAIR_AUTO = 0, TF_GELU_PAIR_ON = 1, TF_GELU_PAIR_OFF = 2 } tf_gelu_pair;

typedef struct tf_compile_options {
  tf_target target;
  const char *bindings;   /* "N=8,T=128": symbols bound for this plan (NULL: defaults) */
  bool training;          /* false: an inference plan, forward only */
  tf_optimizer optimizer; /* TF_OPTIMIZER_NONE: the graph's (SGD if it has none) */
  double learning_rate;   /* <= 0: the graph's */
  int32_t accumulate;     /* micro-batches per step k; 0: the graph's, else 1 */
  double clip_norm;       /* < 0: the graph's; 0: no clipping */
  double weight_decay;    /* < 0: the graph's */
  double epsilon;         /* AdamW epsilon; <= 0: the graph's (1e-8 if it has none) */
  tf_remat_mode remat;
  int64_t remat_budget;          /* TF_REMAT_AUTO: the device total (regions + overhead) to fit */
  const char *const *remat_list; /* TF_REMAT_LIST: names of saved activations to recompute */
  int32_t remat_list_count;
  bool set_precision;     /* false: the graph's training precision */
  tf_precision precision; /* with set_precision: f32, or bf16/f16 storage of the saved activations */
  double loss_scale;      /* > 0: f16's initial dynamic loss scale, a power of two; 0: the graph's (or 2^16) */
  /* The fused loss head (compiler/fuse_loss.c): each matmul(x, W) [-> add(bias [V])] -> cross_entropy
   * of the graph (every term of a summed loss) whose logits nothing else reads becomes
   * linear_cross_entropy, so the [rows, V] logits never exist (f32 heads, and f16/bf16 heads, which
   * compute in f32 on widened x and W). AUTO fuses a head when V >= TF_FUSE_LOSS_AUTO_CLASSES and
   * its logits counted in f32 take TF_FUSE_LOSS_AUTO_BYTES or more (the
   * fused head recomputes the logits for the gradient: a step costs more); ON fuses every such head;
   * SMALLEST fuses them where that makes the plan smaller; training plans only. */
  tf_fuse_loss fuse_loss;
  int64_t loss_chunk_rows; /* rows of logits every fused head computes at a time; 0: the compiler's choice */
  /* Each parameter's update runs in the backward pass, as soon as its gradient is complete and no
   * later step reads the parameter (compiler/schedule_updates.c): a gradient then lives in the
   * arena only from the step that writes it to its update, and the gradients region holds none of
   * them. Same weights bit for bit; needs one micro-batch per step, no clipping and no f16 loss
   * scaling (each needs every gradient before any update). Training plans only. ON where it is not
   * legal is an error; SMALLEST takes it where it is legal and makes the plan smaller. */
  tf_choice update_in_backward;
  /* TF_F32 (the default), TF_BF16 or TF_F16: the plan's matmul_math (plan_types.h), the precision of
   * the matrix products' operands where the backend has half-precision units. */
  tf_dtype matmul_math;
  /* TF_F32 (the default: off), TF_BF16 or TF_F16: the forward pass computes on half activations as
   * torch.autocast does (compiler/autocast.c): matmul, convolutions and attention on half operands,
   * norms, softmax and reductions in f32; parameters, their gradients, optimizer state and the loss
   * stay f32. */
  tf_dtype autocast;
  /* Frozen parameters (compiler/freeze.c): with train_only_count > 0 every parameter that no
   * train_only pattern names is frozen; then every one a freeze pattern names. A pattern is a name
   * or an fnmatch glob ("encoder.*"). A pattern that names no parameter, or freezing every one, is
   * an error. Adds to the graph's own frozen parameters (tf_graph_set_trainable). */
  const char *const *freeze;
  int32_t freeze_count;
  const char *const *train_only;
  int32_t train_only_count;
  /* LoRA (compiler/lora.c): with lora_rank > 0, each linear weight a lora_targets pattern names gets a
   * trainable low-rank pair (A [rank, in], B [out, rank], B zero) added as lora_alpha/lora_rank x
   * (x A^T) B^T (lora_alpha 0: the rank), and every other parameter is frozen unless a train_only
   * pattern names it, as PEFT does. A target that is not a 2-D matmul weight is an error. */
  int32_t lora_rank;
  double lora_alpha;
  const char *const *lora_targets;
  int32_t lora_target_count;
  bool lora_all_linear; /* with lora_rank and no targets: every 2-D weight only matmuls read (the budget search) */
  /* The optimizer state in host memory and the updates on the host's cores (compiler/offload.c):
   * the device total holds no optimizer state; the plan says the host bytes and the bytes moved per
   * step. Training plans for the cuda and vulkan targets, updates after the backward pass. */
  bool offload_optimizer;
  /* Also the gradients (implies offload_optimizer): each gradient part the backward pass makes lives
   * in the arena until a host step adds it to its gradient in host memory (with every micro-batch),
   * and the whole optimizer block (norm, updates, zeroing) runs on the host; the device holds
   * neither gradients nor optimizer state (ZeRO-Offload's split). */
  bool offload_gradients;
  /* The activations the forward pass keeps for the backward pass (with recompute: its checkpoints)
   * in host memory between the passes (compiler/offload_activations.c): each copied down by a host
   * step right after its producer and up again just before its first backward reader; the arena
   * then holds them only while they are used. Independent of the two above. */
  bool offload_activations;
  /* Data parallel: the plan of one of `ranks` processes (0 or 1: one), each training on its own
   * micro-batches, the gradients summed across them before the optimizer block (tightfit train
   * under mpirun); every update scales the sum by 1 / (accumulate x ranks). Updates after the
   * backward pass. */
  int32_t ranks;
  /* With ranks > 1, the ZeRO stage: 0 (every rank holds the whole optimizer state) or 1 (each rank
   * holds the state of the parameters it owns and updates only those; the owners send the updated
   * parameters to every rank: compiler/zero.c). */
  int32_t zero;
  /* TF_F32 (the default) or TF_BF16 / TF_F16: every f32 parameter is stored in that type
   * (compiler/master_weights.c); a trained one keeps an f32 master copy in the optimizer state,
   * which its update changes, then writes the parameter from (DeepSpeed's bf16 weights). */
  tf_dtype param_dtype;
  /* Each gelu whose gradient reads the same f32 x computed as gelu_pair, its derivative kept from the
   * forward evaluation, and that gradient as dy times it (compiler/gelu_pair.c): the same bits and
   * bytes, one GELU evaluation less per element. */
  tf_gelu_pair gelu_pair;
} tf_compile_options;

/* The activations a training plan of `graph` saves for the backward pass (the candidates for
 * recompute), by name, in forward order: *names[0..*count) is allocated (the array and each name);
 * free with tf_compile_free_names(). */
tf_status tf_compile_saved_activations(const tf_graph *graph, const tf_compile_options *options, char ***names,
                                       int32_t *count) TF_MUST_USE;
void tf_compile_free_names(char **names, int32_t count);

/* Options for training on `target` with everything else taken from the graph. */
tf_compile_options tf_compile_options_default(tf_target_kind target);

/* Compiles `graph` (not modified) into a new plan, verified before it is returned; the caller
 * destroys *out with tf_plan_destroy(). */
tf_status tf_compile(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) TF_MUST_USE;

/* The budget search: the fastest plan (by the target's cost model) that fits `budget` bytes while
 * training on `global_batch` samples per optimizer step. It tries every micro-batch N that divides
 * the global batch (accumulation k = global_batch / N) and, for each, no recompute then the least
 * recompute that fits (TF_REMAT_AUTO); with allow_precision, half-precision storage first before
 * recompute at each step of that order (cheaper than recomputing). Where one of those does not fit,
 * the loss head is tried before the next: fused where fuse_loss AUTO left it unfused, then the
 * largest chunk that fits (steps of 32 rows, down to 64); an explicit loss_chunk_rows is kept and
 * TF_FUSE_LOSS_OFF never fuses. */
typedef struct tf_budget_options {
  tf_compile_options base; /* bindings may set other symbols (T=1024); N is searched */
  int64_t budget;          /* bytes the device total (regions + overhead) must fit */
  int64_t global_batch;    /* samples per optimizer step */
  bool allow_remat;
  bool allow_precision;   /* also try storing the saved activations in `precision` */
  tf_precision precision; /* with allow_precision: bf16 or f16 */
  /* > 0: when nothing fits training every parameter, search again with LoRA adapters of this rank
   * (base.lora_targets, or every linear weight when it names none); base.lora_rank must be 0. */
  int32_t allow_lora_rank;
  /* When nothing fits with AdamW (base.optimizer, or the graph's when that is NONE), search again with
   * 8-bit AdamW state (TF_OPTIMIZER_ADAMW8BIT, 2.031 bytes a parameter against 8; the graph's AdamW
   * learning rate and epsilon kept) and keep the better; tried before LoRA, which then starts from it.
   * With an SGD optimizer: TF_ERR_INVALID_ARGUMENT. */
  bool allow_optimizer_8bit;
  /* When still nothing fits, search again with the optimizer state in host memory
   * (tf_compile_options.offload_optimizer), then with the gradients there too (offload_gradients),
   * and keep the better; before LoRA, which then starts from it. On the cpu target:
   * TF_ERR_INVALID_ARGUMENT. */
  bool allow_offload;
} tf_budget_options;

typedef struct tf_budget_result {
  bool fits;
  int64_t micro_batch;
  int32_t accumulate;
  tf_remat_mode remat;
  tf_precision precision;  /* of the chosen plan */
  int64_t total_bytes;     /* device total (regions + overhead) of the chosen plan, or of the smallest found */
  double seconds_per_step; /* the cost model's estimate */
  int32_t tried;           /* configurations compiled */
  int64_t loss_chunk_rows; /* the chosen plan's fused loss head: rows of logits at a time; 0: none */
  int32_t lora_rank;       /* the chosen (or smallest) plan's LoRA rank when --allow-lora made it; else 0 */
  char summary[4096];      /* what was tried and why this was chosen, one line each */
  tf_optimizer optimizer;  /* the chosen (or smallest) plan's: TF_OPTIMIZER_ADAMW8BIT when the 8-bit state made it */
} tf_budget_result;

/* Searches; on success *out is the chosen plan (or, when nothing fits, the smallest one found, with
 * result->fits false and status NULL). Errors only for bad input. */
tf_status tf_compile_budget(const tf_graph *graph, const tf_budget_options *options, tf_plan **out,
                            tf_budget_result *result) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
