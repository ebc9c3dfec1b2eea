/* Which parameters train: the builder's switch for freezing one (Tensor.trainable in the .tfg). */
#include "graph/ir.h"

tf_status tf_graph_set_trainable(tf_graph *g, tf_tensor_id tensor, bool trainable) {
  if (tensor < 0 || tensor >= g->n_tensors)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "graph '%s': tensor id %d is outside 0..%d", g->name, tensor,
                         g->n_tensors - 1);
  tf_ir_tensor *t = &g->tensors[tensor];
  if (t->kind != TF_PARAMETER)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "graph '%s': '%s' is %s %s; only a parameter can be %s", g->name,
                         t->name, t->kind == TF_INPUT || t->kind == TF_ACTIVATION ? "an" : "a", tf_kind_name(t->kind),
                         trainable ? "trainable" : "frozen");
  t->frozen = !trainable;
  return NULL;
}

bool tf_graph_is_trainable(const tf_graph *g, tf_tensor_id tensor) {
  return tensor >= 0 && tensor < g->n_tensors && g->tensors[tensor].kind == TF_PARAMETER && !g->tensors[tensor].frozen;
}
