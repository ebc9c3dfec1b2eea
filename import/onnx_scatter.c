/* ScatterND: of values known when importing, folded (BEiT's relative position index); of data, when
 * its indices are a slice's positions (what torch exports for `x[:, 1:] = y`: BART's shifted ids,
 * BLOOM's causal mask), a box of the data replaced by the updates, built as slices and concats.
 *
 * The indices [U..., k] are recognised by walking back from them through the ONNX nodes that made
 * them: each of the k components must be an index grid, offset + sum of coef[d] * u[d] over the
 * positions u (a Range, reshaped, expanded, sliced or shifted by a number; or a known value of that
 * form). A component that depends on one axis of u with coefficient 1 is a span of data's axis, one
 * that depends on none a single position; every axis of u longer than one feeds one component (no
 * position is written twice). A negative position counts from the end (XGLM's shift_labels[:, -1] =
 * pad; on a symbolic axis, slices by negative bounds). Anything else (a strided, diagonal or computed
 * index), and any reduction, goes to onnx_scatter_computed.c (a one-hot of the positions). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/checked.h"
#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* How many nodes back an index grid is looked for. */
enum { GRID_DEPTH = 24 };
/* The most elements of a known value checked for a grid's form. */
#define GRID_KNOWN_LIMIT ((int64_t)1 << 20)

/* An integer tensor whose element at u is offset + sum coef[d] * u[d]. Sizes are the import-time
 * ones (a symbolic axis has its symbol's prime, ox_symbol_prime). */
typedef struct grid {
  int32_t rank;
  int64_t sizes[TF_MAX_RANK];
  int64_t offset;
  int64_t coef[TF_MAX_RANK];
} grid;

/* The import-time sizes of value `name` (a known value's or its graph tensor's); false if it has none. */
static bool value_sizes(ox_import *im, const char *name, int32_t *rank, int64_t *sizes) {
  const ox_value *v = name ? ox_value_find(im, name) : NULL;
  if (!v)
    return false;
  if (v->known) {
    *rank = v->known->rank;
    memcpy(sizes, v->known->shape, sizeof(int64_t) * (size_t)v->known->rank);
    return true;
  }
  tf_tensor_info info;
  if (v->tensor == TF_NO_TENSOR || !tf_graph_tensor(im->graph, v->tensor, &info) || info.rank < 0)
    return false;
  *rank = info.rank;
  memcpy(sizes, info.shape, sizeof(int64_t) * (size_t)info.rank);
  return true;
}

/* A known integer scalar with no symbol. */
static bool fixed_scalar(ox_import *im, const char *name, int64_t *out) {
  const ox_value *v = name ? ox_value_find(im, name) : NULL;
  if (!v || !v->known || v->known->is_float || v->known->count != 1 || v->known->ints[0].symbol >= 0)
    return false;
  *out = v->known->ints[0].size;
  return true;
}

/* The known integers of value `name` (at most TF_MAX_RANK, none symbolic) into out[0, *n). */
static bool known_fixed_ints(ox_import *im, const char *name, int64_t *out, int32_t *n) {
  const ox_value *v = name ? ox_value_find(im, name) : NULL;
  if (!v || !v->known || v->known->is_float || v->known->count > TF_MAX_RANK)
    return false;
  *n = (int32_t)v->known->count;
  for (int32_t i = 0; i < *n; i++) {
    if (v->known->ints[i].symbol >= 0)
      return false;
    out[i] = v->known->ints[i].size;
  }
  return true;
}

/* Component j of k of known integers k (shape [U..., k], k == 1 for a plain grid) as a grid over U,
 * when every element fits offset + sum coef[d] * u[d]. */
