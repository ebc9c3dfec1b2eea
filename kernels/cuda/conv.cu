/* Convolutions: conv1d, conv2d, conv_transpose2d and the input/weight gradients of conv1d/conv2d, by
 * im2col + cuBLAS, with the image/response view of core/workspace_cuda.h (conv1d is a conv2d of
 * height 1). Per group and per chunk of images (as many as fit TF_CUDA_CONV_COLUMN_LIMIT):
 *   forward:            column block [images][K][P] = im2col(x), y = W_g · column (strided-batched);
 *   grad_input and
 *   conv_transpose2d:   column = W_gᵀ · dy, then col2im as a gather: each image element sums its
 *                       taps in (kh, kw) order, the CPU's order, without atomics;
 *   grad_weight:        dW_g += dy_n · column_nᵀ, one gemm per image in image order (beta 1 after
 *                       the first): deterministic, no atomics.
 * 1x1, stride-1, unpadded convolutions use the image itself as the column matrix. cuBLAS works in
 * the workspace after the column block.
 *
 * On f16/bf16 data (the half kernel: every floating operand of one half type) each step is the f32
 * kernel on widened operands with each result rounded once, so it writes the bits of cast up -> f32
 * kernel -> cast down: im2col widens the image into the f32 column block (no convolution is direct),
 * the weight is widened once into the workspace and dy a chunk at a time into the response block;
 * the forward's products land in the response block and are rounded with the bias added in f32;
 * col2im rounds each image element once (conv_transpose2d's bias added before); the weight gradient
 * is summed in f32 in the workspace, image by image as on f32, and rounded at the end
 * (core/workspace_cuda.h, tf_cuda_conv_layout). The products are the f32 kernel's cuBLAS SGEMMs
 * under the plan's matmul_math. */

#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

template <typename T>
__global__ void im2col(const T *x, float *column, tf_cuda_conv_geometry g, int64_t first_image, int64_t images,
                       int64_t group) {
  const int64_t K = g.column_rows, P = g.positions, taps = g.kernel_height * g.kernel_width;
  const int64_t cg = g.image_channels / g.groups;
  TF_CUDA_GRID_STRIDE(t, images * K * P) {
    const int64_t p = t % P, row = t / P % K, b = t / (K * P);
    const int64_t c = row / taps, kh = row % taps / g.kernel_width, kw = row % g.kernel_width;
    const int64_t oh = p / g.response_width, ow = p % g.response_width;
    const int64_t ih = oh * g.stride[0] - g.padding[0] + kh * g.dilation[0];
    const int64_t iw = ow * g.stride[1] - g.padding[1] + kw * g.dilation[1];
    const bool inside = ih >= 0 && ih < g.image_height && iw >= 0 && iw < g.image_width;
    const int64_t channel = (first_image + b) * g.image_channels + group * cg + c;
    column[t] = inside ? to_f32(x[(channel * g.image_height + ih) * g.image_width + iw]) : 0.0f;
  }
}

/* image[b, group channels] = the sum of each element's taps in the column block (+ bias[channel],
 * kBias: a half conv_transpose2d, which rounds once). */
template <typename T, bool kBias>
__global__ void col2im(const float *column, T *image, const T *bias, tf_cuda_conv_geometry g, int64_t first_image,
                       int64_t images, int64_t group) {
  const int64_t K = g.column_rows, P = g.positions, plane = g.image_height * g.image_width;
  const int64_t cg = g.image_channels / g.groups;
  TF_CUDA_GRID_STRIDE(t, images * cg * plane) {
    const int64_t w = t % g.image_width, h = t / g.image_width % g.image_height, c = t / plane % cg;
    const int64_t b = t / (plane * cg);
    const float *block = column + b * K * P;
    float sum = 0.0f;
    for (int64_t kh = 0; kh < g.kernel_height; kh++) {
      const int64_t oh_scaled = h + g.padding[0] - kh * g.dilation[0];
      if (oh_scaled < 0 || oh_scaled % g.stride[0] != 0 || oh_scaled / g.stride[0] >= g.response_height)
        continue;
      const int64_t oh = oh_scaled / g.stride[0];
      for (int64_t kw = 0; kw < g.kernel_width; kw++) {
        const int64_t ow_scaled = w + g.padding[1] - kw * g.dilation[1];
        if (ow_scaled < 0 || ow_scaled % g.stride[1] != 0 || ow_scaled / g.stride[1] >= g.response_width)
          continue;
        const int64_t row = (c * g.kernel_height + kh) * g.kernel_width + kw;
        sum += block[row * P + oh * g.response_width + ow_scaled / g.stride[1]];
      }
    }
    const int64_t channel = group * cg + c;
    if constexpr (kBias)
      sum += to_f32(bias[channel]);
    image[((first_image + b) * g.image_channels + channel) * plane + h * g.image_width + w] = from_f32<T>(sum);
  }
}

