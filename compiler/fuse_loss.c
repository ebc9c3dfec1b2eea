/* The fused loss head: in a training plan, matmul(x, W) [-> add(bias)] [-> slice of rows] [->
 * reshape regrouping rows] -> cross_entropy(logits, labels) whose logits (and product) nothing else
 * reads becomes one linear_cross_entropy(x', W, labels [, bias]) node, x' being x under the same
 * row ops (a causal LM's `logits[:, :-1, :].reshape(-1, V)` as Hugging Face writes it), which computes the logits
 * chunk_rows rows at a time in its workspace (kernels/cpu/linear_loss.c). The [rows, V] logits, the largest activation
 * of a language model, and their gradient then never exist: the loss head costs one chunk instead of two full [rows, V]
 * tensors at the peak.
 *
 * Every cross_entropy node of the graph is a candidate, not only the one producing the loss: a loss
 * that sums several heads (xtts: text + audio) fuses each head that qualifies. With --fuse-loss
 * auto each head is judged on its own against the thresholds; --loss-chunk (options.loss_chunk_rows)
 * sets the chunk of every fused head.
 *
 * Runs on the bound copy before autodiff, so the gradient is linear_cross_entropy_grad's (or
 * linear_cross_entropy_bias_grad's). The logits tensor (and the product before its bias) stays in
 * the graph without producer or reader (no buffer is planned for it) and leaves the output list: a
 * fused plan has no logits to read back.
 *
 * After autodiff, tf_fuse_loss_train_pass merges the head that produces the loss with its gradient
 * node (whose dloss is the loss seed) into one linear_cross_entropy_train node of the forward pass:
 * each chunk's logits are computed once for the loss and the gradients, where the two nodes computed
 * them twice (the forward product, then its recompute): the head costs three products instead of
 * four, as much as the unfused head. The results are bit for bit those of the two nodes (the kernels
 * run the same chunks in the same order). One micro-batch per step only: with k > 1 the weight's
 * gradient part would be added to its accumulator inside the forward pass. */
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
/* CUDA with f32 products: at least 2,048 rows, at most 512 MiB of f32 logits. A 256-row chunk's dx
 * product ([256 x 768] over 50,257 classes for gpt2-small) is few tiles for a GPU's SMs and its weight
 * gradient sums 256 rows: on the H100 (sixth lend) gpt2-small's f32 step took 195 ms in 2,048-row
 * chunks against 210 in 256, for 330 MiB more (7.49 GiB against 7.16). A budget that does not hold
 * them shrinks the chunk (compiler/budget.c). Half products (autocast, bf16 math) keep the CPU's rule
 * until timed. */
#define CUDA_CHUNK_MIN_ROWS 2048
#define CUDA_CHUNK_MAX_BYTES ((int64_t)512 << 20)

int64_t tf_fuse_loss_chunk_rows(const tf_compile_options *options, int64_t rows, int64_t classes) {
  const bool gpu = options && options->target.kind == TF_TARGET_CUDA && options->matmul_math == TF_F32 &&
                   options->autocast == TF_F32;
  int64_t chunk = (rows + CHUNK_SHARE - 1) / CHUNK_SHARE;
  const int64_t least = gpu ? CUDA_CHUNK_MIN_ROWS : CHUNK_MIN_ROWS;
  chunk = chunk < least ? least : chunk;
  int64_t cap = (gpu ? CUDA_CHUNK_MAX_BYTES : CHUNK_MAX_BYTES) / (4 * (classes > 0 ? classes : 1));
  chunk = chunk > cap ? cap : chunk;
  chunk = chunk < 1 ? 1 : chunk;
  return chunk > rows ? (rows > 0 ? rows : 1) : chunk;
}

/* A cross_entropy node's head that can fuse: the product and the add of its bias, then the row ops
 * between it and the loss (-1: none): a slice of rows (HF-style `logits[:, :-1, :]`, the shift of a
 * causal LM) and a reshape that regroups the rows (`.view(-1, V)`), both keeping the class axis. */
typedef struct head {
  int32_t matmul, add, bias; /* nodes, then the bias tensor */
  int32_t slice, reshape;    /* nodes */
} head;

/* The head's floating types: f32, or a model's f16/bf16 (its fused head then computes on f32 copies
 * between casts, half_ops.c, and its logits are never rounded to the half type: the loss differs from
 * the unfused graph's by that rounding). */
