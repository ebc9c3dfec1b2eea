/* Kernels that move elements without computing: reshape, transpose, concat, slice, slice_grad and
 * expand. They copy bytes, so they work on every dtype (position ids and labels are reshaped and
 * sliced too); an element's size comes from tf_cpu_element_size(). */
#include <string.h>

#include "core/slice_bounds.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"

#define COPY_CHUNK (1 << 20) /* bytes one task copies in a plain memcpy */
#define TRANSPOSE_TILE 32

/* n elements of `size` bytes to contiguous dst from src with a stride of `stride` elements (0 for
 * a broadcast value, 1 for a plain copy). */
static void copy_strided(char *dst, const char *src, int64_t stride, int64_t n, int64_t size) {
  if (stride == 1) {
    memcpy(dst, src, (size_t)(n * size));
    return;
  }
#define COPY_AS(type)                                                                                                  \
  do {                                                                                                                 \
    type *d = (type *)(void *)dst;                                                                                     \
    const type *s = (const type *)(const void *)src;                                                                   \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      d[i] = s[i * stride];                                                                                            \
  } while (0)
  switch (size) {
  case 1: COPY_AS(uint8_t); break;
  case 2: COPY_AS(uint16_t); break;
  case 4: COPY_AS(uint32_t); break;
  case 8: COPY_AS(uint64_t); break;
  default:
    for (int64_t i = 0; i < n; i++)
      memcpy(dst + i * size, src + i * stride * size, (size_t)size);
  }
#undef COPY_AS
}

static void copy_parallel(void *dst, const void *src, int64_t bytes, int threads) {
  if (dst == src || bytes == 0)
    return;
  const int64_t chunks = (bytes + COPY_CHUNK - 1) / COPY_CHUNK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(threads, chunks > 1), for (int64_t c = 0; c < chunks; c++) {
        const int64_t begin = c * COPY_CHUNK, length = bytes - begin < COPY_CHUNK ? bytes - begin : COPY_CHUNK;
        memcpy((char *)dst + begin, (const char *)src + begin, (size_t)length);
      });
}

/* out[...] = in[...] where operand 1's strides (in elements) say where each output element comes
 * from: the broadcast strides of expand, or the permuted strides of transpose. */
static void gather_run(const tf_cpu_args *args, int32_t rank, int64_t *shape, int64_t (*strides)[TF_MAX_RANK]) {
  const tf_cpu_tensor *x = &args->inputs[0], *out = &args->outputs[0];
  const int64_t size = tf_cpu_element_size(out), count = out->count;
  if (count == 0)
    return;
  tf_cpu_collapse(&rank, shape, 2, strides);
  const char *in = x->data;
  char *dst = out->data;
  const int64_t inner = shape[rank - 1], in_inner = strides[1][rank - 1];
  const int64_t chunks = (count + TF_CPU_CHUNK - 1) / TF_CPU_CHUNK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), chunks > 1), for (int64_t chunk = 0; chunk < chunks; chunk++) {
        const int64_t end = chunk == chunks - 1 ? count : (chunk + 1) * TF_CPU_CHUNK;
        for (int64_t i = chunk * TF_CPU_CHUNK; i < end;) {
          const int64_t column = i % inner, length = inner - column < end - i ? inner - column : end - i;
          int64_t offsets[2];
          tf_cpu_row_offsets(i / inner, rank, shape, 2, strides, offsets);
          copy_strided(dst + i * size, in + (offsets[1] + column * in_inner) * size, in_inner, length, size);
          i += length;
        }
      });
}

void TF_REAL_NAME(tf_cpu_reshape)(const tf_cpu_args *args) {
  /* A plan may place a reshape's output on its input (alias_of): nothing to move. */
  if (args->outputs[0].data == args->inputs[0].data)
    return;
  copy_parallel(args->outputs[0].data, args->inputs[0].data,
                args->outputs[0].count * tf_cpu_element_size(&args->outputs[0]), tf_cpu_threads(args));
}

void TF_REAL_NAME(tf_cpu_expand)(const tf_cpu_args *args) {
  const tf_cpu_tensor *out = &args->outputs[0];
  int64_t shape[TF_MAX_RANK], strides[2][TF_MAX_RANK];
  for (int32_t i = 0; i < out->rank; i++)
    shape[i] = out->shape[i];
  tf_cpu_broadcast_strides(out, out->rank, shape, strides[0]);
  tf_cpu_broadcast_strides(&args->inputs[0], out->rank, shape, strides[1]);
  gather_run(args, out->rank, shape, strides);
}

