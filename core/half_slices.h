/* How the CPU backend runs an op on f16/bf16 data itself (its half kernels, tf_target.half_kernels):
 * the op's f32 kernel over slices of the operands' first axis, each half operand of a slice widened
 * exactly into the step's workspace and each half result rounded from it once, to nearest even, as
 * the cast down does. So a half step computes bit for bit what cast up -> f32 kernel -> cast down
 * computes, while the f32 copies it needs at a time are one slice's, not whole tensors.
 *
 * An op is cut into slices only where each slice's results depend on that slice's rows alone:
 * element-wise ops and activation gradients, softmax and its gradient along an axis other than
 * the first, layer_norm and rms_norm (last axis), attention and its gradient (batch), the pools and
 * their gradients (images), embedding by its ids, the forward convolutions by their images (each
 * image's products have the same sizes whatever the slice), and matmul by the rows of A and C (or
 * by batch), in slices of whole row tiles of the product (core/workspace_cpu.h: each BLAS call of a
 * slice is one of the whole product's), and a weight's gradient x^T dy by the rows of x and dy (its
 * depth, in whole depth tiles: the first slice's product, then matmul_accumulate adding each next
 * one's into the whole f32 result, which is rounded once after the last, as the whole product sums
 * its depth tiles in order). Every other op on half data (reductions, sums over rows such as a
 * norm's or a convolution's weight gradient, dropout, whose masks follow the element index, the
 * losses) runs as one slice: its half operands widened whole. The kernels compute each row
 * of those cut from its own operands, so the slices give the results of one whole call.
 *
 * The compiler plans the workspace (core/workspace_cpu.c asks tf_cpu_half_workspace_bytes for a
 * step with half operands) and the backend lays it out the same way, from the same functions. */
#ifndef TIGHTFIT_CORE_HALF_SLICES_H
#define TIGHTFIT_CORE_HALF_SLICES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

/* A slice's widened operands hold about this many elements at most (its largest cut operand),
 * unless one row of it is larger. */
#define TF_CPU_HALF_SLICE_ELEMENTS ((int64_t)1 << 16)
/* Fewest slices for which the compiler leaves an op on half data to the CPU (tf_cpu_half_pays). */
#define TF_CPU_HALF_MIN_SLICES 4
/* Operands (inputs, then outputs) a sliced op may have. */
#define TF_CPU_HALF_MAX_OPERANDS 16

typedef struct tf_cpu_half_slices {
  int64_t rows;       /* extent of the first axis the slices cut; 1: one slice */
  int64_t slice_rows; /* rows per slice (the last may hold fewer) */
  uint32_t cut;       /* bit k: operand k is cut with the slices */
  uint32_t widened;   /* bit k: operand k is half data, widened in scratch */
  uint32_t summed;    /* bit k: output k is whole, its slices' parts added (a weight's gradient) */
  int64_t scratch_offset[TF_CPU_HALF_MAX_OPERANDS]; /* bytes into the workspace of operand k's f32 copy */
  int64_t inner_offset;                             /* where the f32 kernel's own workspace starts */
  int64_t inner_bytes;                              /* what that kernel needs for one slice */
} tf_cpu_half_slices;

/* Whether the CPU runs step op(inputs) -> outputs through half slices: an operand it reads or
 * writes (not for its shape only) is f16/bf16 data, and the op is not a cast or a move of elements
 * as they are (reshape, transpose, concat, slice, slice_grad, expand, zero: byte copies). */
bool tf_cpu_half_step(tf_op op, int32_t n_inputs, const tf_tensor_ref *inputs, int32_t n_outputs,
                      const tf_tensor_ref *outputs);

/* The slices of such a step for `threads` threads (the f32 kernel's workspace sized for one slice
 * with that many); false when it has more than TF_CPU_HALF_MAX_OPERANDS operands. */
bool tf_cpu_half_slices_get(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                            int32_t n_outputs, const tf_tensor_ref *outputs, int32_t threads, tf_cpu_half_slices *s);

/* Operand `t` as slice [first, first + rows) of the first axis sees it when `cut`, else `t` itself:
 * same dtype and data (offset to the slice); the caller swaps in the f32 copy for widened ones. */
tf_tensor_ref tf_cpu_half_slice_of(const tf_tensor_ref *t, bool cut, int64_t first, int64_t rows);

/* Whether step op(inputs) on half data runs a CPU half kernel of its own, whole, not half slices:
 * the fused loss head (kernels/cpu/linear_loss_half.c: class spans outside, row chunks inside;
 * linear_cross_entropy, its gradient or its single pass, with or without a bias, not the forms that
 * accumulate into f32 sums) on f16/bf16 x, and embedding and embedding_grad on an f16/bf16 table or
 * dy (kernels/cpu/embedding_half.c: rows copied as stored; each gradient row summed in f32 over its
 * ids and rounded once), whose slices would widen the whole table, and batch_norm_running on f16/bf16
 * x (kernels/cpu/batch_norm_half.c: its f32 running statistics updated in place). */
bool tf_cpu_half_own_kernel(tf_op op, int32_t n_inputs, const tf_tensor_ref *inputs);

/* The workspace of embedding_grad on half data (kernels/cpu/embedding_half.c): each table row's
 * first position among the ids, then each position's next one with the same id (int32 each). */
typedef struct tf_cpu_embedding_grad_half_layout {
  int64_t first_offset, next_offset, bytes;
} tf_cpu_embedding_grad_half_layout;
tf_cpu_embedding_grad_half_layout tf_cpu_embedding_grad_half_layout_of(int64_t ids, int64_t rows);

/* Whether running op on half data through half slices holds less than the f32 copies between casts
 * would (decided from the inputs and output 0, all the compiler knows before it emits a node): the op
 * is cut into TF_CPU_HALF_MIN_SLICES slices or more, or its half inputs are small (one slice's
 * worth). An op run whole (a norm's or a matmul's gradient summing over the rows) would hold its
 * half operands and whole f32 copies at once, where the casts hold the f32 copies alone. */
bool tf_cpu_half_pays(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                      const tf_tensor_ref *output0);

/* Workspace bytes of such a step: the f32 copies of one slice's half operands, then the f32
 * kernel's own workspace (the fused loss head: tf_linear_loss_half_workspace_of's). */
int64_t tf_cpu_half_workspace_bytes(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                                    int32_t n_outputs, const tf_tensor_ref *outputs, int32_t threads);

#endif
