/* Convolutions: conv1d, conv2d, conv_transpose2d and the input/weight gradients of conv1d/conv2d,
 * by im2col + gemm.
 *
 * Every op is one convolution from an "image" to a "response" (workspace.h): the forward ops and
 * the weight gradient lower a block of response positions of one image into a column matrix
 * [filter length, positions] (in the thread's workspace slice) and multiply it with the weight;
 * grad_input and conv_transpose2d multiply the transposed weight with the response and scatter-add
 * the column matrix back into the image (col2im). A 1x1, stride-1, unpadded convolution uses the
 * image itself as its column matrix.
 *
 * Threads: forward tasks are (image, block of positions) pairs, each writing its own part of y;
 * scattering ops own whole images; the weight gradient gives each worker a private partial
 * gradient (the first worker's is dw itself), summed in worker order. Every worker takes a fixed,
 * contiguous range of tasks (and keeps its tap maps from one to the next, transfer()).
 * So results depend on nothing but the thread count. */
#include <assert.h>
#include <string.h>

#include "core/workspace_cpu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

/* The response positions o of one axis whose tap at `offset` (kernel index x dilation) lands inside
 * the image: 0 <= o * stride - padding + offset < image_length, as the range [*first, *last). */
static void tap_range(int64_t response_length, int64_t image_length, int64_t stride, int64_t padding, int64_t offset,
                      int64_t *first, int64_t *last) {
  int64_t low = padding - offset, high = image_length - 1 + padding - offset;
  int64_t begin = low <= 0 ? 0 : (low + stride - 1) / stride;
  int64_t end = high < 0 ? 0 : high / stride + 1;
  if (end > response_length)
    end = response_length;
  if (begin > end)
    begin = end;
  *first = begin;
  *last = end;
}

#define TAP_MAP_PIECE 2048 /* response positions one tap map covers (16 KiB on the stack) */

/* For tap (kh, kw) and response positions [p0, p1): the offset of each one's image element from
 * its channel's plane, or -1 for padding, into map[p - p0]. The tap is in range for the same
 * response rows and columns at every position (tap_range). */
static void map_tap(const tf_cpu_conv_geometry *g, int64_t kh, int64_t kw, int64_t p0, int64_t p1, int64_t *map) {
  const int64_t width = g->response_width, sh = g->stride[0], sw = g->stride[1];
  int64_t oh_first, oh_last, ow_first, ow_last;
  tap_range(g->response_height, g->image_height, sh, g->padding[0], kh * g->dilation[0], &oh_first, &oh_last);
  tap_range(g->response_width, g->image_width, sw, g->padding[1], kw * g->dilation[1], &ow_first, &ow_last);
  const int64_t origin = (kh * g->dilation[0] - g->padding[0]) * g->image_width - g->padding[1] + kw * g->dilation[1];
  for (int64_t p = p0; p < p1;) { // one response row at a time
    const int64_t oh = p / width, ow_begin = p % width;
    const int64_t count = width - ow_begin < p1 - p ? width - ow_begin : p1 - p;
    const int64_t low = oh >= oh_first && oh < oh_last ? ow_first : width, high = ow_last;
    const int64_t base = origin + oh * sh * g->image_width;
    int64_t *row = map + (p - p0);
    for (int64_t i = 0; i < count; i++) {
      const int64_t ow = ow_begin + i;
      row[i] = ow >= low && ow < high ? base + ow * sw : -1;
    }
    p += count;
  }
}

/* Whether every tap's image element for response position p is image element p + (the tap's
 * offset) whenever it is inside the image: stride 1 and the response as wide as the image (a
 * "same" convolution, such as 3x3 with padding 1). Then a row of the column matrix is the image
 * plane shifted, with the tap's padding as zeros, and im2col/col2im read and write both in order
 * (vectorised) instead of through the map, which then only says where the padding is. */
static bool shifted(const tf_cpu_conv_geometry *g) {
  return g->stride[0] == 1 && g->stride[1] == 1 && g->response_width == g->image_width;
}

/* inside[q] = 1 where map[q] is an image element, 0 where it is padding, for q in [0, n): the
 * shifted loops' selector, of the data's own width so that their selects vectorise. */
static void mark_inside(const int64_t *map, int64_t n, real *inside) {
  for (int64_t q = 0; q < n; q++)
    inside[q] = map[q] >= 0 ? 1 : 0;
}

