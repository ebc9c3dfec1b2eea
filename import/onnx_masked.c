/* Boolean indexing reduced to a number, computed densely: x[mask], masked_select(x, mask) and a loss
 * over the selected values (a TTS or ASR loss over the frames that are not padding: l1(pred[mask],
 * target[mask]), (x[mask] ** 2).sum()). PyTorch exports the selection as
 *
 *   GatherND(x, Transpose(NonZero(mask)))        rows of x where mask holds: [K, trailing axes of x]
 *
 * whose K the data decides, which no plan of fixed shapes holds. Where the selected values only flow
 * through element-wise ops (with scalars, or with values selected by the same mask) into a ReduceSum
 * or ReduceMean of every element, the same number comes from the whole tensors:
 *
 *   sum  = ReduceSum(keep(v, m))                 m: the mask as 0/1, broadcast over x's trailing axes
 *   mean = ReduceSum(keep(v, m)) / ReduceSum(expand(m, shape(v)))
 *
 * and F.cross_entropy(logits[mask], labels[mask]) as the cross_entropy op of the whole tensors with
 * the labels not selected ignored, with the same gradients (zero at the positions not selected, as PyTorch's gather
 * gives). The element-wise ops then also run on the positions not selected, where keep (a select, not a product by
 * the mask) fences them in: the selection is keep(x, m), so a NaN or an infinity of x there never enters, and the
 * reduction's keep drops what the ops make there (a log of padding's zeros), forward; backward, the reduction's
 * keep(dy, m) gives those positions a zero gradient and the selection's keep(dx, m) drops whatever the ops' rules make
 * of it there (0 / 0). A selection that reaches anything else (a matmul, an output, a reduction over some axes) is
 * refused, saying why.
 *
 * A NonZero output (and a Transpose of it) is a "selection" value: the mask, no graph tensor. A
 * GatherND by a selection gives a "masked" value: the whole tensor x, with its mask. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_ops.h"

/* What no plan of fixed shapes holds, and what computes densely instead. */
#define OX_SELECTION_HINT                                                                                              \
  ": x[mask] has as many rows as the mask has true elements, a shape the data decides, and a plan's shapes and "       \
  "bytes are fixed before the first step; tightfit computes boolean indexing densely only where the selected "         \
  "values flow through element-wise ops into a sum or mean of all of them (a loss over the frames that are not "       \
  "padding). Otherwise compute densely yourself (a mixture of experts: every expert on every token, weighted by the "  \
  "router's top-k scores scattered over the experts, zero elsewhere)"

/* Element-wise ops a masked value may flow through (their other inputs scalars, or masked alike). */
static const char *const elementwise_ops[] = {
    "Add",  "Sub",     "Mul", "Div",  "Pow",      "Abs",  "Neg",      "Exp", "Log", "Sqrt", "Reciprocal", "Relu",
    "Tanh", "Sigmoid", "Erf", "Cast", "Softplus", "Clip", "Identity", "Max", "Min", "Sign", "Sin",        "Cos"};

static bool is_elementwise(const char *op) {
  for (size_t i = 0; i < sizeof(elementwise_ops) / sizeof(elementwise_ops[0]); i++)
    if (strcmp(op, elementwise_ops[i]) == 0)
      return true;
  return false;
}

static const ox_value *input_value(ox_import *im, const ox_node *node, int32_t i) {
  const char *name = i < node->n_inputs ? node->inputs[i] : NULL;
  return name && *name ? ox_value_find(im, name) : NULL;
}

/* Which mask value `name` is: itself, or what an Expand of it expanded (PyTorch's masked_select
 * expands the mask to the data's shape once per call): values selected by one mask combine. */
static int32_t mask_source(ox_import *im, const char *name) {
  for (int32_t depth = 0; depth < 16; depth++) {
    const ox_node *producer = ox_producer(im, name);
    if (!producer || producer->fused != OX_PLAIN || strcmp(producer->proto->op_type, "Expand") != 0 ||
        producer->n_inputs < 1 || !producer->inputs[0])
      break;
    name = producer->inputs[0];
  }
  return tf_strmap_get(&im->value_ids, name);
}

/* NonZero: a selection. Each NonZero of the same value gets the same mask tensor (PyTorch writes one
 * per x[mask]). */