static bool fit_known(const ox_known *known, int32_t j, int32_t k, grid *g) {
  if (known->is_float || known->rank < 1 || known->count < 1 || known->shape[known->rank - 1] != k)
    return false;
  for (int64_t i = 0; i < known->count; i++)
    if (known->ints[i].symbol >= 0)
      return false;
  g->rank = known->rank - 1;
  memcpy(g->sizes, known->shape, sizeof(int64_t) * (size_t)g->rank);
  g->offset = known->ints[j].size;
  int64_t stride = k;
  for (int32_t d = g->rank - 1; d >= 0; d--) {
    g->coef[d] = 0;
    if (g->sizes[d] > 1 && !tf_checked_sub_i64(known->ints[stride + j].size, g->offset, &g->coef[d]))
      return false;
    stride *= g->sizes[d];
  }
  for (int64_t e = 0; e < known->count / k; e++) { /* every element checked */
    int64_t at = e, want = g->offset;
    for (int32_t d = g->rank - 1; d >= 0; d--) {
      int64_t term = 0;
      if (!tf_checked_mul_i64(g->coef[d], at % g->sizes[d], &term) || !tf_checked_add_i64(want, term, &want))
        return false;
      at /= g->sizes[d];
    }
    if (known->ints[e * k + j].size != want)
      return false;
  }
  return true;
}

static bool grid_of(ox_import *im, const char *name, int32_t depth, grid *g);

/* A grid reshaped to `sizes` that only adds or drops axes of size 1: the other axes keep their order. */
static bool grid_reshaped(const grid *in, int32_t rank, const int64_t *sizes, grid *g) {
  int32_t i = 0;
  g->rank = rank;
  g->offset = in->offset;
  for (int32_t o = 0; o < rank; o++) {
    g->sizes[o] = sizes[o];
    g->coef[o] = 0;
    if (sizes[o] == 1)
      continue;
    while (i < in->rank && in->sizes[i] == 1)
      i++;
    if (i == in->rank || in->sizes[i] != sizes[o])
      return false;
    g->coef[o] = in->coef[i++];
  }
  while (i < in->rank && in->sizes[i] == 1)
    i++;
  return i == in->rank;
}

/* A grid broadcast to `sizes` (numpy's rules, aligned at the end). */
static bool grid_expanded(const grid *in, int32_t rank, const int64_t *sizes, grid *g) {
  if (rank < in->rank)
    return false;
  g->rank = rank;
  g->offset = in->offset;
  for (int32_t o = 0; o < rank; o++) {
    const int32_t i = o - (rank - in->rank);
    g->sizes[o] = sizes[o];
    g->coef[o] = 0;
    if (i < 0 || in->sizes[i] == 1)
      continue;
    if (in->sizes[i] != sizes[o])
      return false;
    g->coef[o] = in->coef[i];
  }
  return true;
}

/* Slice(x, starts, ends, axes, steps) of a grid: each sliced axis starts later and steps further. */
static bool grid_sliced(ox_import *im, const ox_node *node, const grid *in, int32_t rank, const int64_t *sizes,
                        grid *g) {
  int64_t starts[TF_MAX_RANK], axes[TF_MAX_RANK], steps[TF_MAX_RANK];
  int32_t n, n_axes = -1, n_steps = -1;
  if (im->opset < 10 || rank != in->rank || !known_fixed_ints(im, ox_input(node, 1), starts, &n) ||
      (ox_input(node, 3) && !known_fixed_ints(im, ox_input(node, 3), axes, &n_axes)) ||
      (ox_input(node, 4) && !known_fixed_ints(im, ox_input(node, 4), steps, &n_steps)) ||
      (n_axes >= 0 && n_axes != n) || (n_steps >= 0 && n_steps != n))
    return false;
  for (int32_t i = 0; i < n; i++) {
    axes[i] = n_axes < 0 ? i : axes[i];
    steps[i] = n_steps < 0 ? 1 : steps[i];
  }
  *g = *in;
  memcpy(g->sizes, sizes, sizeof(int64_t) * (size_t)rank);
  for (int32_t i = 0; i < n; i++) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i], start = starts[i], shift = 0;
    if (axis < 0 || axis >= rank || steps[i] == 0)
      return false;
    const int64_t size = in->sizes[axis];
    if (start < 0 && size >= OX_SYMBOL_PRIME_MIN) /* from the end of a symbolic axis */
      return false;
    start = start < 0 ? start + size : start;
    start = start < 0 ? 0 : start > size - (steps[i] < 0) ? size - (steps[i] < 0) : start;
    if (!tf_checked_mul_i64(in->coef[axis], start, &shift) || !tf_checked_add_i64(g->offset, shift, &g->offset) ||
        !tf_checked_mul_i64(in->coef[axis], steps[i], &g->coef[axis]))
      return false;
  }
  return true;
}

