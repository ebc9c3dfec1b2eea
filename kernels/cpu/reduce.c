/* Reductions over axes: sum, mean, max, their gradients' helpers sum_to and max_grad, and
 * global_norm_sq (the squared norm of every gradient, for global-norm clipping).
 *
 * Sums accumulate in double in both builds, each output's terms in a fixed order, so results are
 * bitwise identical for any thread count. A reduction of everything into one scalar is cut into
 * blocks whose size depends only on the element count; the block partials are added in order. */
#include <string.h>

#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"

#define MAX_BLOCKS 256  /* partial sums of a full reduction, on the stack */
#define MIN_BLOCK 4096  /* elements per block at least */
#define COLUMN_TILE 256 /* output columns one task accumulates at once (stack doubles) */
#define MIN_TILE 16     /* ... and at least this many (a cache line of doubles and more) */
#define LANES 8         /* outputs summed side by side when each has several reduced runs */
#define PARTIALS 4096   /* a bias gradient's row blocks' partial sums (doubles, on the stack) */

/* The geometry of a reduction of x over a mask of axes, collapsed: size-1 axes dropped, adjacent
 * axes of the same kind (reduced or kept) merged. x is contiguous, so merging always works. */
typedef struct reduction {
  int32_t rank;
  int64_t shape[TF_MAX_RANK], stride[TF_MAX_RANK];
  bool reduced[TF_MAX_RANK];
  int64_t outputs, group;       /* output elements; input elements per output */
  int32_t reduced_groups;       /* runs of reduced axes after merging */
  int64_t outer, length, inner; /* with at most one reduced run: x is [outer, length, inner] */
  int32_t last_reduced;         /* the innermost reduced axis, or -1 */
} reduction;

static void reduction_init(reduction *r, const tf_cpu_tensor *x, const bool *reduced_axes) {
  memset(r, 0, sizeof(*r));
  for (int32_t i = 0; i < x->rank; i++) {
    if (x->shape[i] == 1)
      continue;
    if (r->rank > 0 && r->reduced[r->rank - 1] == reduced_axes[i]) {
      r->shape[r->rank - 1] *= x->shape[i];
      continue;
    }
    r->shape[r->rank] = x->shape[i];
    r->reduced[r->rank] = reduced_axes[i];
    r->rank++;
  }
  int64_t stride = 1;
  r->outputs = r->group = 1;
  r->outer = r->length = r->inner = 1;
  r->last_reduced = -1;
  for (int32_t i = r->rank - 1; i >= 0; i--) {
    r->stride[i] = stride;
    stride *= r->shape[i];
    if (r->reduced[i]) {
      r->group *= r->shape[i];
      if (r->last_reduced < 0)
        r->last_reduced = i;
      if (i == r->rank - 1 || !r->reduced[i + 1])
        r->reduced_groups++;
    } else {
      r->outputs *= r->shape[i];
    }
  }
  if (r->reduced_groups == 0) {
    r->outer = r->outputs;
  } else if (r->reduced_groups == 1) {
    int32_t axis = r->last_reduced;
    r->length = r->shape[axis];
    r->inner = r->stride[axis];
    r->outer = r->outputs / r->inner;
  }
}

/* Marks the axes of attrs in reduced[] (negative axes count from the end; none means all). */
static void reduction_from_attrs(reduction *r, const tf_cpu_tensor *x, const tf_reduce_attrs *attrs) {
  bool reduced[TF_MAX_RANK];
  for (int32_t i = 0; i < TF_MAX_RANK; i++)
    reduced[i] = attrs->n_axes == 0;
  for (int32_t i = 0; i < attrs->n_axes; i++)
    reduced[attrs->axes[i] < 0 ? attrs->axes[i] + x->rank : attrs->axes[i]] = true;
  reduction_init(r, x, reduced);
}

/* Offset in x of the first element of output o's group. */
static int64_t output_base(const reduction *r, int64_t o) {
  int64_t offset = 0;
  for (int32_t i = r->rank - 1; i >= 0 && o > 0; i--) {
    if (r->reduced[i])
      continue;
    offset += (o % r->shape[i]) * r->stride[i];
    o /= r->shape[i];
  }
  return offset;
}

/* Offset, from a group's base, of run `run` along the innermost reduced axis. */
static int64_t run_offset(const reduction *r, int64_t run) {
  int64_t offset = 0;
  for (int32_t i = r->last_reduced - 1; i >= 0 && run > 0; i--) {
    if (!r->reduced[i])
      continue;
    offset += (run % r->shape[i]) * r->stride[i];
    run /= r->shape[i];
  }
  return offset;
}

