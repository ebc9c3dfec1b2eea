/* Kernels that move elements without computing, for every dtype (by element size), as
 * kernels/cpu/layout.c: reshape (a no-op when the plan placed the output on its input, else a
 * device copy), transpose and expand (a gather through strides), concat, slice and slice_grad
 * (copies over [outer, axis, inner] views). */
#include "core/slice_bounds.h"
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

/* out[i] = in[offset of i in operand 1]. */
template <typename T> __global__ void gather(const T *in, T *out, int64_t n, Strides s) {
  TF_CUDA_GRID_STRIDE(i, n) { out[i] = in[offset_of(s, 1, i)]; }
}

/* out[o, k, i] = in[o, start + k * step, i]: out is [outer, length, inner], in [outer, in_length, inner]. */
template <typename T>
__global__ void take_rows(const T *in, T *out, int64_t outer, int64_t length, int64_t inner, int64_t in_length,
                          int64_t start, int64_t step) {
  TF_CUDA_GRID_STRIDE(t, outer * length * inner) {
    const int64_t i = t % inner, k = t / inner % length, o = t / (inner * length);
    out[t] = in[(o * in_length + start + k * step) * inner + i];
  }
}

/* out[o, before + k, i] = in[o, k, i]: concat's copy of one input. */
template <typename T>
__global__ void place_rows(const T *in, T *out, int64_t outer, int64_t length, int64_t inner, int64_t out_length,
                           int64_t before) {
  TF_CUDA_GRID_STRIDE(t, outer * length * inner) {
    const int64_t i = t % inner, k = t / inner % length, o = t / (inner * length);
    out[(o * out_length + before + k) * inner + i] = in[t];
  }
}

/* rows x `units` 16-byte units: out + r out_pitch + 16 u = in + r in_pitch + 16 u (pitches in bytes).
 * A slice of step 1 or one input of a concat is such a copy: gpt2-small's q, k, v slices and the
 * concat of their gradients took about 5 ms of an H200 step element by element (three 64-bit
 * divisions per 2-byte element), 8 elements a division here. */
__global__ void copy_rows16(const char *in, char *out, int64_t rows, int64_t units, int64_t in_pitch,
                            int64_t out_pitch) {
  TF_CUDA_GRID_STRIDE(t, rows * units) {
    const int64_t r = t / units, u = t - r * units;
    *reinterpret_cast<uint4 *>(out + r * out_pitch + u * 16) =
        *reinterpret_cast<const uint4 *>(in + r * in_pitch + u * 16);
  }
}

