/* Shape and dtype rules: one function per op family computes an op's output from its inputs'
 * concrete shapes and its attributes, or says precisely why it cannot. */
#ifndef TIGHTFIT_CORE_SHAPE_RULES_H
#define TIGHTFIT_CORE_SHAPE_RULES_H

#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_shape_operand {
  const char *name;
  tf_dtype dtype;
  tf_tensor_kind kind;
  int32_t rank;
  const int64_t *shape;
} tf_shape_operand;

typedef struct tf_shape_query {
  tf_op op;
  const tf_attrs *attrs;
  int32_t n_inputs;
  const tf_shape_operand *inputs;
  /* Symbols in reshape/expand targets: the value of `dim` (size x its symbol), -1 when unknown.
   * NULL where nothing binds symbols (a plan's shapes are concrete). */
  int64_t (*dim_value)(const void *context, tf_dim dim);
  const void *context;
} tf_shape_query;

typedef struct tf_shape_result {
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
} tf_shape_result;

/* A rule fills *out or returns a TF_ERR_SHAPE status whose message names the operands and their
 * shapes (the caller prefixes the node and op). Arity is checked before a rule runs. */
typedef tf_status (*tf_shape_rule)(const tf_shape_query *query, tf_shape_result *out);

tf_status tf_shape_matmul(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_matmul_accumulate(const tf_shape_query *q, tf_shape_result *out); /* (sum, a, b): no output */
tf_status tf_shape_broadcast(const tf_shape_query *q, tf_shape_result *out);         /* add sub mul div */
tf_status tf_shape_unary_float(const tf_shape_query *q, tf_shape_result *out); /* neg exp ... tanh, gelu, leaky_relu */
tf_status tf_shape_unary_pair(const tf_shape_query *q, tf_shape_result *out);  /* gelu_pair: (x) -> (y, dydx) */
tf_status tf_shape_reduce(const tf_shape_query *q, tf_shape_result *out);      /* sum mean max */
tf_status tf_shape_softmax(const tf_shape_query *q, tf_shape_result *out);     /* softmax log_softmax */
tf_status tf_shape_norm(const tf_shape_query *q, tf_shape_result *out);        /* layer_norm rms_norm */
tf_status tf_shape_batch_norm(const tf_shape_query *q,
                              tf_shape_result *out); /* (x [N, C, ...], gamma, beta [, rm, rv]) */
tf_status tf_shape_embedding(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_reshape(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_transpose(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_concat(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_slice(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_expand(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_conv(const tf_shape_query *q, tf_shape_result *out); /* conv1d conv2d */
tf_status tf_shape_conv_transpose2d(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_pool2d(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_dropout(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_attention(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_cast(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_cross_entropy(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_pair_loss(const tf_shape_query *q, tf_shape_result *out); /* mse bce_with_logits */
/* (x, weight, labels [, bias]) -> f32 scalar; core/shape_rules_linear_loss.c */
tf_status tf_shape_linear_cross_entropy(const tf_shape_query *q, tf_shape_result *out);
/* (logits [N, T, C], labels [N, S] [, input_lengths [N]]) -> f32 scalar; core/shape_rules_ctc.c */
tf_status tf_shape_ctc_loss(const tf_shape_query *q, tf_shape_result *out);

/* Training-only ops (compiler/shape_rules_grad.c). Multi-output ops fill out[0..n_outputs). */
tf_status tf_shape_elementwise_grad(const tf_shape_query *q, tf_shape_result *out); /* (x|y, dy) -> dx */
tf_status tf_shape_sum_to(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_max_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_norm_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_batch_norm_grad(const tf_shape_query *q, tf_shape_result *out);    /* (x, gamma, dy) -> 3 */
tf_status tf_shape_batch_norm_running(const tf_shape_query *q, tf_shape_result *out); /* (x, mean, var): none */
tf_status tf_shape_embedding_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_slice_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_conv_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_pool_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_attention_grad(const tf_shape_query *q, tf_shape_result *out);
/* (x, weight, labels, dloss) -> (dx, dweight), and linear_cross_entropy_bias_grad's (x, weight, labels,
 * dloss, bias) -> (dx, dweight, dbias); core/shape_rules_linear_loss.c */
tf_status tf_shape_linear_cross_entropy_grad(const tf_shape_query *q, tf_shape_result *out);
/* (x, weight, labels, dloss [, bias]) -> (loss scalar f32, dx, dweight [, dbias]): the single-pass form. */
tf_status tf_shape_linear_cross_entropy_train(const tf_shape_query *q, tf_shape_result *out);
/* (x, weight, labels, dloss [, bias], dweight_sum [, dbias_sum]) -> dx; the sums in place, shaped as
 * the gradients they sum. */
tf_status tf_shape_linear_cross_entropy_grad_accumulate(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_loss_grad(const tf_shape_query *q, tf_shape_result *out);
/* (logits, labels, dloss [, input_lengths]) -> dlogits; core/shape_rules_ctc.c */
tf_status tf_shape_ctc_loss_grad(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_update(const tf_shape_query *q, tf_shape_result *out); /* accumulate zero sgd adamw */
tf_status tf_shape_adamw8bit(const tf_shape_query *q, tf_shape_result *out);
/* (param, master): master f32, param floating, one shape; no outputs. */
tf_status tf_shape_cast_into(const tf_shape_query *q, tf_shape_result *out);
tf_status tf_shape_global_norm_sq(const tf_shape_query *q, tf_shape_result *out);

#ifdef __cplusplus
}
#endif
#endif