/* Walks output o's group as runs: for each, `offset` (from x) and the run's stride and length. */
#define FOR_EACH_RUN(r, o, offset, BODY)                                                                               \
  do {                                                                                                                 \
    const int64_t base_ = output_base(r, o);                                                                           \
    const int64_t length_ = (r)->last_reduced >= 0 ? (r)->shape[(r)->last_reduced] : 1;                                \
    const int64_t runs_ = (r)->group / (length_ > 0 ? length_ : 1);                                                    \
    for (int64_t run_ = 0; run_ < runs_; run_++) {                                                                     \
      const int64_t offset = base_ + run_offset(r, run_);                                                              \
      BODY                                                                                                             \
    }                                                                                                                  \
  } while (0)

/* ---- sums ---- */

/* Sum of n contiguous elements in blocks whose size depends on n only, partials added in order. */
static double blocked_sum(const real *x, int64_t n, bool squares, int threads) {
  int64_t block = (n + MAX_BLOCKS - 1) / MAX_BLOCKS;
  block = block < MIN_BLOCK ? MIN_BLOCK : block;
  const int64_t blocks = (n + block - 1) / block;
  double partial[MAX_BLOCKS];
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(threads, blocks > 1), for (int64_t b = 0; b < blocks; b++) {
        const int64_t end = b == blocks - 1 ? n : (b + 1) * block;
        double sum = 0;
        if (squares) {
          for (int64_t i = b * block; i < end; i++)
            sum += (double)x[i] * (double)x[i];
        } else {
          for (int64_t i = b * block; i < end; i++)
            sum += (double)x[i];
        }
        partial[b] = sum;
      });
  double total = 0;
  for (int64_t b = 0; b < blocks; b++)
    total += partial[b];
  return total;
}

/* sum[k] = the sum over output (o + k)'s runs, k < count <= LANES, where output o + k's runs are
 * output o's moved by k x distance elements; each output's terms in the order of FOR_EACH_RUN. */
static inline void sum_lanes(const reduction *r, const real *x, int64_t o, int64_t distance, int64_t count,
                             double *sum) {
  const int64_t stride = r->stride[r->last_reduced], length = r->shape[r->last_reduced];
  for (int64_t k = 0; k < count; k++)
    sum[k] = 0;
  FOR_EACH_RUN(r, o, offset, {
    for (int64_t j = 0; j < length; j++) {
      const real *at = x + offset + j * stride;
      for (int64_t k = 0; k < count; k++)
        sum[k] += (double)at[k * distance];
    }
  });
}

/* The row blocks of a bias gradient's sum (one kept run of `inner` columns after the reduced rows;
 * kernels/cpu/parallel.h); 1 when the sum is not of that kind. */
static int64_t row_blocks(const reduction *r) {
  if (r->outer != 1 || r->inner <= 1)
    return 1;
  return tf_cpu_row_blocks(r->length, r->inner, 1, TF_CPU_CHUNK, PARTIALS);
}

/* out[i] = the sum over j < rows of x[j stride + i], for i < count <= COLUMN_TILE: columns summed row
 * by row (the reads contiguous), each in row order, in double, on this thread's stack until the end
 * (summed straight into a shared array, 6-13% slower on two threads). */
static void column_sums(const real *x, int64_t stride, int64_t rows, int64_t count, double *out) {
  double sum[COLUMN_TILE];
  for (int64_t i = 0; i < count; i++)
    sum[i] = 0;
  for (int64_t j = 0; j < rows; j++) {
    const real *row = x + j * stride;
    for (int64_t i = 0; i < count; i++)
      sum[i] += (double)row[i];
  }
  memcpy(out, sum, sizeof(double) * (size_t)count);
}

