/* tf_ir_copy: a search's trials each run the compiler's later passes on a copy of one state, and
 * their plans must be the ones a full compile gives. So a copy must be the graph (same ids, names,
 * dtypes, shapes, inputs, attributes), own all of its memory (it outlives the original), and name
 * what passes add to it as the original would (tf_ir_unique_name's memory goes with it). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/ir.h"
#include "ir_test_nodes.h"
#include "tightfit/graph.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

/* Every map key of the copy is the copy's own name of the id it maps to (never the original's). */
static bool keys_owned(const tf_graph *c) {
  for (int32_t i = 0; i < c->tensor_names.capacity; i++)
    if (c->tensor_names.keys[i] && c->tensor_names.keys[i] != c->tensors[c->tensor_names.values[i]].name)
      return false;
  for (int32_t i = 0; i < c->node_names.capacity; i++)
    if (c->node_names.keys[i] && c->node_names.keys[i] != c->nodes[c->node_names.values[i]].name)
      return false;
  for (int32_t i = 0; i < c->next_suffix.capacity; i++) {
    const char *key = c->next_suffix.keys[i];
    if (!key)
      continue;
    int32_t node = tf_strmap_get(&c->node_names, key), tensor = tf_strmap_get(&c->tensor_names, key);
    if (!(node >= 0 && c->nodes[node].name == key) && !(tensor >= 0 && c->tensors[tensor].name == key))
      return false;
  }
  return true;
}

/* The copy holds what the original holds, in its own memory. */
static void same_graph(const char *what, const tf_graph *g, const tf_graph *c) {
  bool same = g->n_tensors == c->n_tensors && g->n_nodes == c->n_nodes && g->n_symbols == c->n_symbols &&
              g->n_outputs == c->n_outputs && g->loss == c->loss && strcmp(g->name, c->name) == 0 &&
              g->tensor_names.count == c->tensor_names.count && g->node_names.count == c->node_names.count &&
              g->next_suffix.count == c->next_suffix.count;
  for (int32_t i = 0; same && i < g->n_tensors; i++) {
    const tf_ir_tensor *a = &g->tensors[i], *b = &c->tensors[i];
    same = a->name != b->name && strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->kind == b->kind &&
           a->rank == b->rank && a->bytes == b->bytes && a->producer == b->producer &&
           memcmp(a->shape, b->shape, sizeof(a->shape)) == 0 && tf_strmap_get(&c->tensor_names, a->name) == i;
  }
  for (int32_t i = 0; same && i < g->n_nodes; i++) {
    const tf_ir_node *a = &g->nodes[i], *b = &c->nodes[i];
    same = a->name != b->name && strcmp(a->name, b->name) == 0 && a->op == b->op && a->n_inputs == b->n_inputs &&
           a->inputs != b->inputs && memcmp(a->inputs, b->inputs, sizeof(int32_t) * (size_t)a->n_inputs) == 0 &&
           memcmp(&a->attrs, &b->attrs, sizeof(a->attrs)) == 0 && tf_strmap_get(&c->node_names, a->name) == i;
  }
  for (int32_t i = 0; same && i < g->n_symbols; i++)
    same = strcmp(g->symbols[i].name, c->symbols[i].name) == 0 && g->symbols[i].value == c->symbols[i].value;
  CHECK(&counts, same, "%s: the copy differs from the original", what);
  CHECK(&counts, keys_owned(c), "%s: a name map of the copy borrows a name it does not own", what);
}

/* One step of naming: a unique name through the memo, taken by a new node; the name it got. */
static void name_one(tf_graph *g, const char *base, char *name, size_t size) {
  CHECK_OK(&counts, tf_ir_unique_name(g, base, name, size));
  ir_test_add_zero(&counts, g, name, false);
}

/* Names nodes in the original, copies it midway, destroys the original, and names the same bases
 * in the copy and in a second copy made at the same point: the names are the ones the original
 * gave after the copy point (recorded), so a pass adds the same names to a copy. */
