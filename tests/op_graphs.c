/* Small graphs for the per-op checks (op_graphs.h). */
#include "op_graphs.h"

tf_graph *tf_test_graph_begin(tf_test_counts *counts, const char *name) {
  tf_graph *g = NULL;
  tf_status status = tf_graph_create(name, &g);
  CHECK(counts, status == NULL, "%s", tf_status_message(status));
  tf_status_free(status);
  return g;
}

tf_tensor_id tf_test_param(tf_graph *g, const char *name, tf_shape shape) {
  return tf_graph_parameter(g, name, TF_F32, shape, tf_init_make(TF_INIT_NORMAL, 0.0, 1.0));
}

tf_tensor_id tf_test_positive(tf_graph *g, const char *name, tf_shape shape) {
  return tf_graph_parameter(g, name, TF_F32, shape, tf_init_make(TF_INIT_UNIFORM, 0.5, 2.0));
}

void tf_test_finish_probe(tf_graph *g, tf_tensor_id y) {
  tf_tensor_info info;
  if (!tf_graph_tensor(g, y, &info))
    return;
  tf_shape shape = {info.rank, {{0, -1}}};
  for (int32_t i = 0; i < info.rank; i++)
    shape.dims[i] = d(info.shape[i]);
  tf_tensor_id probe = tf_graph_input(g, "probe", TF_F32, shape);
  tf_graph_add_output(g, y);
  tf_graph_set_loss(g, tf_reduce(g, TF_OP_SUM, tf_mul(g, y, probe), NULL, 0, false));
}

void tf_test_finish_loss(tf_graph *g, tf_tensor_id loss) {
  tf_graph_add_output(g, loss);
  tf_graph_set_loss(g, loss);
}
