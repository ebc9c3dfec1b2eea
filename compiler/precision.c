/* Pass 5, precision (config.precision bf16 or f16): the activations kept for the backward pass are
 * stored in half precision. Every kernel still computes in f32 from f32 operands, as the CPU
 * kernels do for every op, so the numbers change only where a saved activation is rounded to the
 * half type: the forward pass runs exactly as in f32 (its readers read the f32 tensor), and each
 * backward or recompute reader reads an f32 copy cast back from the stored half, made just
 * before its first reader. Weights, gradients, optimizer state and the loss stay f32; gradients
 * never pass through a half type, so f16 needs no loss scaling here (an activation beyond f16's
 * range becomes infinite, and the run's loss check stops it).
 *
 * Runs after remat, so it stores what recompute keeps (checkpoints included); the cast down is
 * placed right after the activation's producer (t->follows), the cast back as a recompute node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"

static tf_dtype half_type(tf_precision precision) { return precision == TF_PRECISION_F16 ? TF_F16 : TF_BF16; }

static bool reads_input(const tf_ir_node *node, int32_t k) {
  const tf_op_info *info = tf_op_info_get(node->op);
  return !(k < 8 && ((info->shape_only >> k) & 1u));
}

/* stored[tensor]: an f32 forward activation that a backward or recompute node reads, except the
 * loss and the loss op's inputs (the logits): their backward reader is the first backward step, so
 * a half copy would live beside its f32 copy at the moment the peak is reached, costing bytes. */
static bool *find_stored(const tf_training *t) {
  const tf_graph *g = t->g;
  bool *stored = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof(bool));
  if (!stored)
    return NULL;
  int32_t loss_node = t->loss >= 0 ? g->tensors[t->loss].producer : -1;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (t->phase[n] != TF_PHASE_BACKWARD && t->phase[n] != TF_PHASE_RECOMPUTE)
      continue;
    const tf_ir_node *node = &g->nodes[n];
    for (int32_t k = 0; k < node->n_inputs; k++) {
      int32_t in = node->inputs[k];
      int32_t producer = g->tensors[in].producer;
      bool loss_input = false;
      for (int32_t j = 0; loss_node >= 0 && j < g->nodes[loss_node].n_inputs; j++)
        loss_input = loss_input || g->nodes[loss_node].inputs[j] == in;
      if (reads_input(node, k) && producer >= 0 && t->phase[producer] == TF_PHASE_FORWARD && in != t->loss &&
          !loss_input && g->tensors[in].kind == TF_ACTIVATION && g->tensors[in].dtype == TF_F32 &&
          t->role[in] == TF_ROLE_ACTIVATION)
        stored[in] = true;
    }
  }
  return stored;
}

static tf_attrs cast_to(tf_dtype dtype) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_CAST;
  attrs.u.cast.to = dtype;
  return attrs;
}

/* Stores activation `x` as `half`: a cast down after its producer, a cast back for its later readers
 * (nodes [0, n_nodes) that are backward or recompute). Adds the bytes saved to *saved. */
static tf_status store_in_half(tf_training *t, int32_t x, tf_dtype half, int32_t n_nodes, int64_t *saved) {
  tf_graph *g = t->g;
  char name[600];
  snprintf(name, sizeof(name), "%s/stored_%s", g->tensors[x].name, tf_dtype_name(half));
  tf_attrs down = cast_to(half), up = cast_to(TF_F32);
  int32_t stored, restored;
  TF_RETURN_IF_ERROR(tf_training_emit(t, TF_OP_CAST, &x, 1, &down, TF_PHASE_FORWARD, name, &stored));
  t->follows[g->tensors[stored].producer] = g->tensors[x].producer;
  snprintf(name, sizeof(name), "%s/restored_f32", g->tensors[x].name);
  TF_RETURN_IF_ERROR(tf_training_emit(t, TF_OP_CAST, &stored, 1, &up, TF_PHASE_RECOMPUTE, name, &restored));
  for (int32_t n = 0; n < n_nodes; n++) {
    if (t->phase[n] != TF_PHASE_BACKWARD && t->phase[n] != TF_PHASE_RECOMPUTE)
      continue;
    tf_ir_node *node = &g->nodes[n];
    for (int32_t k = 0; k < node->n_inputs; k++)
      if (node->inputs[k] == x && reads_input(node, k))
        node->inputs[k] = restored;
  }
  *saved += g->tensors[x].bytes - g->tensors[stored].bytes;
  return NULL;
}

tf_status tf_precision_pass(tf_training *t) {
  tf_precision precision = t->config.precision;
  if (precision == TF_PRECISION_F32 || !t->options.training) {
    snprintf(t->precision_notes, sizeof(t->precision_notes), "precision: f32");
    return NULL;
  }
  bool *stored = find_stored(t);
  if (!stored)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "precision: out of memory");
  tf_dtype half = half_type(precision);
  int32_t n_tensors = t->g->n_tensors, n_nodes = t->g->n_nodes, count = 0;
  int64_t saved = 0;
  tf_status status = NULL;
  for (int32_t x = 0; x < n_tensors && !status; x++) {
    if (!stored[x])
      continue;
    status = store_in_half(t, x, half, n_nodes, &saved);
    count++;
  }
  free(stored);
  snprintf(t->precision_notes, sizeof(t->precision_notes),
           "precision: %s storage for the %d activations kept for the backward pass (%.1f MiB less than f32); "
           "weights, gradients, optimizer state and every kernel's arithmetic in f32",
           tf_dtype_name(half), count, (double)saved / 1048576.0);
  return status;
}