tf_status ox_convert_nonzero(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (!ox_value_find(im, ox_input(node, 0)))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "input '%s' has no value", ox_input(node, 0));
  if (!ox_value_find(im, ox_input(node, 0))->has_positions) {
    tf_tensor_id positions;
    TF_RETURN_IF_ERROR(ox_nonzero_mask(im, node, 0, &positions));
    ox_value *from = ox_value_find(im, ox_input(node, 0)); /* found again: the table may have moved */
    from->positions = positions;
    from->has_positions = true;
  }
  const tf_tensor_id positions = ox_value_find(im, ox_input(node, 0))->positions;
  ox_value *out = ox_value_get(im, node->proto->output[0]);
  if (!out)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  out->selection = true;
  out->mask = positions;
  out->mask_source = mask_source(im, ox_input(node, 0));
  return NULL;
}

/* Transpose of a selection (NonZero's [rank, K] to GatherND's [K, rank]): the same selection. */
static tf_status transpose_selection(ox_import *im, const ox_node *node, const ox_value *from) {
  ox_value *out = ox_value_get(im, node->proto->output[0]);
  if (!out)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  out->selection = true;
  out->mask = from->mask;
  out->mask_source = from->mask_source;
  return NULL;
}

tf_status ox_convert_gather_nd(ox_import *im, const ox_node *node) {
  const ox_value *found = input_value(im, node, 1);
  const ox_value selected = found ? *found : (ox_value){0}; /* a copy: the table may move below */
  const ox_value *indices = found ? &selected : NULL;
  if (indices && !indices->selection && ox_is_known(im, ox_input(node, 1)))
    return ox_gather_nd_known(im, node);
  if (!indices || !indices->selection)
    return ox_fail(
        im, node, TF_ERR_UNSUPPORTED,
        "GatherND by indices computed from data, other than NonZero's of a mask (x[mask]); gather by computed indices "
        "along one axis (torch.gather, index_select) instead");
  if (ox_attr_int(node, "batch_dims", 0) != 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "GatherND with batch_dims %" PRId64 " of a mask's positions",
                   ox_attr_int(node, "batch_dims", 0));
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t x_rank, m_rank;
  tf_dim x_dims[TF_MAX_RANK], m_dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &x_rank, x_dims);
  ox_tensor_dims(im, indices->mask, &m_rank, m_dims);
  if (m_rank < 1 || m_rank > x_rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a mask of rank %" PRId32 " selects from data of rank %" PRId32,
                   m_rank, x_rank);
  for (int32_t i = 0; i < m_rank; i++)
    if (m_dims[i].size != x_dims[i].size || m_dims[i].symbol != x_dims[i].symbol)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "the mask's axis %" PRId32 " is not the data's (a mask of the data's leading shape selects)", i);
  tf_dim shape[TF_MAX_RANK];
  for (int32_t i = 0; i < x_rank; i++)
    shape[i] = i < m_rank ? m_dims[i] : tf_fixed(1);
  tf_tensor_id mask =
      m_rank == x_rank ? indices->mask : tf_reshape(im->graph, indices->mask, tf_shape_from(shape, x_rank));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (!ox_is_integer_dtype(dtype)) /* a NaN or an infinity not selected (padding) goes no further */
    x = tf_keep(im->graph, x, dtype == ox_dtype_of(im, mask) ? mask : tf_cast(im->graph, mask, dtype));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  TF_RETURN_IF_ERROR(ox_set_tensor(im, node, 0, x));
  ox_value *out = ox_value_find(im, node->proto->output[0]);
  out->masked = true;
  out->mask = mask;
  out->mask_source = indices->mask_source;
  return NULL;
}