/* Value `name`, the output of Add, Sub or Mul of a grid and a known number (either side). */
static bool grid_arithmetic(ox_import *im, const char *name, const ox_node *node, int32_t depth, grid *g) {
  const char *op = node->proto->op_type;
  int64_t number;
  int32_t side = fixed_scalar(im, ox_input(node, 1), &number)   ? 0
                 : fixed_scalar(im, ox_input(node, 0), &number) ? 1
                                                                : -1;
  if (side < 0 || !grid_of(im, ox_input(node, side), depth - 1, g))
    return false;
  int32_t rank;
  int64_t sizes[TF_MAX_RANK];
  if (!value_sizes(im, name, &rank, sizes) || rank != g->rank ||
      memcmp(sizes, g->sizes, sizeof(int64_t) * (size_t)rank) != 0)
    return false;
  if (strcmp(op, "Mul") == 0) {
    for (int32_t d = 0; d < g->rank; d++)
      if (!tf_checked_mul_i64(g->coef[d], number, &g->coef[d]))
        return false;
    return tf_checked_mul_i64(g->offset, number, &g->offset);
  }
  if (strcmp(op, "Sub") == 0 && side == 1) { /* number - grid */
    for (int32_t d = 0; d < g->rank; d++)
      if (!tf_checked_sub_i64(0, g->coef[d], &g->coef[d]))
        return false;
    return tf_checked_sub_i64(number, g->offset, &g->offset);
  }
  return strcmp(op, "Sub") == 0 ? tf_checked_sub_i64(g->offset, number, &g->offset)
                                : tf_checked_add_i64(g->offset, number, &g->offset);
}