/* Every tap's map of one block of response positions [p0, p1), tap after tap, kept by a thread
 * from one task to the next: on small images every task has the same block (one per image), and
 * mapping it again per image cost as much as the copies. Used while taps x positions fit. */
typedef struct tap_maps {
  int64_t p0, p1; /* the block mapped; p1 = -1 when none */
  int64_t offsets[TAP_MAP_PIECE];
  real inside[TAP_MAP_PIECE]; /* on the shifted geometry: mark_inside() of offsets */
} tap_maps;

/* The maps of block [p0, p1) for every tap (mapping it unless it is the one held), or NULL when
 * they do not fit. */
static const tap_maps *tap_maps_get(tap_maps *maps, const tf_cpu_conv_geometry *g, int64_t p0, int64_t p1) {
  const int64_t taps = g->kernel_height * g->kernel_width, length = p1 - p0;
  if (taps * length > TAP_MAP_PIECE)
    return NULL;
  if (maps->p0 != p0 || maps->p1 != p1) {
    for (int64_t tap = 0; tap < taps; tap++)
      map_tap(g, tap / g->kernel_width, tap % g->kernel_width, p0, p1, maps->offsets + tap * length);
    if (shifted(g))
      mark_inside(maps->offsets, taps * length, maps->inside);
    maps->p0 = p0;
    maps->p1 = p1;
  }
  return maps;
}

/* The part [*low, *high) of [0, length) whose elements start + q lie in [0, extent). */
static void clip(int64_t start, int64_t extent, int64_t length, int64_t *low, int64_t *high) {
  int64_t first = -start, last = extent - start;
  first = first < 0 ? 0 : first > length ? length : first;
  last = last > length ? length : last < first ? first : last;
  *low = first;
  *high = last;
}

/* im2col of one channel's row of a tap on the shifted geometry: line[q] = span[start + q] where
 * inside[q], else 0, for q in [0, length). Elements outside the channel's plane are padding
 * (inside 0) but are still read, so the select vectorises: `span` is the whole input tensor (read
 * only) and only its own [0, extent) is read. */
static void shifted_gather(const real *restrict span, int64_t extent, int64_t start, const real *restrict inside,
                           int64_t length, real *restrict line) {
  if (start >= 0 && start + length <= extent) { // all but the tensor's first and last planes
    const real *from = span + start;
    for (int64_t q = 0; q < length; q++) {
      const real value = from[q];
      line[q] = inside[q] != 0 ? value : 0;
    }
    return;
  }
  int64_t low, high;
  clip(start, extent, length, &low, &high);
  for (int64_t q = 0; q < low; q++)
    line[q] = 0;
  for (int64_t q = low; q < high; q++) {
    const real value = span[start + q];
    line[q] = inside[q] != 0 ? value : 0;
  }
  for (int64_t q = high; q < length; q++)
    line[q] = 0;
}

/* col2im of the same: span[start + q] += line[q] where inside[q]. Elsewhere the element is written
 * back unchanged (a select, not + 0, which would turn -0 into +0), so `span` must be memory no
 * other thread touches meanwhile: the worker's own image. */
static void shifted_scatter(real *restrict span, int64_t extent, int64_t start, const real *restrict inside,
                            int64_t length, const real *restrict line) {
  int64_t low = 0, high = length;
  if (start < 0 || start + length > extent) // the image's first and last planes
    clip(start, extent, length, &low, &high);
  real *to = span + start;
  for (int64_t q = low; q < high; q++) {
    const real value = to[q], sum = value + line[q];
    to[q] = inside[q] != 0 ? sum : value;
  }
}

/* Moves data between one group's image channels and the column matrix of response positions
 * [p0, p1), rows (channel, kh, kw): with `source` (im2col) it copies the image taps into `column`,
 * zeros for padding; with `target` (col2im) it adds `column` onto the image taps, dropping padding.
 * Each tap's offsets (map_tap) are used for every channel: on small images a row of the column
 * matrix is a few elements per response row, and working out the padding of each such part per
 * channel cost more than the copy. `all_taps` holds every tap's map of the block (tap_maps_get);
 * when NULL, each tap is mapped here in pieces of TAP_MAP_PIECE positions. On the shifted
 * geometry the map only says which positions are padding (shifted()), and the loops may also
 * touch elements outside the group's planes, within `extent` elements from `before` elements ahead
 * of source (the input tensor) or target (the worker's image): see shifted_gather and
 * shifted_scatter. col2im adds each image element's terms in a fixed order (tap, then position). */