/* y = the sum (or mean) of x over r's reduced axes. */
static void sum_run(const reduction *r, const real *x, real *y, bool mean, int threads) {
  const double divisor = mean ? (double)r->group : 1.0;
  const int64_t blocks = row_blocks(r);
  if (r->outputs == 1 && r->reduced_groups <= 1) {
    y[0] = (real)(blocked_sum(x, r->group, false, threads) / divisor);
  } else if (r->reduced_groups <= 1 && r->inner == 1) {
    // Rows: each output is a contiguous run.
    const int64_t length = r->length;
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(threads, r->outputs * length > TF_CPU_CHUNK), for (int64_t o = 0; o < r->outputs; o++) {
          double sum = 0;
          for (int64_t j = 0; j < length; j++)
            sum += (double)x[o * length + j];
          y[o] = (real)(sum / divisor);
        });
  } else if (r->reduced_groups <= 1 && blocks > 1) {
    // A bias gradient ([length, inner] summed over its rows): blocks of whole rows per thread, the
    // partials added in block order (tf_cpu_row_blocks).
    const int64_t inner = r->inner, length = r->length;
    const int64_t rows = (length + blocks - 1) / blocks;
    double partial[PARTIALS];
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(threads, r->outputs * length > TF_CPU_CHUNK), for (int64_t b = 0; b < blocks; b++) {
          const int64_t first = b * rows, count = length - first < rows ? length - first : rows;
          for (int64_t tile = 0; tile < inner; tile += COLUMN_TILE)
            column_sums(x + first * inner + tile, inner, count > 0 ? count : 0,
                        inner - tile < COLUMN_TILE ? inner - tile : COLUMN_TILE, partial + b * inner + tile);
        });
    for (int64_t i = 0; i < inner; i++) {
      double sum = 0;
      for (int64_t b = 0; b < blocks; b++)
        sum += partial[b * inner + i];
      y[i] = (real)(sum / divisor);
    }
  } else if (r->reduced_groups <= 1) {
    // Columns ([outer, length, inner], inner > 1): a tile of outputs accumulates row by row, so
    // the reads stay contiguous and each output still adds its terms in order (whatever the tile
    // width, which is narrowed until every thread has a tile: a bias gradient has one outer row).
    const int64_t inner = r->inner, length = r->length;
    const int64_t wanted = r->outer >= threads ? 1 : (threads + r->outer - 1) / r->outer;
    int64_t width = (inner + wanted - 1) / wanted;
    width = width < MIN_TILE ? MIN_TILE : width > COLUMN_TILE ? COLUMN_TILE : width;
    const int64_t tiles = (inner + width - 1) / width, tasks = r->outer * tiles;
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(threads, r->outputs * length > TF_CPU_CHUNK), for (int64_t task = 0; task < tasks; task++) {
          const int64_t o = task / tiles, first = (task % tiles) * width;
          const int64_t count = inner - first < width ? inner - first : width;
          double sum[COLUMN_TILE];
          column_sums(x + o * length * inner + first, inner, length, count, sum);
          for (int64_t i = 0; i < count; i++)
            y[o * inner + first + i] = (real)(sum[i] / divisor);
        });
  } else {
    // Several reduced runs per output (a convolution's bias gradient: [N, C, H*W] summed over N
    // and H*W). Outputs go LANES at a time along the innermost kept axis: they have the same runs
    // at a fixed distance, so LANES independent sums advance together instead of one chain of
    // dependent double adds, and each output still adds its terms in the same order.
    int32_t kept = r->rank - 1;
    while (r->reduced[kept])
      kept--;
    const int64_t across = r->shape[kept], distance = r->stride[kept];
    const int64_t tiles = (across + LANES - 1) / LANES, tasks = r->outputs / across * tiles;
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(threads, r->outputs * r->group > TF_CPU_CHUNK), for (int64_t task = 0; task < tasks; task++) {
          const int64_t first = task % tiles * LANES, o = task / tiles * across + first;
          const int64_t count = across - first < LANES ? across - first : LANES;
          double sum[LANES];
          if (count == LANES)
            sum_lanes(r, x, o, distance, LANES, sum);
          else
            sum_lanes(r, x, o, distance, count, sum);
          for (int64_t k = 0; k < count; k++)
            y[o + k] = (real)(sum[k] / divisor);
        });
  }
}

void TF_REAL_NAME(tf_cpu_sum)(const tf_cpu_args *args) {
  reduction r;
  reduction_from_attrs(&r, &args->inputs[0], &args->attrs->u.reduce);
  sum_run(&r, args->inputs[0].data, args->outputs[0].data, false, tf_cpu_threads(args));
}

void TF_REAL_NAME(tf_cpu_mean)(const tf_cpu_args *args) {
  reduction r;
  reduction_from_attrs(&r, &args->inputs[0], &args->attrs->u.reduce);
  sum_run(&r, args->inputs[0].data, args->outputs[0].data, true, tf_cpu_threads(args));
}

/* dy summed over the axes broadcasting added to `like`: dy's leading axes that like lacks, and the
 * axes where like has size 1 (right-aligned). */
void TF_REAL_NAME(tf_cpu_sum_to)(const tf_cpu_args *args) {
  const tf_cpu_tensor *dy = &args->inputs[0], *like = &args->inputs[1];
  bool reduced[TF_MAX_RANK];
  const int32_t offset = dy->rank - like->rank;
  for (int32_t i = 0; i < dy->rank; i++)
    reduced[i] = i < offset || like->shape[i - offset] == 1;
  reduction r;
  reduction_init(&r, dy, reduced);
  sum_run(&r, dy->data, args->outputs[0].data, false, tf_cpu_threads(args));
}