/* Whether value `name` is an index grid (g), looking back at most `depth` nodes. */
static bool grid_of(ox_import *im, const char *name, int32_t depth, grid *g) {
  int32_t rank;
  int64_t sizes[TF_MAX_RANK];
  const ox_value *v = name ? ox_value_find(im, name) : NULL;
  if (!v || depth <= 0 || !value_sizes(im, name, &rank, sizes))
    return false;
  if (v->known && v->known->count <= GRID_KNOWN_LIMIT && v->known->rank < TF_MAX_RANK) {
    ox_known column = *v->known; /* the same values with a last axis of 1 */
    column.shape[column.rank++] = 1;
    return fit_known(&column, 0, 1, g);
  }
  const ox_node *node = ox_producer(im, name);
  if (!node)
    return false;
  const char *op = node->proto->op_type;
  if (node->fused != OX_PLAIN || !ox_default_domain(node->proto->domain))
    return false;
  grid in;
  if (strcmp(op, "Range") == 0) {
    int64_t start, delta;
    if (rank != 1 || !fixed_scalar(im, ox_input(node, 0), &start) || !fixed_scalar(im, ox_input(node, 2), &delta))
      return false;
    *g = (grid){.rank = 1, .sizes = {sizes[0]}, .offset = start, .coef = {delta}};
    return true;
  }
  if (strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Mul") == 0)
    return grid_arithmetic(im, name, node, depth, g);
  const bool reshapes = strcmp(op, "Reshape") == 0 || strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 ||
                        strcmp(op, "Flatten") == 0 || strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0;
  if (strcmp(op, "Cast") == 0 && v->tensor != TF_NO_TENSOR &&
      (ox_dtype_of(im, v->tensor) != TF_I64 && ox_dtype_of(im, v->tensor) != TF_I32))
    return false; /* through a float, a large index could round */
  if (!reshapes && strcmp(op, "Expand") != 0 && strcmp(op, "Slice") != 0)
    return false;
  if (!grid_of(im, ox_input(node, 0), depth - 1, &in))
    return false;
  if (reshapes)
    return grid_reshaped(&in, rank, sizes, g);
  if (strcmp(op, "Expand") == 0)
    return grid_expanded(&in, rank, sizes, g);
  return grid_sliced(im, node, &in, rank, sizes, g);
}

/* The k components of indices [U..., k] as grids over U: a known value, a Concat on the last axis
 * of grids [U..., 1], or (k == 1) one grid. */
static bool index_components(ox_import *im, const char *indices, int32_t k, grid *parts) {
  const ox_value *v = ox_value_find(im, indices);
  if (v && v->known && v->known->count <= GRID_KNOWN_LIMIT) {
    for (int32_t j = 0; j < k; j++)
      if (!fit_known(v->known, j, k, &parts[j]))
        return false;
    return true;
  }
  const int32_t at = tf_strmap_get(&im->producers, indices);
  const ox_node *node = at >= 0 ? &im->nodes[at] : NULL;
  const bool concat = node && node->fused == OX_PLAIN && ox_default_domain(node->proto->domain) &&
                      strcmp(node->proto->op_type, "Concat") == 0 && node->n_inputs == k;
  for (int32_t j = 0; j < k; j++) {
    grid g;
    if ((!concat && k != 1) || !grid_of(im, concat ? ox_input(node, j) : indices, GRID_DEPTH, &g) || g.rank < 1 ||
        g.sizes[g.rank - 1] != 1)
      return false;
    parts[j] = g;
    parts[j].rank--; /* the last axis (of 1) enumerates the components */
    if (parts[j].rank != parts[0].rank ||
        memcmp(parts[j].sizes, parts[0].sizes, sizeof(int64_t) * (size_t)parts[0].rank) != 0)
      return false;
  }
  return !concat || ox_attr_int(node, "axis", 0) == -1 || ox_attr_int(node, "axis", 0) == parts[0].rank;
}

/* A box of data's first k axes: position j spans [start[j], start[j] + length[j]), read from axis
 * from[j] of the updates (-1: a single position, no axis of its own). */
typedef struct box {
  int32_t k;
  int64_t start[TF_MAX_RANK], length[TF_MAX_RANK];
  int32_t from[TF_MAX_RANK];
} box;

/* The box the components address, or an error naming what is not a slice's positions. */
static tf_status box_of(ox_import *im, const ox_node *node, const grid *parts, int32_t k, const int64_t *data_sizes,
                        box *b) {
  const int32_t q = parts[0].rank;
  int32_t fed[TF_MAX_RANK] = {0};
  b->k = k;
  for (int32_t j = 0; j < k; j++) {
    b->from[j] = -1;
    b->start[j] = parts[j].offset;
    b->length[j] = 1;
    for (int32_t d = 0; d < q; d++) {
      if (parts[j].sizes[d] == 1 || parts[j].coef[d] == 0)
        continue;
      if (b->from[j] >= 0 || parts[j].coef[d] != 1)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                       "ScatterND of data: index component %" PRId32
                       " is not a slice's positions (a step other than 1, or several axes of the indices)",
                       j);
      b->from[j] = d;
      b->length[j] = parts[j].sizes[d];
      fed[d]++;
    }
    const int64_t size = data_sizes[j];
    const bool fixed_size = size < OX_SYMBOL_PRIME_MIN, fixed_length = b->length[j] < OX_SYMBOL_PRIME_MIN;
    if (b->start[j] < 0 && fixed_size) /* counted from the end (shift_labels[:, -1] = pad) */
      b->start[j] += size;
    const bool whole = b->start[j] == 0 && b->length[j] == size;
    /* On a symbolic axis, positions counted from the end: slices by negative bounds (assign_box). */
    const bool from_end = !fixed_size && fixed_length && b->start[j] < 0 && b->start[j] + b->length[j] <= 0;
    const bool inside = fixed_size && fixed_length && b->start[j] >= 0 && b->start[j] <= size - b->length[j];
    if (!whole && !from_end && !inside)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "ScatterND of data: positions from %" PRId64 " to %" PRId64 " of axis %" PRId32
                     " are not inside it (an index out of bounds, or part of a symbolic axis)",
                     b->start[j], b->start[j] + b->length[j], j);
  }
  for (int32_t d = 0; d < q; d++)
    if (parts[0].sizes[d] > 1 && fed[d] != 1)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ScatterND of data: axis %" PRId32 " of the indices %s", d,
                     fed[d] ? "feeds several positions of data" : "writes the same positions again");
  return NULL;
}

