/* The shared state of the training passes and the helpers that add tensors and nodes to the
 * compiler's copy of the graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"
#include "compiler/training.h"
#include "core/ops.h"
#include "graph/passes.h"

static bool grow(void **array, int32_t old_count, int32_t new_count, size_t element) {
  void *bigger = realloc(*array, element * (size_t)(new_count ? new_count : 1));
  if (!bigger)
    return false;
  *array = bigger;
  (void)old_count;
  return true;
}

tf_status tf_training_reserve(tf_training *t) {
  int32_t tensors = t->g->n_tensors, nodes = t->g->n_nodes;
  if (tensors > t->capacity_tensors) {
    int32_t capacity = tensors * 2 + 16;
    if (!grow((void **)&t->role, t->capacity_tensors, capacity, sizeof(tf_buffer_role)) ||
        !grow((void **)&t->grad, t->capacity_tensors, capacity, sizeof(int32_t)) ||
        !grow((void **)&t->owner, t->capacity_tensors, capacity, sizeof(int32_t)) ||
        !grow((void **)&t->host, t->capacity_tensors, capacity, sizeof(bool)))
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot grow per-tensor state to %d", capacity);
    for (int32_t i = t->capacity_tensors; i < capacity; i++) {
      t->role[i] = TF_ROLE_ACTIVATION;
      t->grad[i] = -1;
      t->owner[i] = -1;
      t->host[i] = false;
    }
    t->capacity_tensors = capacity;
  }
  if (nodes > t->capacity_nodes) {
    int32_t capacity = nodes * 2 + 16;
    if (!grow((void **)&t->phase, t->capacity_nodes, capacity, sizeof(tf_phase)) ||
        !grow((void **)&t->follows, t->capacity_nodes, capacity, sizeof(int32_t)))
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot grow per-node state to %d", capacity);
    for (int32_t i = t->capacity_nodes; i < capacity; i++) {
      t->phase[i] = TF_PHASE_FORWARD;
      t->follows[i] = -1;
    }
    t->capacity_nodes = capacity;
  }
  return NULL;
}

tf_status tf_training_emit(tf_training *t, tf_op op, const int32_t *inputs, int32_t n_inputs, const tf_attrs *attrs,
                           tf_phase phase, const char *name, int32_t *outputs) {
  tf_graph *g = t->g;
  const tf_op_info *info = tf_op_info_get(op);
  if (!info)
    return tf_status_new(TF_ERR_INTERNAL, "emit: unknown op %d", (int)op);
  char node_name[512];
  TF_RETURN_IF_ERROR(tf_ir_unique_name(g, name, node_name, sizeof(node_name)));
  int32_t ids[TF_MAX_OUTPUTS];
  tf_status status = NULL;
  for (int32_t i = 0; i < info->n_outputs; i++) {
    char tensor_name[560];
    if (info->n_outputs == 1)
      snprintf(tensor_name, sizeof(tensor_name), "%s", node_name);
    else
      snprintf(tensor_name, sizeof(tensor_name), "%s:%d", node_name, i);
    ids[i] = tf_ir_add_tensor(g, tensor_name, TF_F32, TF_ACTIVATION, NULL, NULL, &status);
    if (status)
      return status;
  }
  tf_attrs none;
  memset(&none, 0, sizeof(none));
  int32_t node =
      tf_ir_add_node(g, node_name, op, inputs, n_inputs, ids, info->n_outputs, attrs ? attrs : &none, &status);
  if (status)
    return status;
  TF_RETURN_IF_ERROR(tf_training_reserve(t));
  t->phase[node] = phase;
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, node, false));
  for (int32_t i = 0; i < info->n_outputs && outputs; i++)
    outputs[i] = ids[i];
  return NULL;
}

int32_t tf_training_tensor_like(tf_training *t, int32_t like, tf_buffer_role role, const char *name,
                                tf_status *status) {
  char unique[512];
  *status = tf_ir_unique_name(t->g, name, unique, sizeof(unique));
  if (*status)
    return -1;
  const tf_ir_tensor *source = &t->g->tensors[like];
  tf_dtype dtype = source->dtype;
  int32_t id = tf_ir_add_tensor(t->g, unique, dtype, TF_ACTIVATION, NULL, NULL, status);
  if (*status)
    return -1;
  tf_ir_tensor *tensor = &t->g->tensors[id];
  const tf_ir_tensor *origin = &t->g->tensors[like]; /* the array may have moved */
  tensor->rank = origin->rank;
  memcpy(tensor->shape, origin->shape, sizeof(tensor->shape));
  tensor->bytes = origin->bytes;
  *status = tf_training_reserve(t);
  if (*status)
    return -1;
  t->role[id] = role;
  return id;
}