/* out[i] = in[i] in f32 (exact). */
template <typename T> __global__ void widen(const T *in, float *out, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, n) { out[i] = to_f32(in[i]); }
}

/* out[i] = in[i] rounded once to T. */
template <typename T> __global__ void narrow(const float *in, T *out, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, n) { out[i] = from_f32<T>(in[i]); }
}

/* block [images][og][P] = a group's channels of images first.. of response [batch][channels][P], widened. */
template <typename T>
__global__ void gather_response(const T *response, float *block, int64_t channels, int64_t og, int64_t group, int64_t P,
                                int64_t first_image, int64_t images) {
  TF_CUDA_GRID_STRIDE(t, images * og * P) {
    const int64_t p = t % P, o = t / P % og, b = t / (og * P);
    block[t] = to_f32(response[((first_image + b) * channels + group * og + o) * P + p]);
  }
}

/* The inverse, rounding once: response[images first.., group's channels] = block (+ bias[channel]
 * where there is one). */
template <typename T>
__global__ void scatter_response(const float *block, T *response, const T *bias, int64_t channels, int64_t og,
                                 int64_t group, int64_t P, int64_t first_image, int64_t images) {
  TF_CUDA_GRID_STRIDE(t, images * og * P) {
    const int64_t p = t % P, o = t / P % og, b = t / (og * P), channel = group * og + o;
    const float value = bias ? block[t] + to_f32(bias[channel]) : block[t];
    response[((first_image + b) * channels + channel) * P + p] = from_f32<T>(value);
  }
}

/* y[n, c, i] += bias[c] over [batch, channels, plane] (on half data: a zero product's output). */
template <typename T> __global__ void add_bias(T *y, const T *bias, int64_t channels, int64_t plane, int64_t n) {
  TF_CUDA_GRID_STRIDE(t, n) {
    if constexpr (std::is_same<T, float>::value)
      y[t] += bias[t / plane % channels];
    else
      y[t] = from_f32<T>(to_f32(y[t]) + to_f32(bias[t / plane % channels]));
  }
}

/* Row-major C = op(A) op(B) (+ beta C), strided-batched. */
tf_status gemm(cublasHandle_t handle, tf_dtype math, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
               int64_t lda, int64_t stride_a, const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
               int64_t ldc, int64_t stride_c, int64_t batch) {
  const float alpha = 1.0f;
  return call_status(gemm_f32(handle, math, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
                              (int)m, (int)k, &alpha, b, (int)ldb, (long long)stride_b, a, (int)lda,
                              (long long)stride_a, &beta, c, (int)ldc, (long long)stride_c, (int)batch),
                     "cuBLAS strided-batched GEMM, %s math (m %lld, n %lld, k %lld, batch %lld)", tf_dtype_name(math),
                     (long long)m, (long long)n, (long long)k, (long long)batch);
}

struct Call {
  tf_cuda_conv_geometry g;
  cublasHandle_t handle;
  tf_dtype math; /* matmul_math */
  cudaStream_t stream;
  float *column;
  float *response; /* half data: the chunk's f32 response block */
  float *weight;   /* half data: the f32 weight, or the weight gradient's f32 sums */
  int64_t K, P, og, cg, plane;
};

/* y = conv(x, w) (+ bias). */
tf_status forward(const Call &c, const float *x, const float *w, float *y) {
  const tf_cuda_conv_geometry &g = c.g;
  for (int64_t group = 0; group < g.groups; group++) {
    const float *w_group = w + group * c.og * c.K;
    if (g.direct) {
      TF_RETURN_IF_ERROR(gemm(c.handle, c.math, false, false, c.og, c.P, c.K, w_group, c.K, 0, x + group * c.cg * c.P,
                              c.P, g.image_channels * c.P, 0.0f, y + group * c.og * c.P, c.P, g.response_channels * c.P,
                              g.batch));
      continue;
    }
    for (int64_t first = 0; first < g.batch; first += g.chunk_images) {
      const int64_t images = g.batch - first < g.chunk_images ? g.batch - first : g.chunk_images;
      im2col<float><<<blocks_for(images * c.K * c.P), kThreads, 0, c.stream>>>(x, c.column, g, first, images, group);
      TF_RETURN_IF_ERROR(gemm(c.handle, c.math, false, false, c.og, c.P, c.K, w_group, c.K, 0, c.column, c.P, c.K * c.P,
                              0.0f, y + (first * g.response_channels + group * c.og) * c.P, c.P,
                              g.response_channels * c.P, images));
    }
  }
  return launch_status();
}