static void transfer(const tf_cpu_conv_geometry *g, const real *source, real *target, int64_t p0, int64_t p1,
                     real *column, const tap_maps *all_taps, int64_t before, int64_t extent) {
  const int64_t length = p1 - p0, taps = g->kernel_height * g->kernel_width;
  const int64_t plane = g->image_height * g->image_width, channels = g->column_rows / taps;
  const bool shift = shifted(g);
  int64_t piece[TAP_MAP_PIECE];
  real piece_inside[TAP_MAP_PIECE];
  for (int64_t tap = 0; tap < taps; tap++) {
    const int64_t kh = tap / g->kernel_width, kw = tap % g->kernel_width;
    const int64_t delta = (kh * g->dilation[0] - g->padding[0]) * g->image_width + kw * g->dilation[1] - g->padding[1];
    for (int64_t q0 = 0; q0 < length; q0 += TAP_MAP_PIECE) {
      const int64_t q1 = length - q0 < TAP_MAP_PIECE ? length : q0 + TAP_MAP_PIECE;
      const int64_t *map = all_taps ? all_taps->offsets + tap * length : piece;
      const real *inside = all_taps ? all_taps->inside + tap * length : piece_inside;
      if (!all_taps) {
        map_tap(g, kh, kw, p0 + q0, p0 + q1, piece);
        if (shift)
          mark_inside(piece, q1 - q0, piece_inside);
      }
      for (int64_t channel = 0; channel < channels; channel++) {
        real *line = column + (channel * taps + tap) * length + q0;
        if (target) {
          real *image = target + channel * plane;
          if (shift) {
            shifted_scatter(target - before, extent, before + channel * plane + p0 + q0 + delta, inside, q1 - q0, line);
            continue;
          }
          for (int64_t q = 0; q < q1 - q0; q++)
            if (map[q] >= 0)
              image[map[q]] += line[q];
        } else {
          const real *image = source + channel * plane;
          if (shift) {
            shifted_gather(source - before, extent, before + channel * plane + p0 + q0 + delta, inside, q1 - q0, line);
            continue;
          }
          for (int64_t q = 0; q < q1 - q0; q++) {
            const int64_t at = map[q];
            const real value = image[at < 0 ? 0 : at]; // a load from anywhere in the plane: no branch
            line[q] = at < 0 ? 0 : value;
          }
        }
      }
    }
  }
}

/* The most threads (<= the context's) whose workspace fits the one the plan gave this call. */
static int workers_for(const tf_cpu_args *args, const tf_cpu_conv_geometry *g) {
  int32_t threads = args->context->threads > 0 ? args->context->threads : 1;
  while (threads > 1 &&
         tf_cpu_conv_workspace_elements(args->op, g, threads) * (int64_t)sizeof(real) > args->workspace_bytes)
    threads--;
  if (tf_cpu_conv_workspace_elements(args->op, g, threads) * (int64_t)sizeof(real) > args->workspace_bytes)
    return 0; // a planning bug: less workspace than tf_cpu_workspace_bytes() asked for
  return (int)tf_cpu_conv_workers(args->op, g, threads);
}

/* The workspace `offset` elements in; NULL when the call has none (no slice is then used). */
static real *workspace_at(const tf_cpu_args *args, int64_t offset) {
  return args->workspace ? (real *)args->workspace + offset : NULL;
}

/* The end of the block of response positions that starts at p0. */
static int64_t block_end(const tf_cpu_conv_geometry *g, int64_t p0) {
  return p0 + g->chunk < g->positions ? p0 + g->chunk : g->positions;
}

/* The column matrix of response positions [p0, p1) of one group's image channels, and its leading
 * dimension in *ld: the image itself on the direct geometry, else the columns transfer() lowers into
 * `column` (`before` and `extent` as there). */
static const real *columns_of(const tf_cpu_conv_geometry *g, const real *image, int64_t p0, int64_t p1, real *column,
                              tap_maps *maps, int64_t before, int64_t extent, int64_t *ld) {
  if (g->direct) {
    *ld = g->positions;
    return image + p0;
  }
  transfer(g, image, NULL, p0, p1, column, tap_maps_get(maps, g, p0, p1), before, extent);
  *ld = p1 - p0;
  return column;
}

static void add_bias(const real *bias, int64_t channels, int64_t stride, int64_t first, int64_t last, real *y) {
  if (!bias)
    return;
  for (int64_t o = 0; o < channels; o++)
    for (int64_t p = first; p < last; p++)
      y[o * stride + p] += bias[o];
}

