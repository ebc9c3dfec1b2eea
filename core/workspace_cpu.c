/* Workspace sizes of every CPU kernel. Only the convolutions, fused attention and the fused loss
 * heads need scratch on f32 data; the layouts are described in core/workspace_cpu.h, which the
 * kernels read too. A step on f16/bf16 data takes its half slices' (core/half_slices.h). */
#include "core/workspace_cpu.h"

#include "core/ctc.h"
#include "core/half_slices.h"
#include "core/linear_loss.h"

#include <stddef.h>

#include "core/workspace.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* a x b, saturated at INT64_MAX: a plan with such a size never fits, and must not wrap around. */
static int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}

static int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

int64_t tf_cpu_workspace_round(int64_t elements) {
  int64_t align = TF_CPU_WORKSPACE_ALIGN_ELEMENTS;
  if (elements > INT64_MAX - align)
    return INT64_MAX;
  return (elements + align - 1) / align * align;
}

/* Splits the response positions into blocks whose column matrix stays near TF_CPU_CONV_COLUMN_LIMIT. */
static void choose_chunks(tf_cpu_conv_geometry *g) {
  if (g->positions == 0) {
    g->chunk = g->chunks = 0;
    return;
  }
  int64_t column = saturating_mul(g->column_rows, g->positions);
  int64_t blocks = g->direct ? 1 : ceil_div(column, TF_CPU_CONV_COLUMN_LIMIT);
  int64_t chunk = ceil_div(g->positions, blocks > 0 ? blocks : 1);
  if (chunk < TF_CPU_CONV_MIN_CHUNK)
    chunk = TF_CPU_CONV_MIN_CHUNK;
  if (chunk > g->positions)
    chunk = g->positions;
  g->chunk = chunk;
  g->chunks = ceil_div(g->positions, chunk);
}

bool tf_cpu_conv_geometry_get(tf_op op, const tf_attrs *attrs, const tf_tensor_ref *inputs,
                              const tf_tensor_ref *outputs, tf_cpu_conv_geometry *g) {
  if (!tf_conv_geometry_fill(op, attrs, inputs, outputs, g))
    return false;
  choose_chunks(g);
  return true;
}

int64_t tf_cpu_conv_column_elements(const tf_cpu_conv_geometry *g) {
  if (g->direct)
    return 0;
  return tf_cpu_workspace_round(saturating_mul(g->column_rows, g->chunk));
}

static bool is_grad_weight(tf_op op) { return op == TF_OP_CONV1D_GRAD_WEIGHT || op == TF_OP_CONV2D_GRAD_WEIGHT; }

int64_t tf_cpu_conv_workers(tf_op op, const tf_cpu_conv_geometry *g, int32_t threads) {
  bool scatters = op == TF_OP_CONV_TRANSPOSE2D || op == TF_OP_CONV1D_GRAD_INPUT || op == TF_OP_CONV2D_GRAD_INPUT;
  int64_t tasks = scatters ? g->batch : saturating_mul(g->batch, g->chunks);
  int64_t workers = threads < tasks ? threads : tasks;
  return workers > 1 ? workers : 1;
}

int64_t tf_cpu_conv_workspace_elements(tf_op op, const tf_cpu_conv_geometry *g, int32_t threads) {
  int64_t workers = tf_cpu_conv_workers(op, g, threads);
  int64_t total = saturating_mul(workers, tf_cpu_conv_column_elements(g));
  if (is_grad_weight(op)) {
    int64_t weight = tf_cpu_workspace_round(saturating_mul(g->response_channels, g->column_rows));
    total = saturating_add(total, saturating_mul(workers - 1, weight));
  }
  return total;
}

int64_t tf_cpu_attention_block_rows(int64_t query_length, int64_t key_length) {
  int64_t block = key_length > 0 ? TF_CPU_ATTENTION_BLOCK_ELEMENTS / 2 / key_length : TF_CPU_ATTENTION_MAX_BLOCK_ROWS;
  block = block / TF_CPU_ATTENTION_BLOCK_ROWS * TF_CPU_ATTENTION_BLOCK_ROWS;
  block = block < TF_CPU_ATTENTION_BLOCK_ROWS ? TF_CPU_ATTENTION_BLOCK_ROWS : block;
  block = block > TF_CPU_ATTENTION_MAX_BLOCK_ROWS ? TF_CPU_ATTENTION_MAX_BLOCK_ROWS : block;
  return query_length < block ? query_length : block;
}

int64_t tf_cpu_attention_thread_elements(tf_op op, int64_t query_length, int64_t key_length) {
  int64_t block = saturating_mul(tf_cpu_attention_block_rows(query_length, key_length), key_length);
  return tf_cpu_workspace_round(saturating_mul(op == TF_OP_ATTENTION_GRAD ? 2 : 1, block));
}

int64_t tf_cpu_attention_workers(tf_op op, int64_t batch, int64_t heads, int64_t query_length, int64_t key_length,
                                 int32_t threads) {
  int64_t tasks = saturating_mul(batch, heads);
  if (op == TF_OP_ATTENTION && query_length > 0)
    tasks = saturating_mul(tasks, ceil_div(query_length, tf_cpu_attention_block_rows(query_length, key_length)));
  int64_t workers = threads < tasks ? threads : tasks;
  return workers > 1 ? workers : 1;
}

int64_t tf_cpu_workspace_bytes(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                               int32_t n_outputs, const tf_tensor_ref *outputs, int32_t threads, int32_t element_size) {
  if (threads < 1)
    threads = 1;
  if (tf_cpu_half_step(op, n_inputs, inputs, n_outputs, outputs))
    return tf_cpu_half_workspace_bytes(op, attrs, n_inputs, inputs, n_outputs, outputs, threads);
  int64_t elements = 0;
  tf_cpu_conv_geometry geometry;
  switch (tf_op_workspace_rule(op)) {
  case TF_WORKSPACE_CONV:
    tf_cpu_conv_geometry_get(op, attrs, inputs, outputs, &geometry);
    elements = tf_cpu_conv_workspace_elements(op, &geometry, threads);
    break;
  case TF_WORKSPACE_ATTENTION:
  case TF_WORKSPACE_ATTENTION_GRAD:
    elements = saturating_mul(tf_cpu_attention_workers(op, inputs[0].shape[0], attrs->u.attention.num_heads,
                                                       inputs[0].shape[1], inputs[1].shape[1], threads),
                              tf_cpu_attention_thread_elements(op, inputs[0].shape[1], inputs[1].shape[1]));
    break;
  case TF_WORKSPACE_LINEAR_CROSS_ENTROPY: {
    tf_linear_loss_geometry g = tf_linear_loss_geometry_of(attrs, &inputs[0], &inputs[1]);
    elements = tf_cpu_workspace_round(saturating_mul(g.chunk_rows, g.classes));
    break;
  }
  case TF_WORKSPACE_CTC: {
    const tf_ctc_geometry g = tf_ctc_geometry_of(&inputs[0], &inputs[1]);
    elements = tf_cpu_workspace_round(tf_ctc_workspace_elements(&g));
    break;
  }
  default: elements = 0; break; // the other rules need scratch on CUDA only
  }
  return saturating_mul(elements, element_size);
}