/* image = the transposed convolution of the response (grad_input, conv_transpose2d). */
tf_status scatter_back(const Call &c, const float *response, const float *w, float *image) {
  const tf_cuda_conv_geometry &g = c.g;
  for (int64_t group = 0; group < g.groups; group++) {
    const float *w_group = w + group * c.og * c.K;
    const float *dy = response + group * c.og * c.P;
    if (g.direct) {
      TF_RETURN_IF_ERROR(gemm(c.handle, c.math, true, false, c.K, c.P, c.og, w_group, c.K, 0, dy, c.P,
                              g.response_channels * c.P, 0.0f, image + group * c.cg * c.plane, c.P,
                              g.image_channels * c.plane, g.batch));
      continue;
    }
    for (int64_t first = 0; first < g.batch; first += g.chunk_images) {
      const int64_t images = g.batch - first < g.chunk_images ? g.batch - first : g.chunk_images;
      TF_RETURN_IF_ERROR(gemm(c.handle, c.math, true, false, c.K, c.P, c.og, w_group, c.K, 0,
                              dy + first * g.response_channels * c.P, c.P, g.response_channels * c.P, 0.0f, c.column,
                              c.P, c.K * c.P, images));
      col2im<float, false><<<blocks_for(images * c.cg * c.plane), kThreads, 0, c.stream>>>(c.column, image, NULL, g,
                                                                                           first, images, group);
    }
  }
  return launch_status();
}

/* dw = sum over images of dy_n column_nᵀ, per group, in image order. */
tf_status weight_gradient(const Call &c, const float *x, const float *dy, float *dw) {
  const tf_cuda_conv_geometry &g = c.g;
  for (int64_t group = 0; group < g.groups; group++) {
    float *dw_group = dw + group * c.og * c.K;
    for (int64_t first = 0; first < g.batch; first += g.chunk_images) {
      const int64_t images = g.batch - first < g.chunk_images ? g.batch - first : g.chunk_images;
      if (!g.direct)
        im2col<float><<<blocks_for(images * c.K * c.P), kThreads, 0, c.stream>>>(x, c.column, g, first, images, group);
      for (int64_t b = 0; b < images; b++) {
        const int64_t n = first + b;
        const float *columns = g.direct ? x + (n * g.image_channels + group * c.cg) * c.P : c.column + b * c.K * c.P;
        TF_RETURN_IF_ERROR(gemm(c.handle, c.math, false, true, c.og, c.K, c.P,
                                dy + (n * g.response_channels + group * c.og) * c.P, c.P, 0, columns, c.P, 0,
                                n == 0 ? 0.0f : 1.0f, dw_group, c.K, 0, 1));
      }
    }
  }
  return launch_status();
}

/* ---- on f16/bf16 data: the f32 kernel on widened operands, each result rounded once ---- */

/* y = conv(x, w) (+ bias), rounded once. */
template <typename T> tf_status forward_half(const Call &c, const T *x, const T *w, const T *bias, T *y) {
  const tf_cuda_conv_geometry &g = c.g;
  widen<T><<<blocks_for(g.response_channels * c.K), kThreads, 0, c.stream>>>(w, c.weight, g.response_channels * c.K);
  for (int64_t group = 0; group < g.groups; group++) {
    for (int64_t first = 0; first < g.batch; first += g.chunk_images) {
      const int64_t images = g.batch - first < g.chunk_images ? g.batch - first : g.chunk_images;
      const unsigned blocks = blocks_for(images * c.og * c.P);
      im2col<T><<<blocks_for(images * c.K * c.P), kThreads, 0, c.stream>>>(x, c.column, g, first, images, group);
      TF_RETURN_IF_ERROR(gemm(c.handle, c.math, false, false, c.og, c.P, c.K, c.weight + group * c.og * c.K, c.K, 0,
                              c.column, c.P, c.K * c.P, 0.0f, c.response, c.P, c.og * c.P, images));
      scatter_response<T><<<blocks, kThreads, 0, c.stream>>>(c.response, y, bias, g.response_channels, c.og, group, c.P,
                                                             first, images);
    }
  }
  return launch_status();
}

