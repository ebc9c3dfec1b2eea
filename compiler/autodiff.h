/* Reverse-mode differentiation: the interface between the autodiff driver (autodiff.c) and the
 * per-op vector-Jacobian-product rules (autodiff_rules.c). A rule receives the forward node and
 * the gradient of its output, emits backward nodes, and hands each input its gradient with
 * tf_vjp_give(); gradients of a tensor with several consumers are summed by the driver. */
#ifndef TIGHTFIT_COMPILER_AUTODIFF_H
#define TIGHTFIT_COMPILER_AUTODIFF_H

#include "compiler/training.h"

typedef struct tf_vjp {
  tf_training *t;
  int32_t node;      /* the forward node */
  int32_t dy;        /* gradient of its output */
  int32_t *grads;    /* per tensor: gradient so far, or -1 */
  const bool *needs; /* per tensor: a gradient must flow to it */
  tf_status status;  /* first error; helpers do nothing after one */
  /* A node on half data whose gradient takes several ops (div, sqrt, a product by a broadcast
   * operand...): its rule reads f32 copies (wide[i] of input i, wide_output, and dy cast up), so
   * the chain computes in f32 and each gradient is rounded once to its input's type when given,
   * as for the node between casts. -1 where not widened. */
  bool widened;
  int32_t wide[4];
  int32_t wide_output;
} tf_vjp;

typedef void (*tf_vjp_rule)(tf_vjp *v);

/* The rule of `op`, or NULL when it has no gradient (the driver then refuses the graph). */
tf_vjp_rule tf_vjp_rule_for(tf_op op);

/* Input i of the forward node (tensor id), its output, and whether input i wants a gradient. */
int32_t tf_vjp_input(const tf_vjp *v, int32_t i);
int32_t tf_vjp_output(const tf_vjp *v);
bool tf_vjp_wants(const tf_vjp *v, int32_t i);
/* Emits a backward node with one output and returns it (-1 after an error). Attributes NULL: none. */
int32_t tf_vjp_op(tf_vjp *v, tf_op op, const int32_t *inputs, int32_t n_inputs, const tf_attrs *attrs);
/* Emits a node with several outputs into outputs[]. */
void tf_vjp_op_multi(tf_vjp *v, tf_op op, const int32_t *inputs, int32_t n_inputs, const tf_attrs *attrs,
                     int32_t *outputs);
/* Adds `gradient` to input i's gradient (a sum node when it already has one). */
void tf_vjp_give(tf_vjp *v, int32_t i, int32_t gradient);
/* A scalar f32 constant. */
int32_t tf_vjp_scalar(tf_vjp *v, double value);
/* The concrete shape of tensor `id` as reshape/expand attributes. */
tf_attrs tf_vjp_shape_attrs(const tf_vjp *v, int32_t id);

#endif
