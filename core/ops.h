/* Op metadata: the core columns of the op table (core/op_table.h) as one tf_op_info row per op
 * (name, scope, arity, attribute family, shape rule, alias rule). Adding an op is adding its row
 * to the table and its functions in the files the row names (docs/adding-an-op.md). */
#ifndef TIGHTFIT_CORE_OPS_H
#define TIGHTFIT_CORE_OPS_H

#include "core/shape_rules.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_OP_VARIADIC 64           /* max_inputs of variadic graph ops (concat) */
#define TF_OP_VARIADIC_INTERNAL 127 /* max_inputs of global_norm_sq; the compiler chains longer lists */

/* Where an op may appear (the scope column). */
typedef enum tf_op_scope {
  TF_SCOPE_GRAPH = 0, /* model graphs (.tfg) and plans */
  TF_SCOPE_TRAINING   /* plans only: the compiler's autodiff and optimizer passes emit it */
} tf_op_scope;

/* Which inputs output 0 may lie on (the alias column; tf_op_output_may_alias). An op gets INPUT0 or
 * ANY_INPUT only when the kernels of every backend read each element of that input only at the
 * position of the output element they then write, and only before writing it, in the same loop
 * iteration, invocation or thread, declaring nothing restrict: kernels/cpu/elementwise.c,
 * kernels/cuda/elementwise.cu, shaders/unary.comp and shaders/binary.comp for the element-wise
 * ops. cross_entropy_grad lies on the logits, the largest activation of a language model and its
 * gradient, both live at the start of the backward pass otherwise: every kernel
 * (kernels/cpu/loss.c, kernels/cuda/loss.cu, shaders/loss.comp) reads a row's logits (max, sums)
 * before writing the row, and then each element once, just before writing its gradient. reshape
 * only reinterprets its input. */
typedef enum tf_alias_rule {
  TF_ALIAS_NONE = 0,  /* never */
  TF_ALIAS_INPUT0,    /* input 0 */
  TF_ALIAS_ANY_INPUT, /* any input (binaries and activation gradients, whose inputs have the output's shape) */
} tf_alias_rule;

/* The dtypes an op's kernels take, on every backend (the dtypes column; tf_op_check_dtypes). */
typedef enum tf_dtype_rule {
  TF_DTYPES_FLOAT = 0,    /* every input read for its data is floating: f32, f16 or bf16 */
  TF_DTYPES_ANY,          /* any dtype: the kernels convert (cast) */
  TF_DTYPES_INT0,         /* input 0 is integer ids (i32 or i64), the others floating */
  TF_DTYPES_INT1,         /* input 1 is integer labels (i32 or i64), the others floating */
  TF_DTYPES_INT2,         /* input 2 is integer labels (i32 or i64), the others floating */
  TF_DTYPES_INT1_LENGTHS, /* input 1 integer labels, and the last input integer lengths when the op has its
                           * max inputs (ctc_loss's input_lengths); the others floating */
  TF_DTYPES_BYTES,        /* any dtype: the kernels move elements as they are (tf_op_moves_elements) */
  TF_DTYPES_STATE8,       /* adamw8bit: param and grad floating, the moments u8 codes and f32 scales (its shape
                           * rule checks which is which) */
} tf_dtype_rule;

/* adamw8bit's quantization block: each block of this many elements of a moment shares one f32
 * scale (kernels/cpu/optimizer8bit.c has the design). */
#define TF_ADAMW8BIT_BLOCK 256

/* The scales an adamw8bit moment of `count` elements has: one per block, the last one partial. */
static inline int64_t tf_adamw8bit_blocks(int64_t count) {
  return (count + TF_ADAMW8BIT_BLOCK - 1) / TF_ADAMW8BIT_BLOCK;
}

typedef struct tf_op_info {
  const char *name;
  tf_op_scope scope;
  int8_t min_inputs, max_inputs;
  int8_t n_outputs;   /* 0: the op only updates inputs in place */
  uint8_t shape_only; /* bit i set: input i is read for its shape only (liveness ignores it) */
  uint8_t in_place;   /* bit i set: input i is written in place */
  tf_attr_kind attrs;
  tf_shape_rule shape_rule;
  tf_alias_rule alias;
  tf_dtype_rule dtypes;
} tf_op_info;

/* Returns the row for `op`, or NULL when op is out of range. */
const tf_op_info *tf_op_info_get(tf_op op);
/* Whether a model graph (.tfg) may hold `op` (false for training-only ops and out-of-range values). */
bool tf_op_in_graphs(tf_op op);
/* Whether `op` moves elements as they are, computing nothing (reshape, transpose, concat, slice,
 * expand, slice_grad, and zero's fill; the dtypes column's BYTES): its kernels work on the bytes of
 * any dtype. */
bool tf_op_moves_elements(tf_op op);
/* Whether `op` is a parameter update (sgd, adamw, adamw8bit: the ops with optimizer attributes). */
bool tf_op_is_update(tf_op op);
/* Checks the dtypes of an op's inputs against its dtypes rule: a kernel is never asked to read data
 * of a dtype it does not implement (u8 data into add's f32 kernel). NULL or an error naming the
 * input, its dtype and what the op takes. */
tf_status tf_op_check_dtypes(const tf_shape_query *q);
/* Whether `op` reads input k for its shape only (tf_op_info.shape_only): liveness ignores such a read,
 * and the operand lends its shape, never its dtype or data. */
bool tf_op_input_shape_only(tf_op op, int32_t k);
/* Whether output 0 of `op` may lie on input `input`'s memory when that input is read last by the
 * step and has the output's dtype and bytes (the alias column: tf_alias_rule). */
bool tf_op_output_may_alias(tf_op op, int32_t input);
/* Returns the name of an attribute family ("matmul", "conv", ...). */
const char *tf_attr_kind_name(tf_attr_kind kind);

#ifdef __cplusplus
}
#endif
#endif