void TF_REAL_NAME(tf_cpu_global_norm_sq)(const tf_cpu_args *args) {
  double total = 0;
  for (int32_t i = 0; i < args->n_inputs; i++)
    total += blocked_sum(args->inputs[i].data, args->inputs[i].count, true, tf_cpu_threads(args));
  *(real *)args->outputs[0].data = (real)total;
}

/* ---- max (any dtype: it only compares) and its gradient ---- */

/* NaN wins, as in torch.amax: once best is NaN no comparison replaces it. `value != value` is
 * false for integers and folds away. */
#define DEFINE_MAX(suffix, type, LOWEST)                                                                               \
  static void max_##suffix(const reduction *r, const void *in, void *out, int threads) {                               \
    const type *x = in;                                                                                                \
    type *y = out;                                                                                                     \
    TF_CPU_PARALLEL_FOR(                                                                                               \
        tf_cpu_team(threads, r->outputs * r->group > TF_CPU_CHUNK), for (int64_t o = 0; o < r->outputs; o++) {         \
          type best = LOWEST;                                                                                          \
          const int64_t stride = r->last_reduced >= 0 ? r->stride[r->last_reduced] : 1;                                \
          const int64_t length = r->last_reduced >= 0 ? r->shape[r->last_reduced] : 1;                                 \
          FOR_EACH_RUN(r, o, offset, {                                                                                 \
            for (int64_t j = 0; j < length; j++) {                                                                     \
              type value = x[offset + j * stride];                                                                     \
              if (value > best || value != value)                                                                      \
                best = value;                                                                                          \
            }                                                                                                          \
          });                                                                                                          \
          y[o] = best;                                                                                                 \
        });                                                                                                            \
  }

DEFINE_MAX(real, real, -INFINITY)
DEFINE_MAX(i32, int32_t, INT32_MIN)
DEFINE_MAX(i64, int64_t, INT64_MIN)
DEFINE_MAX(u8, uint8_t, 0)

void TF_REAL_NAME(tf_cpu_max)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0];
  reduction r;
  reduction_from_attrs(&r, x, &args->attrs->u.reduce);
  const int threads = tf_cpu_threads(args);
  void *y = args->outputs[0].data;
  switch (x->dtype) {
  case TF_I32: max_i32(&r, x->data, y, threads); break;
  case TF_I64: max_i64(&r, x->data, y, threads); break;
  case TF_U8: max_u8(&r, x->data, y, threads); break;
  default: max_real(&r, x->data, y, threads); break;
  }
}

static inline bool equals_max(real value, real best) { return value == best || (value != value && best != best); }

/* dx = dy / (number of maxima) at every maximum of its group, 0 elsewhere (torch.amax's rule). */
void TF_REAL_NAME(tf_cpu_max_grad)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0];
  const real *x_data = x->data, *y = args->inputs[1].data, *dy = args->inputs[2].data;
  real *dx = args->outputs[0].data;
  reduction r;
  reduction_from_attrs(&r, x, &args->attrs->u.reduce);
  if (r.outputs == 1 && r.reduced_groups <= 1) {
    // One group, x contiguous: count (exact integer sum, any order) and write in parallel.
    const int64_t n = r.group;
    const real best = y[0];
    int64_t maxima = 0;
    TF_CPU_PARALLEL_SUM(
        tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK), maxima,
        for (int64_t i = 0; i < n; i++) { maxima += equals_max(x_data[i], best); });
    const real share = maxima > 0 ? dy[0] / (real)maxima : (real)0;
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK),
        for (int64_t i = 0; i < n; i++) { dx[i] = equals_max(x_data[i], best) ? share : (real)0; });
    return;
  }
  const int64_t stride = r.last_reduced >= 0 ? r.stride[r.last_reduced] : 1;
  const int64_t length = r.last_reduced >= 0 ? r.shape[r.last_reduced] : 1;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), r.outputs * r.group > TF_CPU_CHUNK), for (int64_t o = 0; o < r.outputs; o++) {
        const real best = y[o];
        int64_t maxima = 0;
        FOR_EACH_RUN(&r, o, offset, {
          for (int64_t j = 0; j < length; j++)
            maxima += equals_max(x_data[offset + j * stride], best);
        });
        const real share = maxima > 0 ? dy[o] / (real)maxima : (real)0;
        FOR_EACH_RUN(&r, o, offset, {
          for (int64_t j = 0; j < length; j++)
            dx[offset + j * stride] = equals_max(x_data[offset + j * stride], best) ? share : (real)0;
        });
      });
}