/* image = the transposed convolution of the response (+ bias: conv_transpose2d), rounded once. */
template <typename T>
tf_status scatter_back_half(const Call &c, const T *response, const T *w, const T *bias, T *image) {
  const tf_cuda_conv_geometry &g = c.g;
  widen<T><<<blocks_for(g.response_channels * c.K), kThreads, 0, c.stream>>>(w, c.weight, g.response_channels * c.K);
  for (int64_t group = 0; group < g.groups; group++) {
    for (int64_t first = 0; first < g.batch; first += g.chunk_images) {
      const int64_t images = g.batch - first < g.chunk_images ? g.batch - first : g.chunk_images;
      const unsigned blocks = blocks_for(images * c.cg * c.plane);
      gather_response<T><<<blocks_for(images * c.og * c.P), kThreads, 0, c.stream>>>(
          response, c.response, g.response_channels, c.og, group, c.P, first, images);
      TF_RETURN_IF_ERROR(gemm(c.handle, c.math, true, false, c.K, c.P, c.og, c.weight + group * c.og * c.K, c.K, 0,
                              c.response, c.P, c.og * c.P, 0.0f, c.column, c.P, c.K * c.P, images));
      if (bias)
        col2im<T, true><<<blocks, kThreads, 0, c.stream>>>(c.column, image, bias, g, first, images, group);
      else
        col2im<T, false><<<blocks, kThreads, 0, c.stream>>>(c.column, image, NULL, g, first, images, group);
    }
  }
  return launch_status();
}

/* dw = sum over images of dy_n column_nᵀ, per group, in image order, in f32; rounded once at the end. */
template <typename T> tf_status weight_gradient_half(const Call &c, const T *x, const T *dy, T *dw) {
  const tf_cuda_conv_geometry &g = c.g;
  for (int64_t group = 0; group < g.groups; group++) {
    float *dw_group = c.weight + group * c.og * c.K;
    for (int64_t first = 0; first < g.batch; first += g.chunk_images) {
      const int64_t images = g.batch - first < g.chunk_images ? g.batch - first : g.chunk_images;
      im2col<T><<<blocks_for(images * c.K * c.P), kThreads, 0, c.stream>>>(x, c.column, g, first, images, group);
      gather_response<T><<<blocks_for(images * c.og * c.P), kThreads, 0, c.stream>>>(
          dy, c.response, g.response_channels, c.og, group, c.P, first, images);
      for (int64_t b = 0; b < images; b++)
        TF_RETURN_IF_ERROR(gemm(c.handle, c.math, false, true, c.og, c.K, c.P, c.response + b * c.og * c.P, c.P, 0,
                                c.column + b * c.K * c.P, c.P, 0, first + b == 0 ? 0.0f : 1.0f, dw_group, c.K, 0, 1));
    }
  }
  narrow<T><<<blocks_for(g.response_channels * c.K), kThreads, 0, c.stream>>>(c.weight, dw, g.response_channels * c.K);
  return launch_status();
}

/* The step on half data of storage T (every floating operand T; table.cu checks). */
template <typename T> tf_status launch_half(const Call &c, const tf_cuda_args *args, bool empty) {
  const tf_cuda_conv_geometry &g = c.g;
  const tf_cuda_tensor *out = &args->outputs[0];
  const T *in0 = (const T *)args->inputs[0].data, *in1 = (const T *)args->inputs[1].data;
  T *y = (T *)out->data;
  switch (args->op) {
  case TF_OP_CONV1D:
  case TF_OP_CONV2D: {
    const T *bias = args->n_inputs > 2 ? (const T *)args->inputs[2].data : NULL;
    if (!empty)
      return forward_half<T>(c, in0, in1, bias, y);
    TF_RETURN_IF_ERROR(zero(out, c.stream));
    if (bias)
      add_bias<T><<<blocks_for(out->count), kThreads, 0, c.stream>>>(y, bias, g.response_channels, c.P, out->count);
    return launch_status();
  }
  case TF_OP_CONV_TRANSPOSE2D:
  case TF_OP_CONV1D_GRAD_INPUT:
  case TF_OP_CONV2D_GRAD_INPUT: {
    const T *bias = args->op == TF_OP_CONV_TRANSPOSE2D && args->n_inputs > 2 ? (const T *)args->inputs[2].data : NULL;
    if (!empty)
      return scatter_back_half<T>(c, in0, in1, bias, y);
    TF_RETURN_IF_ERROR(zero(out, c.stream));
    if (bias)
      add_bias<T><<<blocks_for(out->count), kThreads, 0, c.stream>>>(y, bias, g.image_channels, c.plane, out->count);
    return launch_status();
  }
  default: return empty ? zero(out, c.stream) : weight_gradient_half<T>(c, in0, in1, y);
  }
}

} // namespace