/* y = conv(x, w) + bias: x is the image, y the response. */
static void convolve(const tf_cpu_args *args, tf_cpu_conv_geometry g, int workers) {
  const real *x = args->inputs[0].data, *w = args->inputs[1].data;
  const real *bias = args->n_inputs > 2 ? args->inputs[2].data : NULL;
  real *y = args->outputs[0].data;
  int64_t column_size = tf_cpu_conv_column_elements(&g), tasks = g.batch * g.chunks;
  int64_t cg = g.image_channels / g.groups, og = g.response_channels / g.groups;
  int64_t image_size = g.image_channels * g.image_height * g.image_width;
  // Each worker takes a contiguous range of tasks, so that its tap maps carry from one to the next.
  TF_CPU_PARALLEL_FOR(
      workers, for (int64_t worker = 0; worker < workers; worker++) {
        real *column = workspace_at(args, worker * column_size);
        tap_maps maps; // no initialiser: it would zero the maps (24 KiB in f32)
        maps.p0 = 0, maps.p1 = -1;
        for (int64_t task = tasks * worker / workers; task < tasks * (worker + 1) / workers; task++) {
          const int64_t n = task / g.chunks, p0 = task % g.chunks * g.chunk, p1 = block_end(&g, p0);
          real *response = y + n * g.response_channels * g.positions;
          for (int64_t group = 0; group < g.groups; group++) {
            const real *image = x + n * image_size + group * cg * g.image_height * g.image_width;
            int64_t ld;
            const real *cols = columns_of(&g, image, p0, p1, column, &maps, image - x, args->inputs[0].count, &ld);
            tf_cpu_gemm(false, false, og, p1 - p0, g.column_rows, 1, w + group * og * g.column_rows, g.column_rows,
                        cols, ld, 0, response + group * og * g.positions + p0, g.positions);
          }
          add_bias(bias, g.response_channels, g.positions, p0, p1, response);
        }
      });
}

/* image = conv's transpose applied to the response (+ bias per image channel): conv grad_input
 * and conv_transpose2d. */
static void scatter_back(const tf_cpu_args *args, tf_cpu_conv_geometry g, int workers, const real *bias) {
  const real *response = args->inputs[0].data, *w = args->inputs[1].data;
  real *image = args->outputs[0].data;
  int64_t column_size = tf_cpu_conv_column_elements(&g);
  int64_t cg = g.image_channels / g.groups, og = g.response_channels / g.groups;
  int64_t plane = g.image_height * g.image_width, image_size = g.image_channels * plane;
  // Each worker takes a contiguous range of images, so that its tap maps carry from one to the next.
  TF_CPU_PARALLEL_FOR(
      workers, for (int64_t worker = 0; worker < workers; worker++) {
        real *column = workspace_at(args, worker * column_size);
        tap_maps maps; // no initialiser: it would zero the maps (24 KiB in f32)
        maps.p0 = 0, maps.p1 = -1;
        for (int64_t n = g.batch * worker / workers; n < g.batch * (worker + 1) / workers; n++) {
          real *out = image + n * image_size;
          memset(out, 0, sizeof(real) * (size_t)image_size);
          for (int64_t group = 0; group < g.groups; group++) {
            const real *w_group = w + group * og * g.column_rows;
            const real *in = response + (n * g.response_channels + group * og) * g.positions;
            real *out_group = out + group * cg * plane;
            for (int64_t p0 = 0; p0 < g.positions; p0 += g.chunk) {
              const int64_t p1 = block_end(&g, p0);
              if (g.direct) {
                tf_cpu_gemm(true, false, g.column_rows, p1 - p0, og, 1, w_group, g.column_rows, in + p0, g.positions, 0,
                            out_group + p0, g.positions);
                continue;
              }
              tf_cpu_gemm(true, false, g.column_rows, p1 - p0, og, 1, w_group, g.column_rows, in + p0, g.positions, 0,
                          column, p1 - p0);
              transfer(&g, NULL, out_group, p0, p1, column, tap_maps_get(&maps, &g, p0, p1), out_group - out,
                       image_size);
            }
          }
          add_bias(bias, g.image_channels, plane, 0, plane, out);
        }
      });
}