bool tf_training_stores_f16(const tf_graph *g, const tf_training_config *config) {
  bool f16 = config->precision == TF_PRECISION_F16;
  for (int32_t n = 0; n < g->n_nodes && !f16; n++)
    f16 = g->nodes[n].precision == TF_PRECISION_F16;
  /* an f16 tensor of the graph itself: gradients pass through f16 there (half_ops.c) */
  for (int32_t i = 0; i < g->n_tensors && !f16; i++)
    f16 = g->tensors[i].dtype == TF_F16;
  return f16;
}

int32_t tf_training_scalar(tf_training *t, double value, const char *name, tf_status *status) {
  char unique[512];
  *status = tf_ir_unique_name(t->g, name, unique, sizeof(unique));
  if (*status)
    return -1;
  tf_shape scalar;
  memset(&scalar, 0, sizeof(scalar));
  tf_init init = tf_init_make(TF_INIT_FILL, value, 0);
  int32_t id = tf_ir_add_tensor(t->g, unique, TF_F32, TF_CONSTANT, &scalar, &init, status);
  if (*status)
    return -1;
  *status = tf_shapes_resolve_tensor(t->g, id);
  if (!*status)
    *status = tf_training_reserve(t);
  if (*status)
    return -1;
  t->role[id] = TF_ROLE_CONSTANT;
  return id;
}

/* Into *out, a copy of the first `count` elements (of `element` bytes) of an array of `capacity`;
 * true also when there is no array, false on no memory. */
static bool copy_array(const void *array, int32_t count, int32_t capacity, size_t element, void **out) {
  *out = array ? tf_copy_array(array, count, capacity, element) : NULL;
  return !array || *out;
}

tf_status tf_training_copy(const tf_training *from, tf_training *to) {
  memset(to, 0, sizeof(*to));
  if (from->remat_notes[0])
    return tf_status_new(TF_ERR_INTERNAL, "a training state is copied only before recompute");
  tf_training copy = *from;
  copy.g = NULL;
  copy.role = NULL;
  copy.grad = copy.owner = copy.extra_parts = copy.narrowed = copy.follows = NULL;
  copy.phase = NULL;
  copy.host = NULL;
  bool copied =
      copy_array(from->role, from->capacity_tensors, from->capacity_tensors, sizeof(tf_buffer_role),
                 (void **)&copy.role) &&
      copy_array(from->grad, from->capacity_tensors, from->capacity_tensors, sizeof(int32_t), (void **)&copy.grad) &&
      copy_array(from->owner, from->capacity_tensors, from->capacity_tensors, sizeof(int32_t), (void **)&copy.owner) &&
      copy_array(from->host, from->capacity_tensors, from->capacity_tensors, sizeof(bool), (void **)&copy.host) &&
      copy_array(from->extra_parts, 2 * from->n_extra_parts, 2 * from->capacity_extra_parts, sizeof(int32_t),
                 (void **)&copy.extra_parts) &&
      copy_array(from->narrowed, 2 * from->n_narrowed, 2 * from->capacity_narrowed, sizeof(int32_t),
                 (void **)&copy.narrowed) &&
      copy_array(from->phase, from->capacity_nodes, from->capacity_nodes, sizeof(tf_phase), (void **)&copy.phase) &&
      copy_array(from->follows, from->capacity_nodes, from->capacity_nodes, sizeof(int32_t), (void **)&copy.follows);
  tf_status status = copied ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot copy the training state");
  if (!status && from->g)
    status = tf_ir_copy(from->g, &copy.g);
  if (status) {
    tf_training_free(&copy);
    return status;
  }
  *to = copy;
  return NULL;
}

void tf_training_free(tf_training *t) {
  tf_graph_destroy(t->g);
  free(t->role);
  free(t->grad);
  free(t->follows);
  free(t->extra_parts);
  free(t->narrowed);
  free(t->owner);
  free(t->host);
  free(t->phase);
  memset(t, 0, sizeof(*t));
}

bool tf_training_reads(const tf_training *t, int32_t n, int32_t x, uint32_t phases) {
  const tf_ir_node *node = &t->g->nodes[n];
  if (!((phases >> t->phase[n]) & 1u))
    return false;
  for (int32_t k = 0; k < node->n_inputs; k++)
    if (node->inputs[k] == x && !tf_op_input_shape_only(node->op, k))
      return true;
  return false;
}