bool all_aligned16(const void *p, int64_t a, int64_t b, int64_t c) {
  return (reinterpret_cast<uintptr_t>(p) | (uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16 == 0;
}

/* Copies `rows` rows of `row_bytes` from in (pitch in_pitch) to out (pitch out_pitch) 16 bytes at a
 * time when every address and size allows; false (nothing launched) when not. */
bool copy_rows_vectorized(const char *in, char *out, int64_t rows, int64_t row_bytes, int64_t in_pitch,
                          int64_t out_pitch, cudaStream_t stream) {
  if (!all_aligned16(in, row_bytes, in_pitch, out_pitch) || !all_aligned16(out, 0, 0, 0) || rows * row_bytes == 0)
    return false;
  const int64_t units = row_bytes / 16;
  copy_rows16<<<blocks_for(rows * units), kThreads, 0, stream>>>(in, out, rows, units, in_pitch, out_pitch);
  return true;
}

/* dx[o, p, i] = dy[o, (p - start) / step, i] at the slice's positions, 0 elsewhere. */
template <typename T>
__global__ void scatter_rows(const T *dy, T *dx, int64_t outer, int64_t dim, int64_t inner, int64_t length,
                             int64_t start, int64_t step) {
  TF_CUDA_GRID_STRIDE(t, outer * dim * inner) {
    const int64_t i = t % inner, p = t / inner % dim - start, o = t / (inner * dim);
    dx[t] = p >= 0 && p % step == 0 && p / step < length ? dy[(o * length + p / step) * inner + i] : (T)0;
  }
}

void split_at(const tf_cuda_tensor *t, int32_t axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int32_t i = 0; i < axis; i++)
    *outer *= t->shape[i];
  for (int32_t i = axis + 1; i < t->rank; i++)
    *inner *= t->shape[i];
}

template <typename T> tf_status run(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0], *out = &args->outputs[0];
  cudaStream_t stream = stream_of(args);
  const int64_t n = out->count;
  switch (args->op) {
  case TF_OP_TRANSPOSE:
  case TF_OP_EXPAND: {
    if (n == 0)
      return NULL;
    Strides s;
    s.rank = out->rank;
    for (int32_t i = 0; i < out->rank; i++)
      s.shape[i] = out->shape[i];
    broadcast_strides(out, s.rank, s.shape, s.stride[0]);
    if (args->op == TF_OP_EXPAND) {
      broadcast_strides(x, s.rank, s.shape, s.stride[1]);
    } else {
      int64_t x_strides[TF_MAX_RANK] = {0}, stride = 1;
      for (int32_t i = x->rank - 1; i >= 0; i--) {
        x_strides[i] = stride;
        stride *= x->shape[i];
      }
      for (int32_t i = 0; i < out->rank; i++)
        s.stride[1][i] = x_strides[args->attrs->u.transpose.perm[i]];
    }
    collapse(&s, 2);
    gather<T><<<blocks_for(n), kThreads, 0, stream>>>((const T *)x->data, (T *)out->data, n, s);
    break;
  }
  case TF_OP_CONCAT: {
    const int32_t axis = args->attrs->u.axis.axis < 0 ? args->attrs->u.axis.axis + out->rank : args->attrs->u.axis.axis;
    int64_t outer, inner, before = 0;
    split_at(out, axis, &outer, &inner);
    for (int32_t k = 0; k < args->n_inputs; k++) {
      const tf_cuda_tensor *in = &args->inputs[k];
      const int64_t length = in->shape[axis];
      const int64_t row = length * inner * (int64_t)sizeof(T),
                    out_pitch = out->shape[axis] * inner * (int64_t)sizeof(T);
      if (in->count > 0 &&
          !copy_rows_vectorized((const char *)in->data, (char *)out->data + before * inner * (int64_t)sizeof(T), outer,
                                row, row, out_pitch, stream))
        place_rows<T><<<blocks_for(in->count), kThreads, 0, stream>>>((const T *)in->data, (T *)out->data, outer,
                                                                      length, inner, out->shape[axis], before);
      before += length;
    }
    break;
  }
  case TF_OP_SLICE: {
    const tf_slice_attrs *a = &args->attrs->u.slice;
    const int32_t axis = a->axis < 0 ? a->axis + x->rank : a->axis;
    int64_t outer, inner;
    split_at(x, axis, &outer, &inner);
    const int64_t start = tf_slice_bound(a->start, x->shape[axis]), row = out->shape[axis] * inner * (int64_t)sizeof(T);
    if (n > 0 && (a->step != 1 ||
                  !copy_rows_vectorized((const char *)x->data + start * inner * (int64_t)sizeof(T), (char *)out->data,
                                        outer, row, x->shape[axis] * inner * (int64_t)sizeof(T), row, stream)))
      take_rows<T><<<blocks_for(n), kThreads, 0, stream>>>((const T *)x->data, (T *)out->data, outer, out->shape[axis],
                                                           inner, x->shape[axis],
                                                           tf_slice_bound(a->start, x->shape[axis]), a->step);
    break;
  }
  default: { /* slice_grad(dy, x (shape)) -> dx */
    const tf_slice_attrs *a = &args->attrs->u.slice;
    const int32_t axis = a->axis < 0 ? a->axis + out->rank : a->axis;
    int64_t outer, inner;
    split_at(out, axis, &outer, &inner);
    if (n > 0)
      scatter_rows<T><<<blocks_for(n), kThreads, 0, stream>>>((const T *)x->data, (T *)out->data, outer,
                                                              out->shape[axis], inner, x->shape[axis],
                                                              tf_slice_bound(a->start, out->shape[axis]), a->step);
    break;
  }
  }
  return launch_status();
}

} // namespace

TF_CUDA_LAUNCHER(layout) {
  const tf_cuda_tensor *x = &args->inputs[0], *out = &args->outputs[0];
  const int size = element_size(out->dtype);
  if (args->op == TF_OP_RESHAPE) {
    /* A plan may place a reshape's output on its input (alias_of): nothing to move. */
    if (out->data == x->data || out->count == 0)
      return NULL;
    return copy(out->data, x->data, out->count * size, stream_of(args));
  }
  switch (size) {
  case 1: return run<Bytes<1>::type>(args);
  case 2: return run<Bytes<2>::type>(args);
  case 8: return run<Bytes<8>::type>(args);
  default: return run<Bytes<4>::type>(args);
  }
}

} // namespace tf_cuda