static bool fusable_dtype(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

/* Whether `product` is a matmul(x [.., d], W 2-D) of one floating type that one node input reads. */
static bool fusable_product(const tf_graph *g, int32_t product) {
  const int32_t m = g->tensors[product].producer;
  if (m < 0 || g->nodes[m].op != TF_OP_MATMUL || g->nodes[m].attrs.u.matmul.transpose_a)
    return false;
  const tf_ir_tensor *x = &g->tensors[g->nodes[m].inputs[0]], *w = &g->tensors[g->nodes[m].inputs[1]];
  return w->rank == 2 && x->rank >= 2 && fusable_dtype(x->dtype) && w->dtype == x->dtype &&
         g->tensors[product].dtype == x->dtype && tf_training_readers(g, product) == 1;
}

/* Whether `bias` can be the head's bias: [V] of the logits' type, V the logits' classes. */
static bool fusable_bias(const tf_graph *g, int32_t bias, const tf_ir_tensor *logits) {
  const tf_ir_tensor *b = &g->tensors[bias];
  return b->rank == 1 && b->dtype == logits->dtype && b->shape[0] == logits->shape[logits->rank - 1];
}

/* The logits' elements. */
static int64_t elements_of(const tf_ir_tensor *x) { return x->bytes / tf_dtype_size(x->dtype); }

/* The node producing `y` when it is `op` (a reshape or a slice) and acts on rows only, so that it
 * could act on x's rows instead of the logits': a reshape that keeps the last axis, a slice along
 * another axis; its input of rank >= 2, produced by a node and read by nothing else. Else -1. */
static int32_t row_op(const tf_graph *g, int32_t y, tf_op op) {
  const int32_t r = g->tensors[y].producer;
  if (r < 0 || g->nodes[r].op != op)
    return -1;
  const int32_t x = g->nodes[r].inputs[0];
  const tf_ir_tensor *in = &g->tensors[x], *out = &g->tensors[y];
  bool rows = in->rank >= 2;
  if (op == TF_OP_RESHAPE) {
    rows = rows && in->shape[in->rank - 1] == out->shape[out->rank - 1];
  } else {
    const int32_t axis = g->nodes[r].attrs.u.slice.axis;
    const int32_t normal = axis < 0 ? axis + in->rank : axis;
    rows = rows && normal >= 0 && normal < in->rank - 1;
  }
  return rows && in->producer >= 0 && tf_training_readers(g, x) == 1 ? r : -1;
}

/* The head feeding cross_entropy node `node` when it can fuse (*out filled, true), else false:
 * logits = matmul(x, W), or add(matmul(x, W), bias) (either operand order) with a [V] bias, maybe
 * then sliced along a row axis and reshaped to regroup their rows, that nothing but the next node
 * reads, over the auto thresholds when fuse_loss is auto. */
static bool fusable_head(const tf_training *t, int32_t node, head *out) {
  const tf_graph *g = t->g;
  const tf_ir_node *loss = &g->nodes[node];
  if (loss->op != TF_OP_CROSS_ENTROPY)
    return false;
  int32_t logits = loss->inputs[0];
  const tf_ir_tensor *out_tensor = &g->tensors[logits];
  if (out_tensor->producer < 0 || out_tensor->rank < 2 || !fusable_dtype(out_tensor->dtype) ||
      tf_training_readers(g, logits) != 1)
    return false;
  head h = {.matmul = -1, .add = -1, .bias = -1, .slice = -1, .reshape = row_op(g, logits, TF_OP_RESHAPE)};
  if (h.reshape >= 0) /* the head is what the row ops read */
    logits = g->nodes[h.reshape].inputs[0];
  h.slice = row_op(g, logits, TF_OP_SLICE);
  if (h.slice >= 0)
    logits = g->nodes[h.slice].inputs[0];
  const tf_ir_tensor *head_out = &g->tensors[logits];
  const int32_t producer = head_out->producer;
  const tf_ir_node *p = &g->nodes[producer];
  if (p->op == TF_OP_MATMUL && fusable_product(g, logits)) {
    h.matmul = producer;
  } else if (p->op == TF_OP_ADD) {
    for (int32_t k = 0; k < 2 && h.matmul < 0; k++) {
      const int32_t product = p->inputs[k], bias = p->inputs[1 - k];
      const tf_ir_tensor *y = &g->tensors[product];
      /* the product has the logits' shape: the bias only broadcasts over its rows */
      bool same_shape = y->rank == head_out->rank && y->bytes == head_out->bytes;
      if (same_shape && product != bias && fusable_product(g, product) && fusable_bias(g, bias, out_tensor)) {
        h.matmul = g->tensors[product].producer;
        h.add = producer;
        h.bias = bias;
      }
    }
  }
  if (h.matmul < 0)
    return false;
  const int64_t classes = out_tensor->shape[out_tensor->rank - 1];
  /* the auto threshold counts the logits in f32, whatever their type (a half model's are widened) */
  if (t->options.fuse_loss == TF_FUSE_LOSS_AUTO &&
      (classes < TF_FUSE_LOSS_AUTO_CLASSES || 4 * elements_of(out_tensor) < TF_FUSE_LOSS_AUTO_BYTES))
    return false;
  *out = h;
  return true;
}

static void drop_output(tf_graph *g, int32_t tensor) {
  int32_t kept = 0;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] != tensor)
      g->outputs[kept++] = g->outputs[i];
  g->n_outputs = kept;
}

