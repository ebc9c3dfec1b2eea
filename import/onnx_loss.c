/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * PyTorch's F.cross_entropy as it exports by default (SoftmaxCrossEntropyLoss, mean, no class
 * weights, ignore_index -100), and NegativeLogLikelihoodLoss of a LogSoftmax over the classes
 * (F.nll_loss(F.log_softmax(x, 1)), fused by the patterns stage) likewise, become the cross_entropy
 * op itself: any number of
 * classes, labels equal to ignore_index left out of the mean, and the runtime's data check refuses
 * any other label outside [0, C) as PyTorch does. A mean over no counted label is 0 there (ONNX and
 * PyTorch: 0/0, NaN).
 *
 * The other forms (class weights, reduction none or sum, NLL of other log-probabilities) are
 * composites of existing ops. tightfit has no integer arithmetic, so the labels pick their class
 * through an embedding: the label ids look up rows of a constant C x C identity table, which gives
 * a one-hot f32 tensor, times the class weights when there are any:
 *
 *   x      [N, C, d...] moved to [N, d..., C] (a transpose; none for [N, C])
 *   w_hot  embedding(labels, identity) * weight             [N, d..., C]
 *   loss   -sum(x * w_hot, last axis)                        [N, d...]: -x[label] weight[label]
 *   sum    sum(loss);  mean  sum(loss) / sum(w_hot)
 *
 * Each element of loss is one product, exact as ONNX's (the other terms are x * 0 = 0, x finite).
 * SoftmaxCrossEntropyLoss is that of log_softmax(x) over the class axis, with log_softmax(x) as its
 * optional second output. An ignore_index in [0, C) zeroes its row of the table. One outside it
 * (PyTorch's -100) is masked instead (ignored_labels): keep = [label != ignore_index] as an f32 0/1
 * mask (onnx_mask.c's equality), the labels times keep (so in [0, C) when ignored) look up the
 * table, and the one-hot rows are multiplied by keep. Those labels are computed, so no data check
 * sees them: a label outside [0, C) that is not ignored finds a zero row (the embedding kernels'
 * rule), and the loss adds -log(keep - sum(hot)) = +inf at it (0 elsewhere, exactly), which stops
 * training with a non-finite loss rather than leaving the label out unnoticed. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"

/* The identity table's size is C^2 floats, stored in the weights file. */
#define OX_LOSS_MAX_CLASSES 2048
/* An ignore_index outside the classes is compared with the labels in f32: exact below this. */
#define OX_LOSS_EXACT_LABEL 16777216

typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_reduction;

static tf_status reduction_of(ox_import *im, const ox_node *node, loss_reduction *out) {
  const Onnx__AttributeProto *a = ox_attr(node, "reduction");
  const char *names[3] = {"none", "sum", "mean"};
  *out = LOSS_MEAN;
  if (!a || !a->has_s)
    return NULL;
  for (int32_t i = 0; i < 3; i++)
    if (a->s.len == strlen(names[i]) && memcmp(a->s.data, names[i], a->s.len) == 0) {
      *out = (loss_reduction)i;
      return NULL;
    }
  return ox_fail(im, node, TF_ERR_INVALID_INPUT, "reduction '%.*s' (none, sum or mean)", (int)a->s.len,
                 (const char *)a->s.data);
}

/* x [N, C, d...] with the class axis moved last (back: the inverse). */
static tf_tensor_id move_classes(ox_import *im, tf_tensor_id x, int32_t rank, bool back) {
  if (rank == 2)
    return x;
  int32_t perm[TF_MAX_RANK];
  perm[0] = 0;
  for (int32_t i = 1; i < rank; i++)
    perm[i] = back ? (i == 1 ? rank - 1 : i - 1) : (i == rank - 1 ? 1 : i + 1);
  return tf_transpose(im->graph, x, perm, rank);
}

/* The C x C identity, row `ignored` zeroed (none when it is -1), as a graph constant. */
static tf_status one_hot_table(ox_import *im, const ox_node *node, int64_t classes, int64_t ignored,
                               tf_tensor_id *out) {
  const int64_t shape[2] = {classes, classes};
  ox_known *k = ox_known_new(true, TF_F32, 2, shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for a %" PRId64 "-class table", classes);
  for (int64_t i = 0; i < classes; i++)
    k->reals[i * classes + i] = i == ignored ? 0.0 : 1.0;
  char name[300];
  snprintf(name, sizeof(name), "%s.one_hot", node->proto->output[0]);
  return ox_known_constant(im, node, name, k, out);
}

/* The one-hot rows [N, d..., C] of labels [N, d...] whose ignore_index lies outside the table (the
 * top comment): *hot zero where a label is ignored; *invalid +inf where a label is neither ignored
 * nor in [0, C) (it found no row), else 0. */
static tf_status ignored_labels(ox_import *im, const ox_node *node, tf_tensor_id labels, int64_t ignored,
                                tf_tensor_id table, tf_tensor_id *hot, tf_tensor_id *invalid) {
  tf_graph *g = im->graph;
  tf_tensor_id wide = tf_cast(g, labels, TF_F32), one = ox_scalar(im, node, TF_F32, 1.0);
  tf_tensor_id keep =
      tf_sub(g, one, ox_equal_mask(im, node, wide, ox_scalar(im, node, TF_F32, (double)ignored), false));
  tf_tensor_id safe = tf_cast(g, tf_mul(g, wide, keep), ox_dtype_of(im, labels));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, labels, &rank, dims);
  if (rank + 1 > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "labels of rank %" PRId32 " (at most %d)", rank, TF_MAX_RANK - 1);
  dims[rank] = (tf_dim){1, -1};
  *hot = tf_mul(g, tf_embedding(g, safe, table), tf_reshape(g, keep, tf_shape_from(dims, rank + 1)));
  tf_tensor_id found = tf_reduce(g, TF_OP_SUM, *hot, &rank, 1, false);
  *invalid = tf_unary(g, TF_OP_NEG, tf_unary(g, TF_OP_LOG, tf_sub(g, one, tf_sub(g, keep, found))));
  return ox_graph_error(im, node);
}

/* PyTorch's default cross-entropy (the top comment): the cross_entropy op of logits x [N, C, d...]
 * and labels input 1, ignore_index (or none) as the node says. */
static tf_status cross_entropy_op(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t rank, tf_tensor_id *out) {
  tf_tensor_id labels;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &labels));
  const int64_t ignored = ox_attr(node, "ignore_index") ? ox_attr_int(node, "ignore_index", -1) : INT64_MIN;
  *out = tf_cross_entropy(im->graph, move_classes(im, x, rank, false), labels, ignored);
  return ox_graph_error(im, node);
}

