/* The compiler: a model graph -> a training (or inference) plan whose memory is exact.
 * Pipeline (one file per pass in compiler/): load, shapes, autodiff, optimizer, schedule,
 * liveness, assign, emit. The compiler never calls a backend: a target is described by the plain
 * capabilities struct below. */
#ifndef TIGHTFIT_COMPILER_H
#define TIGHTFIT_COMPILER_H

#include "tightfit/graph.h"
#include "tightfit/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_target_kind { TF_TARGET_CPU = 0, TF_TARGET_VULKAN, TF_TARGET_CUDA, TF_TARGET_COUNT } tf_target_kind;

/* What a backend tells the compiler, and nothing more. */
typedef struct tf_target {
  tf_target_kind kind;
  int64_t alignment;         /* buffer offsets are multiples of this (bytes, a power of two) */
  int32_t threads;           /* CPU: worker threads kernel workspaces are sized for */
  double flops_per_second;   /* cost model: sustained matmul throughput */
  double bytes_per_second;   /* cost model: memory bandwidth */
} tf_target;

/* The default capabilities of a target kind (CPU: 64-byte alignment, 2 threads). */
tf_target tf_target_default(tf_target_kind kind);
/* Parses "cpu", "vulkan", "cuda"; false when unknown. */
bool tf_target_parse(const char *name, tf_target_kind *kind);
const char *tf_target_name(tf_target_kind kind);

typedef struct tf_compile_options {
  tf_target target;
  const char *bindings;      /* "N=8,T=128": symbols bound for this plan (NULL: defaults) */
  bool training;             /* false: an inference plan, forward only */
  tf_optimizer optimizer;    /* TF_OPTIMIZER_NONE: the graph's (SGD if it has none) */
  double learning_rate;      /* <= 0: the graph's */
  int32_t accumulate;        /* micro-batches per step k; 0: the graph's, else 1 */
  double clip_norm;          /* < 0: the graph's; 0: no clipping */
  double weight_decay;       /* < 0: the graph's */
  double epsilon;            /* AdamW epsilon; <= 0: the graph's (1e-8 if it has none) */
} tf_compile_options;

/* Options for training on `target` with everything else taken from the graph. */
tf_compile_options tf_compile_options_default(tf_target_kind target);

/* Compiles `graph` (not modified) into a new plan, verified before it is returned; the caller
 * destroys *out with tf_plan_destroy(). */
tf_status tf_compile(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
