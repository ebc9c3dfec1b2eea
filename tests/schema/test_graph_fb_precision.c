/* Per-node precision overrides in the .tfg format (Node.precision, tf_graph_set_node_precision):
 * files written before the field existed load with none; overrides survive save -> load; a graph
 * without them encodes to the bytes it had before any was set (the field is left out); the setter
 * and the loader refuse an unknown value, naming the node (and the file). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "graph/graph_file.h"
#include "graph/ir.h"
#include "schema/graph_fb.h"
#include "tightfit/graph.h"

/* A small graph through the public builder: x [4, 8] -> matmul -> relu -> matmul -> cross_entropy. */
static tf_graph *build_small(tf_test_counts *counts) {
  tf_graph *g = NULL;
  CHECK_OK(counts, tf_graph_create("small", &g));
  if (!g)
    return NULL;
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_fixed(4), tf_fixed(8)));
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_fixed(4)));
  tf_init init = tf_init_make(TF_INIT_NORMAL, 0, 0.1);
  tf_tensor_id w1 = tf_graph_parameter(g, "w1", TF_F32, TF_SHAPE(tf_fixed(8), tf_fixed(8)), init);
  tf_tensor_id w2 = tf_graph_parameter(g, "w2", TF_F32, TF_SHAPE(tf_fixed(8), tf_fixed(3)), init);
  tf_tensor_id h = tf_unary(g, TF_OP_RELU, tf_matmul(g, x, w1, false, false));
  tf_graph_set_loss(g, tf_cross_entropy(g, tf_matmul(g, h, w2, false, false), labels, -100));
  CHECK(counts, tf_graph_status(g) == NULL, "building the small graph: %s", tf_status_message(tf_graph_status(g)));
  return g;
}

static tf_precision precision_of(const tf_graph *g, int32_t node) {
  tf_node_info info;
  return tf_graph_node_at(g, node, &info) ? info.precision : (tf_precision)-99;
}

/* Per-node precision overrides through the public API and files. */
static void test_precision_overrides(tf_test_counts *counts) {
  /* Files written before the field existed load with no override on any node. */
  const char *old[] = {"tests/data/compat/mlp.tfg", "tests/data/compat/cnn.tfg", "tests/data/compat/gpt.tfg",
                       "tests/data/compat/dcgan.tfg", "tests/data/compat/asr-128-6-3.tfg"};
  for (size_t f = 0; f < sizeof(old) / sizeof(old[0]); f++) {
    tf_graph *g = NULL;
    CHECK_OK(counts, tf_graph_load(old[f], &g));
    int32_t overridden = 0;
    for (int32_t n = 0; g && n < tf_graph_node_count(g); n++)
      overridden += precision_of(g, n) != TF_PRECISION_INHERIT;
    CHECK(counts, g && overridden == 0, "%s: %d nodes carry a precision override", old[f], overridden);
    printf("old file %-34s %3d nodes, %d overrides\n", old[f], g ? tf_graph_node_count(g) : -1, overridden);
    tf_graph_destroy(g);
  }

  tf_graph *g = build_small(counts);
  if (!g)
    return;
  void *plain = NULL, *data = NULL;
  size_t plain_size = 0, size = 0;
  CHECK_OK(counts, tf_graph_serialize(g, &plain, &plain_size));
  /* Nodes: 0 matmul, 1 relu, 2 matmul, 3 cross_entropy. */
  const tf_precision set[] = {TF_PRECISION_BF16, TF_PRECISION_F32, TF_PRECISION_INHERIT, TF_PRECISION_F16};
  for (int32_t n = 0; n < 4; n++)
    CHECK_OK(counts, tf_graph_set_node_precision(g, n, set[n]));
  char dir[] = "/tmp/tightfit_override_XXXXXX", path[64];
  CHECK(counts, mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(path, sizeof path, "%s/small.tfg", dir);
  CHECK_OK(counts, tf_graph_save(g, path));
  tf_graph *back = NULL;
  CHECK_OK(counts, tf_graph_load(path, &back));
  for (int32_t n = 0; back && n < 4; n++)
    CHECK(counts, precision_of(back, n) == set[n], "saved and loaded: node %d override %d, set %d", n,
          precision_of(back, n), set[n]);
  printf("save -> load keeps the overrides bf16, f32, inherit, f16 of the 4 nodes of a built graph\n");
  tf_graph_destroy(back);
  unlink(path);
  rmdir(dir);

  /* Back to inherit everywhere: the bytes are those of the graph that never had an override. */
  for (int32_t n = 0; n < 4; n++)
    CHECK_OK(counts, tf_graph_set_node_precision(g, n, TF_PRECISION_INHERIT));
  CHECK_OK(counts, tf_graph_serialize(g, &data, &size));
  CHECK(counts, data && plain && size == plain_size && memcmp(data, plain, size) == 0,
        "a graph without overrides encodes to %zu bytes, the same graph before any override %zu (or other bytes)", size,
        plain_size);
  printf("without overrides the graph encodes to the same %zu bytes as before any was set\n", size);
  free(data);

  /* The setter refuses what is not a precision or not a node, naming the node. */
  tf_status status = tf_graph_set_node_precision(g, 1, (tf_precision)7);
  CHECK(counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && strstr(tf_status_message(status), "'relu"),
        "precision 7: %s", tf_status_message(status));
  printf("set_node_precision(7): %s\n", tf_status_message(status));
  tf_status_free(status);
  status = tf_graph_set_node_precision(g, 4, TF_PRECISION_F32);
  CHECK(counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "node 4 of 4: %s", tf_status_message(status));
  tf_status_free(status);

  /* A file holding precision 7 on a node decodes (structure) and is refused by load, naming it. */
  g->nodes[1].precision = (tf_precision)7;
  data = NULL;
  CHECK_OK(counts, tf_graph_encode(g, &data, &size));
  tf_graph *bad = NULL;
  status = tf_graph_parse(data, size, "override7.tfg", &bad);
  const char *message = tf_status_message(status);
  CHECK(counts,
        tf_status_code(status) == TF_ERR_INVALID_INPUT && bad == NULL && strstr(message, "override7.tfg") &&
            strstr(message, "node 1 '") && strstr(message, "unknown precision override 7"),
        "a stored override 7: %s", status ? message : "accepted");
  printf("  refused override7.tfg -> %s\n", message);
  tf_status_free(status);
  tf_graph_destroy(bad);
  free(data);
  free(plain);
  tf_graph_destroy(g);
}

int main(void) {
  tf_test_counts counts = {0, 0};
  test_precision_overrides(&counts);
  return tf_test_finish("graph_fb_precision", &counts);
}