/* Whether the node is a mean with no class weights and, for SoftmaxCrossEntropyLoss, no log_prob
 * output: the cross_entropy op's form. */
static tf_status is_plain_mean(ox_import *im, const ox_node *node, bool *out) {
  loss_reduction reduction;
  TF_RETURN_IF_ERROR(reduction_of(im, node, &reduction));
  *out = reduction == LOSS_MEAN && !ox_input(node, 2) && (node->proto->n_output < 2 || !*node->proto->output[1]);
  return NULL;
}

/* The sum of every element of x, a scalar. */
static tf_tensor_id total(tf_graph *g, tf_tensor_id x) {
  int32_t every = 0; /* n_axes 0: all of them */
  return tf_reduce(g, TF_OP_SUM, x, &every, 0, false);
}

/* The loss from log-probabilities xt [N, d..., C] (classes last), labels input 1, weight input 2. */
static tf_status nll(ox_import *im, const ox_node *node, tf_tensor_id xt, tf_tensor_id *out) {
  loss_reduction reduction;
  TF_RETURN_IF_ERROR(reduction_of(im, node, &reduction));
  tf_tensor_id labels;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &labels));
  const tf_dtype label_type = ox_dtype_of(im, labels);
  if (label_type != TF_I32 && label_type != TF_I64)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "labels are %s (i32 or i64 class ids)", tf_dtype_name(label_type));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node)); /* xt is made by the caller (a transpose, a log_softmax) */
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, xt, &rank, dims);
  if (rank < 1)
    return ox_fail(im, node, TF_ERR_INTERNAL, "the scores have no class axis");
  const tf_dim classes = dims[rank - 1];
  if (classes.symbol >= 0 || classes.size < 1 || classes.size > OX_LOSS_MAX_CLASSES)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "the class axis must be a fixed size from 1 to %d",
                   OX_LOSS_MAX_CLASSES);
  const bool ignores = ox_attr(node, "ignore_index") != NULL;
  const int64_t ignored = ignores ? ox_attr_int(node, "ignore_index", -1) : -1;
  const bool masked = ignores && (ignored < 0 || ignored >= classes.size);
  if (masked && (ignored <= -OX_LOSS_EXACT_LABEL || ignored >= OX_LOSS_EXACT_LABEL))
    return ox_fail(
        im, node, TF_ERR_UNSUPPORTED,
        "ignore_index %" PRId64 " (outside the classes, only from -2^24 to 2^24: labels are compared in f32)", ignored);
  tf_tensor_id table;
  TF_RETURN_IF_ERROR(one_hot_table(im, node, classes.size, masked ? -1 : ignored, &table));
  tf_graph *g = im->graph;
  tf_tensor_id hot, invalid = TF_NO_TENSOR;
  if (masked)
    TF_RETURN_IF_ERROR(ignored_labels(im, node, labels, ignored, table, &hot, &invalid));
  else
    hot = tf_embedding(g, labels, table);
  if (ox_dtype_of(im, xt) != TF_F32)
    hot = tf_cast(g, hot, ox_dtype_of(im, xt));
  if (ox_input(node, 2)) {
    tf_tensor_id weight;
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &weight));
    ox_match_half(im, &hot, &weight);
    hot = tf_mul(g, hot, weight);
  }
  int32_t last = rank - 1;
  tf_tensor_id loss = tf_unary(g, TF_OP_NEG, tf_reduce(g, TF_OP_SUM, tf_mul(g, xt, hot), &last, 1, false));
  if (invalid != TF_NO_TENSOR)
    loss = tf_add(g, loss, ox_dtype_of(im, loss) == TF_F32 ? invalid : tf_cast(g, invalid, ox_dtype_of(im, loss)));
  if (reduction == LOSS_NONE)
    *out = loss;
  else if (reduction == LOSS_SUM)
    *out = total(g, loss);
  else
    *out = tf_div(g, total(g, loss), total(g, hot));
  return ox_graph_error(im, node);
}

