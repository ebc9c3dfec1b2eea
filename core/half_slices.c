/* The CPU's half slices (core/half_slices.h): which ops are cut along their first axis, which of
 * their operands are cut, and the workspace the f32 copies and the kernel take. */
#include <stdint.h>
#include <string.h>

#include "core/half_slices.h"

#include "core/linear_loss.h"
#include "core/ops.h"
#include "core/workspace.h"
#include "core/workspace_cpu.h"

#define ALIGN 64

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

static int64_t align_up(int64_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

bool tf_cpu_half_step(tf_op op, int32_t n_inputs, const tf_tensor_ref *inputs, int32_t n_outputs,
                      const tf_tensor_ref *outputs) {
  if (op == TF_OP_CAST || op == TF_OP_CAST_INTO || tf_op_moves_elements(op)) /* the kernels take any dtype */
    return false;
  for (int32_t k = 0; k < n_inputs; k++)
    if (is_half(inputs[k].dtype) && !tf_op_input_shape_only(op, k))
      return true;
  for (int32_t k = 0; k < n_outputs; k++)
    if (is_half(outputs[k].dtype))
      return true;
  return false;
}

/* How an op's slices cut its operands: ROWS, every operand of the output's rank whose first axis
 * is the output's (a broadcast one, or a lower-rank one such as a norm's scale, stays whole);
 * FIRST, input 0 and the outputs only (the products' rows: a weight stays whole even where its
 * first axis happens to match); DEPTH, a weight's gradient x^T dy (2-D, A transposed, B not): x and
 * dy cut along their rows, the depth of the product, whose slices add into one whole f32 result;
 * WHOLE, one slice. */
typedef enum cut_rule { WHOLE, ROWS, FIRST, DEPTH } cut_rule;

/* The op table's slices column (core/op_table.h): how each op's slices cut its operands, some
 * decided by the step's attributes and shapes (rule_of). */
typedef enum slice_kind {
  SLICES_WHOLE,
  SLICES_ROWS,
  SLICES_FIRST,
  SLICES_AXIS,
  SLICES_LAST_AXIS,
  SLICES_MATMUL
} slice_kind;
#define SLICE_KIND(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias, workspace,   \
                   vjp, cpu, cuda, vulkan, dtypes, slices, ...)                                                        \
  [TF_OP_##ID] = SLICES_##slices,
static const slice_kind slice_kinds[TF_OP_COUNT] = {TF_OP_TABLE(SLICE_KIND)};
#undef SLICE_KIND

static slice_kind kind_of(tf_op op) { return (int)op >= 0 && op < TF_OP_COUNT ? slice_kinds[op] : SLICES_WHOLE; }

static bool is_depth_product(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs) {
  return kind_of(op) == SLICES_MATMUL && n_inputs == 2 && attrs->u.matmul.transpose_a && !attrs->u.matmul.transpose_b &&
         inputs[0].rank == 2 && inputs[1].rank == 2 && inputs[0].shape[0] == inputs[1].shape[0] &&
         inputs[0].shape[0] > 1;
}

static cut_rule rule_of(tf_op op, const tf_attrs *attrs, const tf_tensor_ref *out) {
  switch (kind_of(op)) {
  case SLICES_ROWS: return ROWS;
  case SLICES_FIRST: return FIRST;
  case SLICES_AXIS: {
    const int32_t axis = attrs->u.axis.axis < 0 ? attrs->u.axis.axis + out->rank : attrs->u.axis.axis;
    return axis > 0 ? ROWS : WHOLE;
  }
  case SLICES_LAST_AXIS: return out->rank >= 2 ? ROWS : WHOLE; /* normalised over the last axis */
  case SLICES_MATMUL:
    if (out->rank >= 3) /* batch axes: operands of the output's rank cut by batch, a rank-2 one whole */
      return ROWS;
    return attrs->u.matmul.transpose_a ? WHOLE : FIRST; /* rows of A; a transposed A's rows are its columns */
  default: return WHOLE;
  }
}

static bool cut_operand(cut_rule rule, const tf_tensor_ref *t, int32_t k, bool output, const tf_tensor_ref *out) {
  const bool input0 = k == 0 && !output;
  if (rule == DEPTH)
    return !output && k < 2;
  if (rule == FIRST)
    return (input0 || output) && t->rank >= 1 && t->shape[0] == out->shape[0];
  return rule == ROWS && t->rank == out->rank && t->shape[0] == out->shape[0];
}

tf_tensor_ref tf_cpu_half_slice_of(const tf_tensor_ref *t, bool cut, int64_t first, int64_t rows) {
  tf_tensor_ref slice = *t;
  if (!cut || t->rank < 1 || t->shape[0] == 0)
    return slice;
  const int64_t row_elements = t->count / t->shape[0];
  slice.shape[0] = rows;
  slice.count = rows * row_elements;
  if (t->data)
    slice.data = (char *)t->data + first * row_elements * tf_dtype_size(t->dtype);
  return slice;
}

static int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

/* What a slice's rows must be a multiple of: 1, but for a matmul whose rows of C are tiled in one
 * product (kernels/cpu/matmul.c), whole row tiles (TF_CPU_MATMUL_ROW_TILE), so that every BLAS call
 * of a slice is one of the whole product's, and for a depth cut whole depth tiles. A batched product (B with a batch)
 * tiles each batch entry alone: any cut by batch keeps its calls. */
static int64_t granule_of(cut_rule rule, tf_op op, const tf_attrs *attrs, const tf_tensor_ref *b,
                          const tf_tensor_ref *out) {
  if (rule == DEPTH)
    return TF_CPU_MATMUL_DEPTH_TILE;
  if (kind_of(op) != SLICES_MATMUL || out->rank < 2 || out->shape[0] == 0)
    return 1;
  if (out->rank == 2)
    return TF_CPU_MATMUL_ROW_TILE;
  int64_t b_batch = 1;
  for (int32_t d = 0; d < b->rank - 2; d++)
    b_batch *= b->shape[d];
  if (attrs->u.matmul.transpose_a || b_batch != 1)
    return 1;
  const int64_t flattened_rows =
      out->count / out->shape[0] / (out->shape[out->rank - 1] ? out->shape[out->rank - 1] : 1);
  return TF_CPU_MATMUL_ROW_TILE / gcd(flattened_rows, TF_CPU_MATMUL_ROW_TILE);
}

/* The largest cut operand's elements per row (1 at least). */
static int64_t widest_row(const tf_cpu_half_slices *s, int32_t n, const tf_tensor_ref *const *operands) {
  int64_t widest = 1;
  for (int32_t k = 0; k < n; k++)
    if (((s->cut >> k) & 1u) && operands[k]->shape[0] > 0 && operands[k]->count / operands[k]->shape[0] > widest)
      widest = operands[k]->count / operands[k]->shape[0];
  return widest;
}

bool tf_cpu_half_slices_get(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                            int32_t n_outputs, const tf_tensor_ref *outputs, int32_t threads, tf_cpu_half_slices *s) {
  memset(s, 0, sizeof(*s));
  const int32_t n = n_inputs + n_outputs;
  if (n > TF_CPU_HALF_MAX_OPERANDS || n_outputs < 1)
    return false;
  const tf_tensor_ref *operands[TF_CPU_HALF_MAX_OPERANDS];
  for (int32_t k = 0; k < n; k++)
    operands[k] = k < n_inputs ? &inputs[k] : &outputs[k - n_inputs];
  const tf_tensor_ref *out = &outputs[0];
  cut_rule rule = out->rank >= 1 && out->shape[0] > 1 ? rule_of(op, attrs, out) : WHOLE;
  if (is_depth_product(op, attrs, n_inputs, inputs))
    rule = DEPTH;
  for (int32_t k = 0; k < n; k++) {
    if (cut_operand(rule, operands[k], k, k >= n_inputs, out))
      s->cut |= 1u << k;
    if (is_half(operands[k]->dtype) && !(k < n_inputs && tf_op_input_shape_only(op, k)))
      s->widened |= 1u << k;
  }
  if (rule == DEPTH)
    s->summed = 1u << n_inputs; /* the product, whole, summed over the slices */
  s->rows = !s->cut ? 1 : rule == DEPTH ? inputs[0].shape[0] : out->shape[0];
  s->slice_rows = s->rows;
  if (s->cut) {
    const int64_t granule = n_inputs >= 2 ? granule_of(rule, op, attrs, &inputs[1], out) : 1;
    const int64_t per_slice = TF_CPU_HALF_SLICE_ELEMENTS / widest_row(s, n, operands) / granule * granule;
    s->slice_rows = per_slice < granule ? granule : per_slice;
    if (s->slice_rows > s->rows)
      s->slice_rows = s->rows;
  }
  // The f32 copies of one slice's half operands, each 64-byte aligned, then the kernel's workspace.
  tf_tensor_ref slice[TF_CPU_HALF_MAX_OPERANDS];
  int64_t offset = 0;
  for (int32_t k = 0; k < n; k++) {
    slice[k] = tf_cpu_half_slice_of(operands[k], (s->cut >> k) & 1u, 0, s->slice_rows);
    if ((s->widened >> k) & 1u) {
      slice[k].dtype = TF_F32;
      s->scratch_offset[k] = offset;
      offset += align_up(slice[k].count * 4);
    }
  }
  s->inner_offset = offset;
  s->inner_bytes = align_up(
      tf_cpu_workspace_bytes(op, attrs, n_inputs, slice, n_outputs, slice + n_inputs, threads, (int32_t)sizeof(float)));
  return true;
}

/* The fused loss head's forms without accumulators (as kernels/cuda/table.cu's is_half_head). */
static bool is_head(tf_op op) {
  return tf_op_workspace_rule(op) == TF_WORKSPACE_LINEAR_CROSS_ENTROPY && !tf_linear_loss_accumulates(op);
}

bool tf_cpu_half_own_kernel(tf_op op, int32_t n_inputs, const tf_tensor_ref *inputs) {
  if (is_head(op))
    return n_inputs >= 3 && is_half(inputs[0].dtype);
  /* int32 links in the gradient's workspace: ids and rows below 2^31 */
  if (op == TF_OP_EMBEDDING_GRAD)
    return n_inputs == 3 && is_half(inputs[1].dtype) && inputs[0].count < INT32_MAX && inputs[2].rank == 2 &&
           inputs[2].shape[0] < INT32_MAX;
  if (op == TF_OP_EMBEDDING)
    return n_inputs == 2 && is_half(inputs[1].dtype);
  if (op == TF_OP_BATCH_NORM_RUNNING) /* half x, f32 running statistics updated in place */
    return n_inputs == 3 && is_half(inputs[0].dtype) && inputs[1].dtype == TF_F32 && inputs[2].dtype == TF_F32;
  return false;
}

tf_cpu_embedding_grad_half_layout tf_cpu_embedding_grad_half_layout_of(int64_t ids, int64_t rows) {
  tf_cpu_embedding_grad_half_layout at = {.first_offset = 0};
  at.next_offset = align_up(4 * rows);
  at.bytes = at.next_offset + align_up(4 * ids);
  return at;
}

/* The fused loss head's workspace on half data (kernels/cpu/linear_loss_half.c). */
static int64_t head_workspace_bytes(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs) {
  const tf_linear_loss_geometry g = tf_linear_loss_geometry_of(attrs, &inputs[0], &inputs[1]);
  return tf_linear_loss_half_workspace_of(&g, op != TF_OP_LINEAR_CROSS_ENTROPY,
                                          tf_linear_loss_bias_input(op, n_inputs) >= 0)
      .bytes;
}

int64_t tf_cpu_half_workspace_bytes(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                                    int32_t n_outputs, const tf_tensor_ref *outputs, int32_t threads) {
  if (tf_cpu_half_own_kernel(op, n_inputs, inputs)) {
    if (op == TF_OP_EMBEDDING_GRAD)
      return tf_cpu_embedding_grad_half_layout_of(inputs[0].count, inputs[2].shape[0]).bytes;
    return op == TF_OP_EMBEDDING || op == TF_OP_BATCH_NORM_RUNNING ? 0
                                                                   : head_workspace_bytes(op, attrs, n_inputs, inputs);
  }
  tf_cpu_half_slices s;
  if (!tf_cpu_half_slices_get(op, attrs, n_inputs, inputs, n_outputs, outputs, threads, &s))
    return 0;
  return s.inner_offset + s.inner_bytes;
}

bool tf_cpu_half_pays(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                      const tf_tensor_ref *output0) {
  if (tf_cpu_half_own_kernel(op, n_inputs, inputs))
    return true;
  tf_cpu_half_slices s;
  if (!tf_cpu_half_slices_get(op, attrs, n_inputs, inputs, 1, output0, 1, &s))
    return false;
  if (s.rows >= TF_CPU_HALF_MIN_SLICES * s.slice_rows)
    return true;
  int64_t half_elements = 0;
  for (int32_t k = 0; k < n_inputs; k++)
    half_elements += ((s.widened >> k) & 1u) ? inputs[k].count : 0;
  return half_elements <= TF_CPU_HALF_SLICE_ELEMENTS;
}