/* ReduceSum or ReduceMean of every selected value: sum(keep(v, m)) [/ sum(expand(m))]. */
static tf_status reduce_selected(ox_import *im, const ox_node *node, const ox_value *v) {
  const bool mean = strcmp(node->proto->op_type, "ReduceMean") == 0;
  if (ox_input(node, 1) || ox_attr(node, "axes") || ox_attr_int(node, "keepdims", 1) != 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "%s of selected values (x[mask]) over some axes, or keeping them: only a %s of all of them "
                   "(x[mask].%s())%s",
                   node->proto->op_type, mean ? "mean" : "sum", mean ? "mean" : "sum", OX_SELECTION_HINT);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const int32_t every = 0; /* n_axes 0: all of them */
  tf_tensor_id mask = v->mask;
  if (ox_dtype_of(im, mask) != ox_dtype_of(im, x))
    mask = tf_cast(im->graph, mask, ox_dtype_of(im, x));
  tf_tensor_id total = tf_reduce(im->graph, TF_OP_SUM, tf_keep(im->graph, x, mask), &every, 0, false);
  if (mean) {
    int32_t x_rank;
    tf_dim dims[TF_MAX_RANK];
    ox_tensor_dims(im, x, &x_rank, dims);
    tf_tensor_id count =
        tf_reduce(im->graph, TF_OP_SUM, tf_expand(im->graph, mask, tf_shape_from(dims, x_rank)), &every, 0, false);
    total = tf_div(im->graph, total, count);
  }
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, total);
}

/* SoftmaxCrossEntropyLoss (mean, no class weights) of selected rows of logits [..., C] and the labels
 * selected alike (F.cross_entropy(logits[mask], labels[mask])): the cross_entropy op of the whole
 * tensors, the labels not selected replaced by an index it ignores, so its mean runs over the selected
 * labels that are not the node's own ignore_index: PyTorch's number. */
static tf_status cross_entropy_selected(ox_import *im, const ox_node *node) {
  const ox_value *logits_value = input_value(im, node, 0), *labels_value = input_value(im, node, 1);
  const bool weighted = ox_input(node, 2) != NULL, log_prob = node->proto->n_output > 1 && *node->proto->output[1];
  const int64_t reduction_given = ox_attr(node, "reduction") != NULL;
  const Onnx__AttributeProto *reduction = ox_attr(node, "reduction");
  const bool mean = !reduction_given || (reduction->s.len == 4 && memcmp(reduction->s.data, "mean", 4) == 0);
  if (!logits_value || !labels_value || !logits_value->masked || !labels_value->masked || weighted || log_prob || !mean)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "SoftmaxCrossEntropyLoss of selected values other than F.cross_entropy(logits[mask], "
                   "labels[mask]) with the mean, no class weights and no log-probabilities output%s",
                   OX_SELECTION_HINT);
  const tf_tensor_id label_mask = labels_value->mask;
  tf_tensor_id logits, labels;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &logits));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &labels));
  const int32_t label_rank = ox_rank_of(im, labels);
  tf_tensor_info mask_info;
  if (ox_rank_of(im, logits) != label_rank + 1 || !tf_graph_tensor(im->graph, label_mask, &mask_info) ||
      mask_info.rank != label_rank)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "cross-entropy of selected rows whose classes are not the logits' last axis (logits[mask] of "
                   "[..., C] by a mask of [...])%s",
                   OX_SELECTION_HINT);
  const int64_t ignored = ox_attr(node, "ignore_index") ? ox_attr_int(node, "ignore_index", -100) : -100;
  if (ignored <= -16777216 || ignored >= 16777216)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "cross-entropy of selected values with ignore_index %" PRId64 " (from -2^24 to 2^24: labels are "
                   "compared in f32)",
                   ignored);
  tf_graph *g = im->graph;
  const tf_dtype label_type = ox_dtype_of(im, labels);
  tf_tensor_id as_real = label_type == TF_F32 ? labels : tf_cast(g, labels, TF_F32);
  /* a class ignore_index: those labels are left out too, so the labels left out become -100 */
  const int64_t left_out = ignored >= 0 ? -100 : ignored;
  tf_tensor_id keep = label_mask;
  if (ignored >= 0)
    keep = tf_mul(g, keep,
                  tf_sub(g, ox_scalar(im, node, TF_F32, 1.0),
                         ox_equal_mask(im, node, as_real, ox_scalar(im, node, TF_F32, (double)ignored), false)));
  /* labels keep + left_out (1 - keep), exact in f32 for labels and ignore_index below 2^24 */
  tf_tensor_id kept = tf_mul(g, as_real, keep);
  tf_tensor_id others =
      tf_mul(g, tf_sub(g, ox_scalar(im, node, TF_F32, 1.0), keep), ox_scalar(im, node, TF_F32, (double)left_out));
  tf_tensor_id chosen = tf_add(g, kept, others);
  tf_tensor_id loss =
      tf_cross_entropy(g, logits, label_type == TF_F32 ? chosen : tf_cast(g, chosen, label_type), left_out);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, loss);
}