static void naming_goes_with_the_copy(uint64_t seed) {
  static const char *const bases[] = {"relu", "relu_2", "grad", "layer/matmul", "x"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_graph_create("names", &g));
  if (!g)
    return;
  uint64_t state = seed;
  for (int32_t step = 0; step < 200; step++) {
    char name[128];
    name_one(g, bases[ir_test_next(&state) % 5], name, sizeof(name));
    if (ir_test_next(&state) % 16 == 0 && g->n_nodes > 0)
      CHECK_OK(&counts, tf_ir_remove_node(g, (int32_t)(ir_test_next(&state) % (uint32_t)g->n_nodes)));
  }
  tf_graph *copy = NULL, *twin = NULL;
  CHECK_OK(&counts, tf_ir_copy(g, &copy));
  CHECK_OK(&counts, tf_ir_copy(g, &twin));
  if (!copy || !twin) {
    tf_graph_destroy(g);
    tf_graph_destroy(copy);
    tf_graph_destroy(twin);
    return;
  }
  same_graph("named graph", g, copy);
  enum { LATER = 300 };
  static char expected[LATER][128];
  uint64_t later = state;
  for (int32_t step = 0; step < LATER; step++)
    name_one(g, bases[ir_test_next(&later) % 5], expected[step], sizeof(expected[step]));
  tf_graph_destroy(g); /* the copies must not need it */
  int32_t differ = 0;
  for (int32_t step = 0; step < LATER; step++) {
    char a[128], b[128];
    const char *base = bases[ir_test_next(&state) % 5];
    name_one(copy, base, a, sizeof(a));
    name_one(twin, base, b, sizeof(b));
    differ += strcmp(a, expected[step]) != 0 || strcmp(b, expected[step]) != 0;
  }
  CHECK(&counts, differ == 0, "seed %" PRIu64 ": %d of %d names after the copy differ from the original's", seed,
        differ, LATER);
  CHECK(&counts, keys_owned(copy), "seed %" PRIu64 ": the copy's maps after naming", seed);
  tf_graph_destroy(copy);
  tf_graph_destroy(twin);
}

/* A model graph, bound and inferred: its copy serializes to the same bytes. */
static void model_copies(const char *preset, const char *const *overrides, int32_t n) {
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_zoo_build(preset, overrides, n, &g));
  if (!g)
    return;
  CHECK_OK(&counts, tf_graph_infer_shapes(g));
  tf_graph *c = NULL;
  CHECK_OK(&counts, tf_ir_copy(g, &c));
  if (c) {
    same_graph(preset, g, c);
    void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK_OK(&counts, tf_graph_serialize(g, &a, &na));
    tf_graph_destroy(g);
    g = NULL;
    CHECK_OK(&counts, tf_graph_serialize(c, &b, &nb));
    CHECK(&counts, a && b && na == nb && memcmp(a, b, na) == 0, "%s: the copy serializes to other bytes (%zu, %zu)",
          preset, na, nb);
    printf("ok   %-10s copy of %d tensors, %d nodes: the same %zu bytes serialized\n", preset, c->n_tensors, c->n_nodes,
           nb);
    free(a);
    free(b);
  }
  tf_graph_destroy(g);
  tf_graph_destroy(c);
}

/* A graph holding a builder error is not copied. */
static void refuses_a_failed_graph(void) {
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_graph_create("failed", &g));
  if (!g)
    return;
  tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "a builder error"));
  tf_graph *c = NULL;
  tf_status status = tf_ir_copy(g, &c);
  CHECK(&counts, status && !c && strstr(tf_status_message(status), "builder error"), "a failed graph copied: %s",
        tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
}

int main(void) {
  for (uint64_t seed = 1; seed <= 10; seed++)
    naming_goes_with_the_copy(seed);
  model_copies("gpt", (const char *const[]){"layers=2", "d_model=32", "heads=2"}, 3);
  model_copies("cnn", NULL, 0);
  model_copies("asr-128-6-3", (const char *const[]){"enc_layers=2", "dec_layers=1"}, 2);
  refuses_a_failed_graph();
  return tf_test_finish("ir copy", &counts);
}