/* The updates [U..., rest] as the box's values [length..., rest]: U's axes in data's order, an axis
 * of U of size 1 (or a new one) for each single position, U's other axes of 1 dropped. */
static tf_tensor_id box_values(ox_import *im, tf_tensor_id updates, const box *b, int32_t q) {
  int32_t rank, slot[TF_MAX_RANK], perm[TF_MAX_RANK], n = 0, m = 0;
  tf_dim dims[TF_MAX_RANK], out[TF_MAX_RANK];
  bool used[TF_MAX_RANK] = {false};
  ox_tensor_dims(im, updates, &rank, dims);
  for (int32_t j = 0; j < b->k; j++)
    if (b->from[j] >= 0)
      used[b->from[j]] = true;
  for (int32_t j = 0; j < b->k; j++) { /* the axis of U each position of the box reads, or -1 */
    slot[j] = b->from[j];
    for (int32_t d = 0; slot[j] < 0 && d < q; d++)
      if (!used[d]) {
        used[d] = true;
        slot[j] = d;
      }
  }
  for (int32_t j = 0; j < b->k; j++)
    if (slot[j] >= 0)
      perm[m++] = slot[j];
  for (int32_t d = 0; d < q; d++)
    if (!used[d])
      perm[m++] = d; /* axes of 1, dropped below */
  for (int32_t d = q; d < rank; d++)
    perm[m++] = d;
  bool identity = true, reshape = false;
  for (int32_t d = 0; d < rank; d++)
    identity = identity && perm[d] == d;
  for (int32_t j = 0; j < b->k; j++) {
    out[n++] = slot[j] >= 0 ? dims[slot[j]] : tf_fixed(1);
    reshape = reshape || slot[j] < 0;
  }
  for (int32_t d = 0; d < q; d++)
    reshape = reshape || !used[d];
  for (int32_t d = q; d < rank; d++)
    out[n++] = dims[d];
  tf_tensor_id x = identity ? updates : tf_transpose(im->graph, updates, perm, rank);
  return reshape ? tf_reshape(im->graph, x, tf_shape_from(out, n)) : x;
}

/* data with its box from axis j on replaced by values (data's extent on axes before j). */
static tf_tensor_id assign_box(ox_import *im, tf_tensor_id data, tf_tensor_id values, const box *b,
                               const int64_t *data_sizes, int32_t j) {
  if (j == b->k)
    return values;
  const int64_t start = b->start[j], end = start + b->length[j];
  if (start == 0 && b->length[j] == data_sizes[j])
    return assign_box(im, data, values, b, data_sizes, j + 1);
  /* A negative start (a symbolic axis, box_of): bounds counted from the end, the box ending at it
   * when end is 0. */
  tf_tensor_id parts[3];
  int32_t n = 0;
  if (start != 0)
    parts[n++] = tf_slice(im->graph, data, j, 0, start, 1);
  const int64_t box_end = start < 0 && end == 0 ? INT64_MAX : end;
  parts[n++] = assign_box(im, tf_slice(im->graph, data, j, start, box_end, 1), values, b, data_sizes, j + 1);
  if (start < 0 ? end < 0 : end < data_sizes[j])
    parts[n++] = tf_slice(im->graph, data, j, end, INT64_MAX, 1);
  return tf_concat(im->graph, parts, n, j);
}

