/* batch_norm and its gradient: x [N, C, S...] normalised per channel c with the mean and biased
 * variance of its N x S elements (PyTorch's BatchNorm in training mode).
 *
 * One channel is one task: its statistics (two passes, in double, in a fixed order), then its
 * outputs, so the results do not depend on the thread count. The gradient recomputes the statistics
 * with the same function, so they equal the forward's bit for bit:
 *
 *   xhat = (x - mean) rstd,  dbeta = sum dy,  dgamma = sum dy xhat,
 *   dx = gamma rstd (dy - dbeta / M - xhat dgamma / M),  M = N x S.
 *
 * batch_norm_running updates the running statistics with the same statistics, the variance
 * unbiased (x M / (M - 1)), as PyTorch does: running = (1 - momentum) running + momentum batch. */
#include <math.h>

#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

/* Channel c of x viewed as [N, C, S]. */
typedef struct channel_view {
  int64_t batch, channels, spatial; /* N, C, S */
} channel_view;

typedef struct channel_stats {
  double mean, rstd, variance; /* variance: biased (the squares over M) */
} channel_stats;

static channel_view view_of(const tf_cpu_tensor *x) {
  channel_view v = {x->shape[0], x->shape[1], 1};
  for (int32_t i = 2; i < x->rank; i++)
    v.spatial *= x->shape[i];
  return v;
}

static channel_stats stats_of(const real *x, channel_view v, int64_t c, double epsilon) {
  double sum = 0;
  for (int64_t n = 0; n < v.batch; n++) {
    const real *row = x + (n * v.channels + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; s++)
      sum += (double)row[s];
  }
  const double count = (double)(v.batch * v.spatial), mean = sum / count;
  double squares = 0;
  for (int64_t n = 0; n < v.batch; n++) {
    const real *row = x + (n * v.channels + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; s++) {
      const double centred = (double)row[s] - mean;
      squares += centred * centred;
    }
  }
  channel_stats st = {mean, 1.0 / sqrt(squares / count + epsilon), squares / count};
  return st;
}

static void forward_channel(const tf_cpu_args *args, channel_view v, int64_t c) {
  const real *x = args->inputs[0].data;
  const double gamma = (double)((const real *)args->inputs[1].data)[c];
  const double beta = (double)((const real *)args->inputs[2].data)[c];
  real *y = args->outputs[0].data;
  const channel_stats st = stats_of(x, v, c, (double)args->attrs->u.norm.epsilon);
  for (int64_t n = 0; n < v.batch; n++) {
    const int64_t at = (n * v.channels + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; s++)
      y[at + s] = (real)(((double)x[at + s] - st.mean) * st.rstd * gamma + beta);
  }
}

void TF_REAL_NAME(tf_cpu_batch_norm)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0];
  if (x->count == 0)
    return;
  const channel_view v = view_of(x);
  TF_CPU_PARALLEL_FOR(tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK),
                      for (int64_t c = 0; c < v.channels; c++) forward_channel(args, v, c););
}

static void backward_channel(const tf_cpu_args *args, channel_view v, int64_t c) {
  const real *x = args->inputs[0].data, *dy = args->inputs[2].data;
  const double gamma = (double)((const real *)args->inputs[1].data)[c];
  real *dx = args->outputs[0].data, *dgamma = args->outputs[1].data, *dbeta = args->outputs[2].data;
  const channel_stats st = stats_of(x, v, c, (double)args->attrs->u.norm.epsilon);
  double dy_sum = 0, dy_xhat_sum = 0;
  for (int64_t n = 0; n < v.batch; n++) {
    const int64_t at = (n * v.channels + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; s++) {
      dy_sum += (double)dy[at + s];
      dy_xhat_sum += (double)dy[at + s] * (((double)x[at + s] - st.mean) * st.rstd);
    }
  }
  const double count = (double)(v.batch * v.spatial), scale = gamma * st.rstd;
  const double dy_mean = dy_sum / count, dy_xhat_mean = dy_xhat_sum / count;
  for (int64_t n = 0; n < v.batch; n++) {
    const int64_t at = (n * v.channels + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; s++) {
      const double xhat = ((double)x[at + s] - st.mean) * st.rstd;
      dx[at + s] = (real)(scale * ((double)dy[at + s] - dy_mean - xhat * dy_xhat_mean));
    }
  }
  dgamma[c] = (real)dy_xhat_sum;
  dbeta[c] = (real)dy_sum;
}

void TF_REAL_NAME(tf_cpu_batch_norm_grad)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0];
  const channel_view v = view_of(x);
  if (x->count == 0) { /* no elements: the parameter gradients are sums of nothing */
    real *dgamma = args->outputs[1].data, *dbeta = args->outputs[2].data;
    for (int64_t c = 0; c < v.channels; c++)
      dgamma[c] = dbeta[c] = 0;
    return;
  }
  TF_CPU_PARALLEL_FOR(tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK),
                      for (int64_t c = 0; c < v.channels; c++) backward_channel(args, v, c););
}

static void running_channel(const tf_cpu_args *args, channel_view v, int64_t c) {
  real *mean = args->inputs[1].data, *var = args->inputs[2].data;
  const channel_stats st = stats_of(args->inputs[0].data, v, c, (double)args->attrs->u.norm.epsilon);
  const double momentum = (double)args->attrs->u.norm.momentum, count = (double)(v.batch * v.spatial);
  const double unbiased = count > 1 ? st.variance * count / (count - 1) : st.variance;
  mean[c] = (real)((1 - momentum) * (double)mean[c] + momentum * st.mean);
  var[c] = (real)((1 - momentum) * (double)var[c] + momentum * unbiased);
}

void TF_REAL_NAME(tf_cpu_batch_norm_running)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0];
  if (x->count == 0)
    return;
  const channel_view v = view_of(x);
  TF_CPU_PARALLEL_FOR(tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK),
                      for (int64_t c = 0; c < v.channels; c++) running_channel(args, v, c););
}
