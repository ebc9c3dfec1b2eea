/* The converters' shared helpers (import/onnx_ops.c) and the converters that live in other files
 * (import/onnx_layout.c, onnx_batch_norm.c, onnx_instance_norm.c, onnx_repeat.c), for the
 * operator table in onnx_ops.c. Input i of a node is its rewritten input (ox_node.inputs);
 * "known" means known at import time (ox_known). */
#ifndef TIGHTFIT_IMPORT_ONNX_CONVERT_H
#define TIGHTFIT_IMPORT_ONNX_CONVERT_H

#include "import/onnx_internal.h"

/* Input i's name, or NULL when absent or empty. */
const char *ox_input(const ox_node *node, int32_t i);
/* A status "<file>: node '<name>' (<op>): <reason>". */
tf_status ox_fail(ox_import *im, const ox_node *node, tf_code code, const char *fmt, ...) TF_PRINTF(4, 5);
/* `status` (NULL passes through) prefixed "<file>: node '<name>' (<op>)": a helper's error placed. */
tf_status ox_at(const ox_import *im, const ox_node *node, tf_status status) TF_MUST_USE;
/* An error when input i is absent. */
tf_status ox_need_input(ox_import *im, const ox_node *node, int32_t i) TF_MUST_USE;
/* True when value `name` is known and has no graph tensor yet. */
bool ox_is_known(ox_import *im, const char *name);
/* Output i becomes graph tensor `id` (the builder's error, if any, is returned). */
tf_status ox_set_tensor(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id id) TF_MUST_USE;
/* Output i becomes known value `k` (taken over, also on error). */
tf_status ox_set_known(ox_import *im, const ox_node *node, int32_t i, ox_known *k) TF_MUST_USE;
/* Input i as a graph tensor (made from an initializer or known value on first use). */
tf_status ox_tensor_of(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *id) TF_MUST_USE;
/* Input i's known value (borrowed). */
tf_status ox_known_of(ox_import *im, const ox_node *node, int32_t i, const ox_known **k) TF_MUST_USE;
/* A graph tensor's rank and dtype after inference. */
int32_t ox_rank_of(ox_import *im, tf_tensor_id id);
tf_dtype ox_dtype_of(ox_import *im, tf_tensor_id id);
/* Input i's known integers, none symbolic, at most max of them, into out[0, *n). */
tf_status ox_fixed_ints(ox_import *im, const ox_node *node, int32_t i, int64_t *out, int32_t max,
                        int32_t *n) TF_MUST_USE;
/* A new rank-0 constant of `dtype` holding `value`, named after the node's output. */
tf_tensor_id ox_scalar(ox_import *im, const ox_node *node, tf_dtype dtype, double value);
/* Input i of an elementwise op whose other operand is tensor `other`: a known scalar becomes a
 * constant of the other's dtype. */
tf_status ox_operand(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id other, tf_tensor_id *id) TF_MUST_USE;

/* Of two operands, one f32 and one f16/bf16, the f32 one cast to the half type (PyTorch exports
 * such mixed ops from bf16 models); any other pair is left as it is. */
void ox_match_half(ox_import *im, tf_tensor_id *a, tf_tensor_id *b);

/* onnx_batch_norm.c */
tf_status ox_convert_batch_norm(ox_import *im, const ox_node *node);

/* onnx_instance_norm.c */
tf_status ox_convert_instance_norm(ox_import *im, const ox_node *node);

/* onnx_repeat.c */
/* onnx_mask.c: masks on data as f32 0/1 tensors: Equal of data with a constant, Not, Cast to BOOL,
 * Where with one constant branch (masked_fill). */
tf_status ox_convert_mask_equal(ox_import *im, const ox_node *node);
tf_status ox_convert_mask_not(ox_import *im, const ox_node *node);
tf_status ox_convert_mask_cast(ox_import *im, const ox_node *node);
tf_status ox_convert_mask_where(ox_import *im, const ox_node *node);

tf_status ox_convert_resize(ox_import *im, const ox_node *node);
tf_status ox_convert_tile(ox_import *im, const ox_node *node);

/* onnx_reduce.c: the Reduce* operators. */
tf_status ox_convert_reduce_mean(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_sum(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_max(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_min(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_l2(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_l1(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_sum_square(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_log_sum(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_log_sum_exp(ox_import *im, const ox_node *node);

/* onnx_elementwise.c: Max, Min, Clip, Sum, Mean, Reciprocal, Softsign, HardSigmoid, HardSwish,
 * Elu, Selu, Celu, PRelu, Mish and Size as composites of existing ops (the file's top comment). */
tf_status ox_convert_max(ox_import *im, const ox_node *node);
tf_status ox_convert_min(ox_import *im, const ox_node *node);
tf_status ox_convert_clip(ox_import *im, const ox_node *node);
tf_status ox_convert_sum(ox_import *im, const ox_node *node);
tf_status ox_convert_mean(ox_import *im, const ox_node *node);
tf_status ox_convert_reciprocal(ox_import *im, const ox_node *node);
tf_status ox_convert_softsign(ox_import *im, const ox_node *node);
tf_status ox_convert_hard_sigmoid(ox_import *im, const ox_node *node);
tf_status ox_convert_hard_swish(ox_import *im, const ox_node *node);
tf_status ox_convert_elu(ox_import *im, const ox_node *node);
tf_status ox_convert_selu(ox_import *im, const ox_node *node);
tf_status ox_convert_celu(ox_import *im, const ox_node *node);
tf_status ox_convert_prelu(ox_import *im, const ox_node *node);
tf_status ox_convert_mish(ox_import *im, const ox_node *node);
tf_status ox_convert_size(ox_import *im, const ox_node *node);

/* onnx_loss.c: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (labels through a one-hot
 * embedding table). */
tf_status ox_convert_nll_loss(ox_import *im, const ox_node *node);
tf_status ox_convert_softmax_cross_entropy_loss(ox_import *im, const ox_node *node);

/* onnx_layout.c */
tf_status ox_convert_reshape(ox_import *im, const ox_node *node);
tf_status ox_convert_flatten(ox_import *im, const ox_node *node);
tf_status ox_convert_unsqueeze(ox_import *im, const ox_node *node);
tf_status ox_convert_squeeze(ox_import *im, const ox_node *node);
tf_status ox_convert_transpose(ox_import *im, const ox_node *node);
tf_status ox_convert_concat(ox_import *im, const ox_node *node);
tf_status ox_convert_slice(ox_import *im, const ox_node *node);
tf_status ox_convert_split(ox_import *im, const ox_node *node);
tf_status ox_convert_expand(ox_import *im, const ox_node *node);
tf_status ox_convert_gather(ox_import *im, const ox_node *node);
tf_status ox_convert_cast(ox_import *im, const ox_node *node);
tf_status ox_convert_pad(ox_import *im, const ox_node *node);
tf_status ox_convert_identity(ox_import *im, const ox_node *node);
tf_status ox_convert_constant(ox_import *im, const ox_node *node);
tf_status ox_convert_shape(ox_import *im, const ox_node *node);
/* The shape of node input 0 (a known value's, or a tensor's with its symbols) into rank and dims:
 * what Shape and Size read. */
tf_status ox_input_dims(ox_import *im, const ox_node *node, int32_t *rank, tf_dim *dims);
tf_status ox_convert_range(ox_import *im, const ox_node *node);
tf_status ox_convert_constant_of_shape(ox_import *im, const ox_node *node);

#endif