/* Marks every output of `node` as masked by `mask` (shape: a masked value's Shape). */
static void mark_outputs(ox_import *im, const ox_node *node, const ox_value *like, bool shape) {
  for (size_t o = 0; o < node->proto->n_output; o++) {
    ox_value *out =
        node->proto->output[o] && *node->proto->output[o] ? ox_value_find(im, node->proto->output[o]) : NULL;
    if (out) {
      out->masked = !shape;
      out->masked_shape = shape;
      out->mask = like->mask;
      out->mask_source = like->mask_source;
    }
  }
}

/* A node reading a masked value's Shape: ConstantOfShape (zeros of the whole shape, masked alike) and
 * Expand (of a value masked alike: itself), as PyTorch's broadcasting of two selections writes them. */
static tf_status emit_with_shape(ox_import *im, const ox_node *node, ox_converter convert, const ox_value *shape) {
  const char *op = node->proto->op_type;
  const ox_value *x = input_value(im, node, 0);
  const bool expand = strcmp(op, "Expand") == 0 && x && x->masked && x->mask_source == shape->mask_source;
  if (node->fused != OX_PLAIN || (strcmp(op, "ConstantOfShape") != 0 && !expand))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of the shape of selected values (x[mask].shape)%s", op,
                   OX_SELECTION_HINT);
  TF_RETURN_IF_ERROR(convert(im, node));
  mark_outputs(im, node, shape, false);
  return NULL;
}

tf_status ox_masked_emit(ox_import *im, const ox_node *node, ox_converter convert) {
  /* copies: the value table may grow (and move) while a converter runs */
  ox_value selection_copy, masked_copy, shape_copy;
  const ox_value *selection = NULL, *masked = NULL, *shape = NULL;
  for (int32_t i = 0; i < node->n_inputs; i++) {
    const ox_value *found = input_value(im, node, i);
    if (!found)
      continue;
    if (found->selection) {
      selection_copy = *found;
      selection = &selection_copy;
    }
    if (found->masked_shape) {
      shape_copy = *found;
      shape = &shape_copy;
    }
    if (found->masked) {
      if (masked && masked->mask_source != found->mask_source)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of values selected by two different masks (x[a] and y[b])%s",
                       node->proto->op_type, OX_SELECTION_HINT);
      masked_copy = *found;
      masked = &masked_copy;
    }
  }
  const char *op = node->proto->op_type;
  if (selection) {
    if (node->fused == OX_PLAIN && strcmp(op, "Transpose") == 0)
      return transpose_selection(im, node, selection);
    if (node->fused == OX_PLAIN && strcmp(op, "GatherND") == 0)
      return convert(im, node);
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of NonZero's positions%s", op, OX_SELECTION_HINT);
  }
  if (shape)
    return emit_with_shape(im, node, convert, shape);
  if (!masked)
    return convert(im, node);
  if (node->fused == OX_PLAIN && (strcmp(op, "ReduceSum") == 0 || strcmp(op, "ReduceMean") == 0))
    return reduce_selected(im, node, masked);
  if (node->fused == OX_PLAIN && strcmp(op, "SoftmaxCrossEntropyLoss") == 0)
    return cross_entropy_selected(im, node);
  if (node->fused == OX_PLAIN && strcmp(op, "Shape") == 0 && node->n_inputs == 1) {
    TF_RETURN_IF_ERROR(convert(im, node));
    mark_outputs(im, node, masked, true);
    return NULL;
  }
  if (node->fused != OX_PLAIN || !is_elementwise(op))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of selected values (x[mask])%s",
                   node->fused != OX_PLAIN ? "a fused pattern" : op, OX_SELECTION_HINT);
  for (int32_t i = 0; i < node->n_inputs; i++) {
    const ox_value *v = input_value(im, node, i);
    if (v && !v->masked && !(v->known && v->known->count == 1))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "%s of selected values (x[mask]) and input '%s', neither selected alike nor one number%s", op,
                     node->inputs[i], OX_SELECTION_HINT);
  }
  TF_RETURN_IF_ERROR(convert(im, node));
  mark_outputs(im, node, masked, false);
  return NULL;
}

bool ox_is_selected(const ox_value *v) { return v && (v->selection || v->masked || v->masked_shape); }

const char *ox_selection_hint(void) { return OX_SELECTION_HINT; }