tf_status check_conv(const tf_cuda_args *args) {
  tf_cuda_conv_geometry g = {};
  tf_cuda_conv_geometry_get(args->op, args->attrs, args->inputs, args->outputs, &g);
  const IntDimension dimensions[] = {
      {.name = "the column rows (channels per group x taps)", .value = g.column_rows},
      {.name = "the output positions", .value = g.positions},
      {.name = "the batch", .value = g.batch},
      {.name = "the output channels", .value = g.response_channels},
      {.name = "the image plane (height x width)", .value = g.image_height * g.image_width}};
  return check_int_dimensions(args, dimensions, (int)(sizeof(dimensions) / sizeof(dimensions[0])));
}

TF_CUDA_LAUNCHER(conv) {
  Call c = {};
  tf_cuda_conv_geometry_get(args->op, args->attrs, args->inputs, args->outputs, &c.g);
  const tf_cuda_conv_geometry &g = c.g;
  c.handle = (cublasHandle_t)args->cublas;
  c.math = args->math;
  c.stream = stream_of(args);
  const tf_cuda_conv_layout layout = tf_cuda_conv_layout_of(&g);
  char *workspace = (char *)args->workspace;
  c.column = (float *)(workspace + layout.column);
  c.response = (float *)(workspace + layout.response);
  c.weight = (float *)(workspace + layout.weight);
  c.K = g.column_rows, c.P = g.positions, c.og = g.response_channels / g.groups, c.cg = g.image_channels / g.groups;
  c.plane = g.image_height * g.image_width;
  const tf_cuda_tensor *out = &args->outputs[0];
  if (out->count == 0)
    return NULL;
  TF_RETURN_IF_ERROR(cublas_workspace(c.handle, workspace + layout.cublas, args->workspace_bytes - layout.cublas));
  /* A product over nothing (no taps or no channels) leaves zeros, as BLAS does with k = 0. */
  const bool empty = c.K == 0 || c.og == 0 || c.P == 0 || g.batch == 0;
  if (g.half)
    return args->inputs[0].dtype == TF_F16 ? launch_half<F16>(c, args, empty) : launch_half<Bf16>(c, args, empty);
  const float *in0 = (const float *)args->inputs[0].data, *in1 = (const float *)args->inputs[1].data;
  float *y = (float *)out->data;
  switch (args->op) {
  case TF_OP_CONV1D:
  case TF_OP_CONV2D:
    if (empty)
      TF_RETURN_IF_ERROR(zero(out, c.stream));
    else
      TF_RETURN_IF_ERROR(forward(c, in0, in1, y));
    if (args->n_inputs > 2) {
      add_bias<float><<<blocks_for(out->count), kThreads, 0, c.stream>>>(y, (const float *)args->inputs[2].data,
                                                                         g.response_channels, c.P, out->count);
      TF_RETURN_IF_ERROR(launch_status());
    }
    return NULL;
  case TF_OP_CONV_TRANSPOSE2D:
  case TF_OP_CONV1D_GRAD_INPUT:
  case TF_OP_CONV2D_GRAD_INPUT:
    if (empty)
      TF_RETURN_IF_ERROR(zero(out, c.stream));
    else
      TF_RETURN_IF_ERROR(scatter_back(c, in0, in1, y));
    if (args->op == TF_OP_CONV_TRANSPOSE2D && args->n_inputs > 2) {
      add_bias<float><<<blocks_for(out->count), kThreads, 0, c.stream>>>(y, (const float *)args->inputs[2].data,
                                                                         g.image_channels, c.plane, out->count);
      TF_RETURN_IF_ERROR(launch_status());
    }
    return NULL;
  default:
    if (empty)
      return zero(out, c.stream);
    return weight_gradient(c, in0, in1, y);
  }
}

} // namespace tf_cuda