/* ScatterND of data whose indices are a slice's positions (see the top of the file). */
static tf_status scatter_into_box(ox_import *im, const ox_node *node) {
  int32_t data_rank, index_rank, update_rank;
  int64_t data_sizes[TF_MAX_RANK], index_sizes[TF_MAX_RANK], update_sizes[TF_MAX_RANK];
  if (!ox_attr_is(node, "reduction", "none", "none"))
    return ox_scatter_nd_computed(im, node);
  tf_tensor_id data, updates;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &updates));
  if (!value_sizes(im, ox_input(node, 0), &data_rank, data_sizes) ||
      !value_sizes(im, ox_input(node, 1), &index_rank, index_sizes) ||
      !value_sizes(im, ox_input(node, 2), &update_rank, update_sizes) || index_rank < 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "ScatterND: inputs of unknown shape");
  const int32_t q = index_rank - 1;
  const int64_t k = index_sizes[q];
  if (k < 1 || k > data_rank || update_rank != q + data_rank - k ||
      memcmp(update_sizes, index_sizes, sizeof(int64_t) * (size_t)q) != 0 ||
      memcmp(update_sizes + q, data_sizes + k, sizeof(int64_t) * (size_t)(data_rank - k)) != 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "ScatterND: updates of rank %" PRId32 " do not match indices of rank %" PRId32
                   " into data of rank %" PRId32,
                   update_rank, index_rank, data_rank);
  if (ox_dtype_of(im, data) != ox_dtype_of(im, updates))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "ScatterND: updates of another type than the data's");
  for (int32_t d = 0; d < q; d++)
    if (index_sizes[d] == 0) /* no position written */
      return ox_set_tensor(im, node, 0, data);
  grid parts[TF_MAX_RANK];
  if (!index_components(im, ox_input(node, 1), (int32_t)k, parts))
    return ox_scatter_nd_computed(im, node);
  box b;
  TF_RETURN_IF_ERROR(box_of(im, node, parts, (int32_t)k, data_sizes, &b));
  tf_tensor_id values = box_values(im, updates, &b, q);
  return ox_set_tensor(im, node, 0, assign_box(im, data, values, &b, data_sizes, 0));
}

/* ScatterND of values known when importing (BEiT's relative position index, built by slice
 * assignments: `index[1:, 1:] = ...`): folded, with any of the five reductions. Of data: a slice
 * assignment (scatter_into_box). */
/* ScatterND of indices and updates with no elements (a write into a slice that selects nothing:
 * torchvision's Swin3D mask, mask[0:-w] = count where the window is the whole input): the data as it is. */
static tf_status scatter_nothing(ox_import *im, const ox_node *node) {
  const ox_known *known = ox_foldable(im, node, 0);
  if (known) {
    ox_known *copy = ox_fold_copy(known, known->rank, known->shape);
    return copy ? ox_set_known(im, node, 0, copy) : ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  tf_tensor_id data;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  return ox_set_tensor(im, node, 0, data);
}

tf_status ox_convert_scatter_nd(ox_import *im, const ox_node *node) {
  for (int32_t i = 0; i < 3; i++)
    TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  if (!ox_empty_input(im, node, 0) && (ox_empty_input(im, node, 1) || ox_empty_input(im, node, 2)))
    return scatter_nothing(im, node);
  if (!ox_foldable(im, node, 0) || !ox_foldable(im, node, 1) || !ox_foldable(im, node, 2))
    return scatter_into_box(im, node);
  static const struct {
    const char *name;
    char op;
  } reductions[] = {{"none", '='}, {"add", '+'}, {"mul", '*'}, {"max", 'M'}, {"min", 'm'}};
  char op = 0;
  for (size_t i = 0; !op && i < sizeof(reductions) / sizeof(reductions[0]); i++)
    if (ox_attr_is(node, "reduction", "none", reductions[i].name))
      op = reductions[i].op;
  if (!op)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a reduction other than none, add, mul, max or min");
  ox_known *k;
  TF_RETURN_IF_ERROR(
      ox_at(im, node,
            ox_fold_scatter_nd(ox_foldable(im, node, 0), ox_foldable(im, node, 1), ox_foldable(im, node, 2), op, &k)));
  return ox_set_known(im, node, 0, k);
}