tf_status tf_training_reroute_reads(tf_training *t, int32_t x, int32_t n_nodes, uint32_t phases,
                                    tf_training_make_tensor make, const void *context, int32_t *y) {
  *y = -1;
  for (int32_t n = 0; n < n_nodes; n++) {
    if (!tf_training_reads(t, n, x, phases))
      continue;
    if (*y < 0) /* the first reader: the replacement comes into being (nodes >= n_nodes) */
      TF_RETURN_IF_ERROR(make(t, context, y));
    tf_ir_node *node = &t->g->nodes[n];
    for (int32_t k = 0; k < node->n_inputs; k++)
      if (node->inputs[k] == x && !tf_op_input_shape_only(node->op, k))
        node->inputs[k] = *y;
  }
  return NULL;
}

bool tf_training_host_accumulates(const tf_compile_options *options) {
  return options->offload_gradients && options->zero < 2;
}

bool tf_training_in_arena(const tf_training *t, int32_t id) {
  return t->role[id] == TF_ROLE_ACTIVATION && t->g->tensors[id].kind == TF_ACTIVATION && !t->host[id];
}

int32_t tf_training_readers(const tf_graph *g, int32_t tensor) {
  int32_t n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
      n += g->nodes[i].inputs[k] == tensor;
  return n;
}

tf_status tf_training_remove_nodes(tf_training *t, const int32_t *ids, int32_t n_ids) {
  const int32_t before = t->g->n_nodes;
  int32_t *new_id = malloc(sizeof(int32_t) * (size_t)(before ? before : 1));
  if (!new_id)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot remove nodes from %d", before);
  tf_status status = tf_ir_remove_nodes(t->g, ids, n_ids, new_id);
  for (int32_t i = 0; i < before && !status; i++) /* the per-node arrays follow the graph's moves */
    if (new_id[i] >= 0) {
      t->phase[new_id[i]] = t->phase[i];
      t->follows[new_id[i]] = t->follows[i];
    }
  for (int32_t i = 0; i < t->g->n_nodes && !status; i++)
    if (t->follows[i] >= 0)
      t->follows[i] = new_id[t->follows[i]];
  free(new_id);
  return status;
}

tf_status tf_training_remove_node(tf_training *t, int32_t n) { return tf_training_remove_nodes(t, &n, 1); }

tf_status tf_training_emit_cast(tf_training *t, int32_t x, tf_dtype to, tf_phase phase, const char *name,
                                int32_t *out) {
  const tf_attrs attrs = tf_training_cast_attrs(to);
  return tf_training_emit(t, TF_OP_CAST, &x, 1, &attrs, phase, name, out);
}

tf_attrs tf_training_cast_attrs(tf_dtype to) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_CAST;
  attrs.u.cast.to = to;
  return attrs;
}

tf_status tf_node_order_push(tf_node_order *o, int32_t id, const char *pass) {
  if (o->n == o->capacity) {
    int32_t capacity = o->capacity * 2 + 16;
    int32_t *grown = realloc(o->ids, sizeof(int32_t) * (size_t)capacity);
    if (!grown)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot order %d nodes", pass, capacity);
    o->ids = grown;
    o->capacity = capacity;
  }
  o->ids[o->n++] = id;
  return NULL;
}

tf_status tf_training_cast_output(tf_training *t, int32_t n, int32_t i, tf_dtype written, tf_dtype kept, int32_t *wrote,
                                  int32_t *cast) {
  tf_graph *g = t->g;
  const int32_t y = g->nodes[n].outputs[i];
  char base[600], name[640];
  tf_status status = NULL;
  snprintf(base, sizeof(base), "%s/%s", g->tensors[y].name, tf_dtype_name(written));
  TF_RETURN_IF_ERROR(tf_ir_unique_name(g, base, name, sizeof(name)));
  *wrote = tf_ir_add_tensor(g, name, written, TF_ACTIVATION, NULL, NULL, &status);
  if (status)
    return status;
  g->nodes[n].outputs[i] = *wrote;
  g->tensors[*wrote].producer = n;
  g->tensors[y].dtype = kept;
  snprintf(base, sizeof(base), "%s/to_%s", g->nodes[n].name, tf_dtype_name(kept));
  TF_RETURN_IF_ERROR(tf_ir_unique_name(g, base, name, sizeof(name)));
  const tf_attrs attrs = tf_training_cast_attrs(kept);
  *cast = tf_ir_add_node(g, name, TF_OP_CAST, wrote, 1, &y, 1, &attrs, &status);
  if (status)
    return status;
  return tf_training_reserve(t);
}