/* dw = sum over images and positions of dy x columnᵀ, per group. */
static void weight_gradient(const tf_cpu_args *args, tf_cpu_conv_geometry g, int workers) {
  const real *x = args->inputs[0].data, *dy = args->inputs[1].data;
  real *dw = args->outputs[0].data;
  int64_t column_size = tf_cpu_conv_column_elements(&g), tasks = g.batch * g.chunks;
  int64_t weight_size = g.response_channels * g.column_rows;
  real *partials = workspace_at(args, workers * column_size); // workers - 1 of them
  int64_t cg = g.image_channels / g.groups, og = g.response_channels / g.groups;
  int64_t plane = g.image_height * g.image_width;
  TF_CPU_PARALLEL_FOR(
      workers, for (int64_t worker = 0; worker < workers; worker++) {
        real *column = workspace_at(args, worker * column_size);
        real *sum = worker == 0 ? dw : partials + (worker - 1) * tf_cpu_workspace_round(weight_size);
        tap_maps maps; // no initialiser: it would zero the maps (24 KiB in f32)
        maps.p0 = 0, maps.p1 = -1;
        memset(sum, 0, sizeof(real) * (size_t)weight_size);
        for (int64_t task = tasks * worker / workers; task < tasks * (worker + 1) / workers; task++) {
          const int64_t n = task / g.chunks, p0 = task % g.chunks * g.chunk, p1 = block_end(&g, p0);
          for (int64_t group = 0; group < g.groups; group++) {
            const real *image = x + (n * g.image_channels + group * cg) * plane;
            const real *d = dy + (n * g.response_channels + group * og) * g.positions + p0;
            int64_t ld;
            const real *cols = columns_of(&g, image, p0, p1, column, &maps, image - x, args->inputs[0].count, &ld);
            tf_cpu_gemm(false, true, og, g.column_rows, p1 - p0, 1, d, g.positions, cols, ld, 1,
                        sum + group * og * g.column_rows, g.column_rows);
          }
        }
      });
  if (workers == 1)
    return;
  TF_CPU_PARALLEL_FOR(
      workers, for (int64_t i = 0; i < weight_size; i++) {
        real total = dw[i];
        for (int64_t worker = 1; worker < workers; worker++)
          total += partials[(worker - 1) * tf_cpu_workspace_round(weight_size) + i];
        dw[i] = total;
      });
}

/* scatter_back's work for conv_transpose2d(x, w [, bias]) -> y, the adjoint of conv2d (y is
 * conv2d's image). */
static void transpose(const tf_cpu_args *args, tf_cpu_conv_geometry g, int workers) {
  scatter_back(args, g, workers, args->n_inputs > 2 ? args->inputs[2].data : NULL);
}

/* scatter_back's work for conv*_grad_input(dy, w, x (shape)) -> dx. */
static void grad_input(const tf_cpu_args *args, tf_cpu_conv_geometry g, int workers) {
  scatter_back(args, g, workers, NULL);
}

/* One convolution's work on the call's geometry, shared by `workers` threads. */
typedef void conv_work(const tf_cpu_args *args, tf_cpu_conv_geometry g, int workers);

/* Runs `work` on the call's geometry with the most workers its workspace allows; nothing on an
 * empty output. */
static void run(const tf_cpu_args *args, conv_work *work) {
  if (args->outputs[0].count == 0)
    return;
  tf_cpu_conv_geometry g;
  tf_cpu_conv_geometry_get(args->op, args->attrs, args->inputs, args->outputs, &g);
  const int workers = workers_for(args, &g);
  assert(workers > 0);
  if (workers > 0)
    work(args, g, workers);
}

void TF_REAL_NAME(tf_cpu_conv1d)(const tf_cpu_args *args) { run(args, convolve); }
void TF_REAL_NAME(tf_cpu_conv2d)(const tf_cpu_args *args) { run(args, convolve); }
void TF_REAL_NAME(tf_cpu_conv_transpose2d)(const tf_cpu_args *args) { run(args, transpose); }
void TF_REAL_NAME(tf_cpu_conv1d_grad_input)(const tf_cpu_args *args) { run(args, grad_input); }
void TF_REAL_NAME(tf_cpu_conv2d_grad_input)(const tf_cpu_args *args) { run(args, grad_input); }
/* conv*_grad_weight(x, dy, w (shape)) -> dw. */
void TF_REAL_NAME(tf_cpu_conv1d_grad_weight)(const tf_cpu_args *args) { run(args, weight_gradient); }
void TF_REAL_NAME(tf_cpu_conv2d_grad_weight)(const tf_cpu_args *args) { run(args, weight_gradient); }