static tf_status scores_input(ox_import *im, const ox_node *node, tf_tensor_id *x, int32_t *rank) {
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, x));
  *rank = ox_rank_of(im, *x);
  if (*rank < 2)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "input 0 has rank %" PRId32 "; it needs [N, C, d...]", *rank);
  return NULL;
}

tf_status ox_convert_nll_loss(ox_import *im, const ox_node *node) {
  tf_tensor_id x, loss;
  int32_t rank;
  TF_RETURN_IF_ERROR(scores_input(im, node, &x, &rank));
  TF_RETURN_IF_ERROR(nll(im, node, move_classes(im, x, rank, false), &loss));
  return ox_set_tensor(im, node, 0, loss);
}

tf_status ox_convert_nll_of_log_softmax(ox_import *im, const ox_node *node) {
  tf_tensor_id z, loss;
  int32_t rank;
  TF_RETURN_IF_ERROR(scores_input(im, node, &z, &rank));
  int64_t axis = node->softmax_axis < 0 ? node->softmax_axis + rank : node->softmax_axis;
  if (axis == 1 && (im->opset >= 13 || rank == 2)) /* over the classes */
    TF_RETURN_IF_ERROR(cross_entropy_op(im, node, z, rank, &loss));
  else if (im->opset >= 13 && axis >= 0 && axis < rank)
    TF_RETURN_IF_ERROR(
        nll(im, node, move_classes(im, tf_log_softmax(im->graph, z, (int32_t)axis), rank, false), &loss));
  else
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "the loss of a LogSoftmax over axis %" PRId64 " of rank-%" PRId32 " scores at opset %" PRId64
                   " (before opset 13 the axis flattens trailing axes)",
                   node->softmax_axis, rank, (int64_t)im->opset);
  return ox_set_tensor(im, node, 0, loss);
}

tf_status ox_convert_softmax_cross_entropy_loss(ox_import *im, const ox_node *node) {
  tf_tensor_id x, loss;
  int32_t rank;
  bool plain;
  TF_RETURN_IF_ERROR(scores_input(im, node, &x, &rank));
  TF_RETURN_IF_ERROR(is_plain_mean(im, node, &plain));
  if (plain) {
    TF_RETURN_IF_ERROR(cross_entropy_op(im, node, x, rank, &loss));
    return ox_set_tensor(im, node, 0, loss);
  }
  tf_tensor_id log_prob = tf_log_softmax(im->graph, move_classes(im, x, rank, false), rank - 1);
  TF_RETURN_IF_ERROR(nll(im, node, log_prob, &loss));
  TF_RETURN_IF_ERROR(ox_set_tensor(im, node, 0, loss));
  if (node->proto->n_output < 2 || !*node->proto->output[1])
    return NULL;
  return ox_set_tensor(im, node, 1, move_classes(im, log_prob, rank, true));
}