/* Reshape node r now regroups rows of d features as it did the logits': its target becomes the
 * logits' leading dims and d (the bound graph's shapes are concrete). */
static void reshape_rows_of(tf_graph *g, int32_t r, int64_t d, const tf_ir_tensor *logits) {
  tf_shape *target = &g->nodes[r].attrs.u.shape.shape;
  target->rank = logits->rank;
  for (int32_t i = 0; i < logits->rank; i++)
    target->dims[i] = (tf_dim){i + 1 < logits->rank ? logits->shape[i] : d, -1};
}

/* Infers node n's shapes again after a fusion changed its inputs (n < 0: none). */
static tf_status infer_again(tf_graph *g, int32_t n) {
  return n < 0 ? NULL : tf_status_prefix(tf_shapes_infer_node(g, n, true), "fuse loss: node '%s'", g->nodes[n].name);
}

/* Node `node` (cross_entropy) becomes linear_cross_entropy over head `h`; the head's matmul and
 * add leave the graph, its row ops (if any) act on the rows of x instead: x[:, :-1] W is
 * (x W)[:, :-1], and rows regrouped alike stay paired with their labels. */
static tf_status fuse(tf_training *t, int32_t node, head h) {
  tf_graph *g = t->g;
  tf_ir_node *loss = &g->nodes[node];
  const tf_ir_node *matmul = &g->nodes[h.matmul];
  const int32_t logits = loss->inputs[0], labels = loss->inputs[1], product = matmul->outputs[0];
  const int32_t x = matmul->inputs[0];
  const int64_t d = g->tensors[x].shape[g->tensors[x].rank - 1];
  /* the tensors between the head and the loss, none of them a graph output any longer */
  const int32_t sliced = h.slice >= 0 ? g->nodes[h.slice].outputs[0] : -1;
  const int32_t head_out = h.slice >= 0     ? g->nodes[h.slice].inputs[0]
                           : h.reshape >= 0 ? g->nodes[h.reshape].inputs[0]
                                            : logits;
  int32_t rows_of_x = x; /* what the fused node reads: x after the row ops */
  if (h.slice >= 0) {
    g->nodes[h.slice].inputs[0] = x;
    rows_of_x = sliced;
  }
  if (h.reshape >= 0) {
    g->nodes[h.reshape].inputs[0] = rows_of_x;
    reshape_rows_of(g, h.reshape, d, &g->tensors[logits]);
    rows_of_x = logits;
  }
  const tf_ir_tensor *out = &g->tensors[logits];
  int64_t classes = out->shape[out->rank - 1], rows = classes > 0 ? elements_of(out) / classes : 0;
  const int32_t n_inputs = h.bias >= 0 ? 4 : 3;
  int32_t *inputs = realloc(loss->inputs, sizeof(int32_t) * (size_t)n_inputs);
  if (!inputs)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "fuse loss: out of memory");
  inputs[0] = rows_of_x;
  inputs[1] = matmul->inputs[1];
  inputs[2] = labels;
  if (h.bias >= 0)
    inputs[3] = h.bias;
  loss->inputs = inputs;
  loss->n_inputs = n_inputs;
  loss->op = TF_OP_LINEAR_CROSS_ENTROPY;
  loss->attrs.u.cross_entropy.transpose_weight = matmul->attrs.u.matmul.transpose_b;
  loss->attrs.u.cross_entropy.chunk_rows =
      t->options.loss_chunk_rows > 0 ? t->options.loss_chunk_rows : tf_fuse_loss_chunk_rows(&t->options, rows, classes);
  drop_output(g, logits);
  drop_output(g, head_out);
  drop_output(g, product);
  if (sliced >= 0)
    drop_output(g, sliced);
  /* the higher index first, so the lower one still names its node */
  int32_t kept[3] = {node, h.slice, h.reshape}; /* the fused node and the row ops, renumbered below */
  const int32_t first = h.add > h.matmul ? h.add : h.matmul, second = h.add > h.matmul ? h.matmul : h.add;
  for (int32_t r = 0; r < 2; r++) {
    const int32_t removed = r == 0 ? first : second;
    if (removed < 0)
      continue;
    TF_RETURN_IF_ERROR(tf_ir_remove_node(g, removed));
    for (int32_t k = 0; k < 3; k++)
      kept[k] -= kept[k] > removed;
  }
  TF_RETURN_IF_ERROR(infer_again(g, kept[1]));
  TF_RETURN_IF_ERROR(infer_again(g, kept[2]));
  return infer_again(g, kept[0]);
}