/* ---- transpose ---- */

/* A true transpose (the input's contiguous axis is not the output's last): copies 2-D tiles so that
 * both the strided reads and the writes stay within a few cache lines. out axis `near` has input
 * stride 1; the output's last axis has input stride `far`. */
static void transpose_tiled(const tf_cpu_args *args, int32_t rank, const int64_t *shape,
                            int64_t (*strides)[TF_MAX_RANK], int32_t near) {
  const int64_t size = tf_cpu_element_size(&args->outputs[0]);
  const char *in = args->inputs[0].data;
  char *dst = args->outputs[0].data;
  const int32_t last = rank - 1;
  const int64_t rows = shape[near], columns = shape[last];
  const int64_t out_row_stride = strides[0][near], far = strides[1][last];
  // Batches: every axis but `near` and `last`, enumerated through a shape with those set to 1.
  int64_t batch_shape[TF_MAX_RANK];
  int64_t batches = 1;
  for (int32_t i = 0; i < rank; i++) {
    batch_shape[i] = i == near || i == last ? 1 : shape[i];
    batches *= batch_shape[i];
  }
  const int64_t row_tiles = (rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
  const int64_t tasks = batches * row_tiles;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), args->outputs[0].count > TF_CPU_CHUNK),
      for (int64_t task = 0; task < tasks; task++) {
        int64_t batch = task / row_tiles, out_offset = 0, in_offset = 0;
        for (int32_t i = rank - 1; i >= 0; i--) {
          const int64_t index = batch % batch_shape[i];
          batch /= batch_shape[i];
          out_offset += index * strides[0][i];
          in_offset += index * strides[1][i];
        }
        const int64_t r0 = (task % row_tiles) * TRANSPOSE_TILE;
        const int64_t r1 = rows - r0 < TRANSPOSE_TILE ? rows : r0 + TRANSPOSE_TILE;
        for (int64_t c0 = 0; c0 < columns; c0 += TRANSPOSE_TILE) {
          const int64_t c1 = columns - c0 < TRANSPOSE_TILE ? columns : c0 + TRANSPOSE_TILE;
          for (int64_t r = r0; r < r1; r++)
            copy_strided(dst + (out_offset + r * out_row_stride + c0) * size, in + (in_offset + r + c0 * far) * size,
                         far, c1 - c0, size);
        }
      });
}

void TF_REAL_NAME(tf_cpu_transpose)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0], *out = &args->outputs[0];
  const int32_t *perm = args->attrs->u.transpose.perm;
  int64_t x_strides[TF_MAX_RANK] = {0}, shape[TF_MAX_RANK], strides[2][TF_MAX_RANK];
  int64_t stride = 1;
  for (int32_t i = x->rank - 1; i >= 0; i--) {
    x_strides[i] = stride;
    stride *= x->shape[i];
  }
  stride = 1;
  for (int32_t i = out->rank - 1; i >= 0; i--) {
    shape[i] = out->shape[i];
    strides[0][i] = stride;
    strides[1][i] = x_strides[perm[i]];
    stride *= shape[i];
  }
  int32_t rank = out->rank;
  if (out->count == 0)
    return;
  tf_cpu_collapse(&rank, shape, 2, strides);
  int32_t near = -1;
  for (int32_t i = 0; i < rank - 1; i++)
    if (strides[1][i] == 1)
      near = i;
  if (near >= 0 && shape[rank - 1] >= 4)
    transpose_tiled(args, rank, shape, strides, near);
  else
    gather_run(args, rank, shape, strides);
}

/* ---- concat and slices: [outer, axis, inner] views ---- */

static void split_at(const tf_cpu_tensor *t, int32_t axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int32_t i = 0; i < axis; i++)
    *outer *= t->shape[i];
  for (int32_t i = axis + 1; i < t->rank; i++)
    *inner *= t->shape[i];
}

void TF_REAL_NAME(tf_cpu_concat)(const tf_cpu_args *args) {
  const tf_cpu_tensor *out = &args->outputs[0];
  const int32_t axis = args->attrs->u.axis.axis < 0 ? args->attrs->u.axis.axis + out->rank : args->attrs->u.axis.axis;
  const int64_t size = tf_cpu_element_size(out), n = args->n_inputs;
  int64_t outer, inner;
  split_at(out, axis, &outer, &inner);
  const int64_t out_row = out->shape[axis] * inner * size;
  const int64_t tasks = outer * n;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), out->count > TF_CPU_CHUNK), for (int64_t task = 0; task < tasks; task++) {
        const int64_t o = task / n, k = task % n;
        int64_t before = 0;
        for (int64_t j = 0; j < k; j++)
          before += args->inputs[j].shape[axis];
        const int64_t bytes = args->inputs[k].shape[axis] * inner * size;
        memcpy((char *)out->data + o * out_row + before * inner * size, (const char *)args->inputs[k].data + o * bytes,
               (size_t)bytes);
      });
}

