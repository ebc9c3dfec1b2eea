/* The fused loss head: in a training plan, matmul(x, W) -> cross_entropy(logits, labels) whose
 * logits nothing else reads becomes one linear_cross_entropy(x, W, labels) node, which computes the
 * logits chunk_rows rows at a time in its workspace (kernels/cpu/linear_loss.c). The [rows, V]
 * logits, the largest activation of a language model, and their gradient then never exist: the
 * loss head costs one chunk instead of two full [rows, V] tensors at the peak.
 *
 * Runs on the bound copy before autodiff, so the gradient is linear_cross_entropy_grad's. The
 * logits tensor stays in the graph without producer or reader (no buffer is planned for it) and
 * leaves the output list: a fused plan has no logits to read back. */
#include <stdlib.h>

#include "compiler/training.h"
#include "core/ops.h"
#include "graph/passes.h"

/* Rows of logits computed at a time: 1/32 of the rows, but at least 256 (each chunk reads the whole
 * weight once per product: shorter chunks cost time on the CPU, 1.46x the unfused step for 64-row
 * chunks of gpt2-small at 2 x 128, 1.25x for 256), at most what keeps one chunk within 64 MiB of
 * f32, and never more than the rows. */
#define CHUNK_SHARE 32
#define CHUNK_MIN_ROWS 256
#define CHUNK_MAX_BYTES ((int64_t)64 << 20)

int64_t tf_fuse_loss_chunk_rows(int64_t rows, int64_t classes) {
  int64_t chunk = (rows + CHUNK_SHARE - 1) / CHUNK_SHARE;
  chunk = chunk < CHUNK_MIN_ROWS ? CHUNK_MIN_ROWS : chunk;
  int64_t cap = CHUNK_MAX_BYTES / (4 * (classes > 0 ? classes : 1));
  chunk = chunk > cap ? cap : chunk;
  chunk = chunk < 1 ? 1 : chunk;
  return chunk > rows ? (rows > 0 ? rows : 1) : chunk;
}

/* The matmul feeding the loss node's logits when the pair can fuse, else -1. */
static int32_t fusable_matmul(const tf_training *t, int32_t loss_node) {
  const tf_graph *g = t->g;
  const tf_ir_node *loss = &g->nodes[loss_node];
  if (loss->op != TF_OP_CROSS_ENTROPY)
    return -1;
  const int32_t logits = loss->inputs[0];
  const int32_t m = g->tensors[logits].producer;
  if (m < 0 || g->nodes[m].op != TF_OP_MATMUL || g->nodes[m].attrs.u.matmul.transpose_a)
    return -1;
  const tf_ir_tensor *x = &g->tensors[g->nodes[m].inputs[0]], *w = &g->tensors[g->nodes[m].inputs[1]];
  const tf_ir_tensor *out = &g->tensors[logits];
  if (w->rank != 2 || x->rank < 2 || x->dtype != TF_F32 || w->dtype != TF_F32 || tf_training_readers(g, logits) != 1)
    return -1;
  const int64_t classes = out->shape[out->rank - 1];
  if (t->options.fuse_loss == TF_FUSE_LOSS_AUTO &&
      (classes < TF_FUSE_LOSS_AUTO_CLASSES || out->bytes < TF_FUSE_LOSS_AUTO_BYTES))
    return -1;
  return m;
}

static void drop_output(tf_graph *g, int32_t tensor) {
  int32_t kept = 0;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] != tensor)
      g->outputs[kept++] = g->outputs[i];
  g->n_outputs = kept;
}

tf_status tf_fuse_loss_pass(tf_training *t) {
  tf_graph *g = t->g;
  if (!t->options.training || t->options.fuse_loss == TF_FUSE_LOSS_OFF || g->loss < 0)
    return NULL;
  const int32_t loss_node = g->tensors[g->loss].producer;
  const int32_t m = loss_node >= 0 ? fusable_matmul(t, loss_node) : -1;
  if (m < 0)
    return NULL;
  tf_ir_node *loss = &g->nodes[loss_node];
  const tf_ir_node *matmul = &g->nodes[m];
  const int32_t logits = loss->inputs[0], labels = loss->inputs[1];
  const tf_ir_tensor *out = &g->tensors[logits];
  int64_t classes = out->shape[out->rank - 1], rows = classes > 0 ? out->bytes / 4 / classes : 0;
  int32_t *inputs = realloc(loss->inputs, sizeof(int32_t) * 3);
  if (!inputs)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "fuse loss: out of memory");
  inputs[0] = matmul->inputs[0];
  inputs[1] = matmul->inputs[1];
  inputs[2] = labels;
  loss->inputs = inputs;
  loss->n_inputs = 3;
  loss->op = TF_OP_LINEAR_CROSS_ENTROPY;
  loss->attrs.u.cross_entropy.transpose_weight = matmul->attrs.u.matmul.transpose_b;
  loss->attrs.u.cross_entropy.chunk_rows =
      t->options.loss_chunk_rows > 0 ? t->options.loss_chunk_rows : tf_fuse_loss_chunk_rows(rows, classes);
  drop_output(g, logits);
  TF_RETURN_IF_ERROR(tf_ir_remove_node(g, m));
  const int32_t fused = loss_node > m ? loss_node - 1 : loss_node;
  return tf_status_prefix(tf_shapes_infer_node(g, fused, true), "fuse loss: node '%s'", g->nodes[fused].name);
}