tf_status tf_fuse_loss_pass(tf_training *t) {
  tf_graph *g = t->g;
  if (!t->options.training || t->options.fuse_loss == TF_FUSE_LOSS_OFF || g->loss < 0)
    return NULL;
  /* each fusion removes nodes before or after the candidate: scan again from the start until no
   * cross_entropy node qualifies (a fused node is no longer one) */
  for (bool fused = true; fused;) {
    fused = false;
    for (int32_t n = 0; n < g->n_nodes && !fused; n++) {
      head h;
      if (fusable_head(t, n, &h)) {
        TF_RETURN_IF_ERROR(fuse(t, n, h));
        fused = true;
      }
    }
  }
  return NULL;
}

/* The gradient node of fused head `f` that reads the loss seed (dloss = grad/loss_seed), or -1. */
static int32_t seeded_gradient(const tf_training *t, int32_t f) {
  const tf_graph *g = t->g;
  const tf_ir_node *fused = &g->nodes[f];
  for (int32_t n = t->n_forward_nodes; n < g->n_nodes; n++) {
    const tf_ir_node *node = &g->nodes[n];
    if ((node->op != TF_OP_LINEAR_CROSS_ENTROPY_GRAD && node->op != TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD) ||
        node->inputs[3] != t->loss_seed)
      continue;
    bool same = true;
    for (int32_t k = 0; k < 3; k++)
      same = same && node->inputs[k] == fused->inputs[k];
    if (same)
      return n;
  }
  return -1;
}

tf_status tf_fuse_loss_train_pass(tf_training *t) {
  tf_graph *g = t->g;
  if (!t->options.training || t->loss < 0 || t->loss_seed < 0 || t->config.accumulate_steps != 1)
    return NULL;
  const int32_t f = g->tensors[t->loss].producer;
  if (f != t->n_forward_nodes - 1 || g->nodes[f].op != TF_OP_LINEAR_CROSS_ENTROPY)
    return NULL;
  const int32_t n = seeded_gradient(t, f);
  if (n < 0)
    return NULL;
  tf_ir_node *fused = &g->nodes[f], *grad = &g->nodes[n];
  free(fused->inputs);
  fused->inputs = grad->inputs;
  fused->n_inputs = grad->n_inputs;
  grad->inputs = NULL;
  fused->op = grad->op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD ? TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN
                                                               : TF_OP_LINEAR_CROSS_ENTROPY_TRAIN;
  for (int32_t k = 0; k < grad->n_outputs; k++) {
    fused->outputs[1 + k] = grad->outputs[k];
    g->tensors[grad->outputs[k]].producer = f;
  }
  fused->n_outputs = 1 + grad->n_outputs;
  grad->n_outputs = 0;
  TF_RETURN_IF_ERROR(tf_training_remove_node(t, n));
  return tf_status_prefix(tf_shapes_infer_node(g, f, true), "fuse loss: node '%s'", g->nodes[f].name);
}