/* A slice as [outer, dim, inner] views: positions start + k step (k < length) of the axis. */
typedef struct slice_view {
  int64_t outer, dim, inner, start, step, length, size; /* size: bytes per element */
} slice_view;

static slice_view slice_view_of(const tf_cpu_args *args, const tf_cpu_tensor *whole, const tf_cpu_tensor *part) {
  const tf_slice_attrs *a = &args->attrs->u.slice;
  const int32_t axis = a->axis < 0 ? a->axis + whole->rank : a->axis;
  slice_view v;
  split_at(whole, axis, &v.outer, &v.inner);
  v.dim = whole->shape[axis];
  v.length = part->shape[axis];
  v.start = tf_slice_bound(a->start, v.dim);
  v.step = a->step;
  v.size = tf_cpu_element_size(whole);
  return v;
}

/* Copies the slice's positions of one [dim, inner] row of the whole (`whole`) to or from one
 * [length, inner] row of the part: to the part when `to_part`, else to the whole (slice_grad,
 * whose other positions the caller zeroes). A step of 1 is one block; a row of single elements
 * (inner == 1, a slice along the last axis) is a strided loop, not a memcpy per element. */
static void move_slice_row(const slice_view *v, char *whole, char *part, bool to_part) {
  const int64_t row = v->inner * v->size;
  char *first = whole + v->start * row;
  if (v->step == 1) {
    if (to_part)
      memcpy(part, first, (size_t)(v->length * row));
    else
      memcpy(first, part, (size_t)(v->length * row));
    return;
  }
  if (v->inner == 1 && to_part) {
    copy_strided(part, first, v->step, v->length, v->size);
    return;
  }
  for (int64_t k = 0; k < v->length; k++) {
    if (to_part)
      memcpy(part + k * row, first + k * v->step * row, (size_t)row);
    else
      memcpy(first + k * v->step * row, part + k * row, (size_t)row);
  }
}

/* Zeroes the positions of one [dim, inner] row of dx that the slice does not cover. */
static void zero_outside_slice(const slice_view *v, char *whole) {
  const int64_t row = v->inner * v->size;
  if (v->length == 0) {
    memset(whole, 0, (size_t)(v->dim * row));
    return;
  }
  const int64_t last = v->start + (v->length - 1) * v->step; // the last position the slice covers
  memset(whole, 0, (size_t)(v->start * row));
  memset(whole + (last + 1) * row, 0, (size_t)((v->dim - last - 1) * row));
  if (v->step == 1)
    return;
  for (int64_t k = 0; k + 1 < v->length; k++) // the gaps between covered positions
    memset(whole + (v->start + k * v->step + 1) * row, 0, (size_t)((v->step - 1) * row));
}

/* Rows of the whole are the tasks: each moves at most dim x inner elements, in a few blocks. */
void TF_REAL_NAME(tf_cpu_slice)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0], *out = &args->outputs[0];
  const slice_view v = slice_view_of(args, x, out);
  const int64_t whole_row = v.dim * v.inner * v.size, part_row = v.length * v.inner * v.size;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), out->count > TF_CPU_CHUNK && v.outer > 1),
      for (int64_t o = 0; o < v.outer;
           o++) { move_slice_row(&v, (char *)x->data + o * whole_row, (char *)out->data + o * part_row, true); });
}

/* dx = zeros of x's shape with dy placed at the slice: each element of dx written once. */
void TF_REAL_NAME(tf_cpu_slice_grad)(const tf_cpu_args *args) {
  const tf_cpu_tensor *dy = &args->inputs[0], *dx = &args->outputs[0];
  const slice_view v = slice_view_of(args, dx, dy);
  const int64_t whole_row = v.dim * v.inner * v.size, part_row = v.length * v.inner * v.size;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), dx->count > TF_CPU_CHUNK && v.outer > 1),
      for (int64_t o = 0; o < v.outer; o++) {
        char *whole = (char *)dx->data + o * whole_row;
        zero_outside_slice(&v, whole);
        move_slice_row(&v, whole, (char *)dy->data + o * part_row, false);
      });
}
