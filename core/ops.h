/* Op metadata: one row per op (name, arity, attribute family, shape rule, flags). Adding an op is
 * adding its row here and its functions in the files the row names. */
#ifndef TIGHTFIT_CORE_OPS_H
#define TIGHTFIT_CORE_OPS_H

#include "core/shape_rules.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TF_OPF_ELEMENTWISE = 1u << 0, /* output element i depends on input element i only */
  TF_OPF_BROADCAST = 1u << 1,   /* binary with numpy broadcasting */
  TF_OPF_LOSS = 1u << 2,        /* produces a scalar loss */
  TF_OPF_RANDOM = 1u << 3,      /* uses the counter-based RNG */
  TF_OPF_VIEW = 1u << 4         /* only reinterprets its input (reshape) */
};

#define TF_OP_VARIADIC 64           /* max_inputs of variadic graph ops (concat) */
#define TF_OP_VARIADIC_INTERNAL 127 /* max_inputs of global_norm_sq; the compiler chains longer lists */

typedef struct tf_op_info {
  const char *name;
  int8_t min_inputs, max_inputs;
  tf_attr_kind attrs;
  tf_shape_rule shape_rule;
  uint32_t flags;
  int8_t n_outputs;   /* 0: the op only updates inputs in place */
  uint8_t shape_only; /* bit i set: input i is read for its shape only (liveness ignores it) */
  uint8_t in_place;   /* bit i set: input i is written in place */
} tf_op_info;

/* Returns the row for `op`, or NULL when op is out of range. */
const tf_op_info *tf_op_info_get(tf_op op);
/* Whether output 0 of `op` may lie on input `input`'s memory when that input is read last by the
 * step and has the output's dtype and bytes: reshape (input 0), and ops whose kernels on every
 * backend read each element of that input only at the position of the output element they then
 * write, and only before writing it (cross_entropy_grad: the logits; elementwise unaries, binaries
 * and activation gradients: any input). */
bool tf_op_output_may_alias(tf_op op, int32_t input);
/* Returns the op named `name`, or TF_OP_COUNT. */
tf_op tf_op_from_name(const char *name);
/* Returns the name of an attribute family ("matmul", "conv", ...). */
const char *tf_attr_kind_name(tf_attr_kind kind);

#ifdef __cplusplus
}
#endif
#endif
