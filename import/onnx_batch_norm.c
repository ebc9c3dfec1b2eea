/* BatchNormalization: frozen at its running statistics in eval mode, batch_norm (the batch's own
 * statistics) in training mode. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* The weights-file values of graph tensor `id`: a parameter made from an initializer, or its cast
 * (an f16/bf16 one); NULL for any other tensor. */
static const ox_weight *weights_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  tf_node_info producer;
  if (!tf_graph_tensor(im->graph, id, &info))
    return NULL;
  if (info.producer >= 0 && tf_graph_node_at(im->graph, info.producer, &producer) && producer.op == TF_OP_CAST &&
      producer.n_inputs == 1 && !tf_graph_tensor(im->graph, producer.inputs[0], &info))
    return NULL;
  if (info.init.kind != TF_INIT_EXTERNAL || !info.init.key)
    return NULL;
  for (int32_t w = 0; w < im->n_weights; w++)
    if (strcmp(im->weights[w].name, info.init.key) == 0)
      return &im->weights[w];
  return NULL;
}
/* The values of node input i as a new known value (the caller's): a known value or an initializer,
 * or a parameter made from one (an initializer tied by value to another through an Identity, as an
 * eval-mode export writes them); an error naming the node when the input is computed from the data. */
static tf_status float_values(ox_import *im, const ox_node *node, int32_t i, ox_known **out) {
  *out = NULL;
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  const char *name = ox_input(node, i);
  ox_value *v = ox_value_find(im, name);
  if (v && v->tensor == TF_NO_TENSOR && (v->known || v->initializer)) {
    const ox_known *k;
    TF_RETURN_IF_ERROR(ox_need_known(im, node, name, &k));
    *out = ox_fold_copy(k, k->rank, k->shape);
  } else {
    /* an initializer that became a parameter: one tied by value to another (an Identity of it) */
    tf_tensor_id id;
    TF_RETURN_IF_ERROR(ox_tensor(im, node, name, &id));
    const ox_weight *w = weights_of(im, id);
    char label[256];
    if (!w || w->dtype != TF_F32)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: %s: input '%s' must be known when importing (an initializer or a constant), but "
                           "it is computed from the data",
                           im->source, ox_node_label(node, label, sizeof(label)), name);
    if ((*out = ox_known_new(true, TF_F32, w->rank, w->shape)))
      for (int64_t e = 0; e < (*out)->count; e++)
        (*out)->reals[e] = ((const float *)w->data)[e];
  }
  return *out ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for the values of '%s'", im->source, name);
}

/* Whether node input i is computed from the data: neither a known value, an initializer, nor a
 * parameter made from one (what float_values takes). */
static bool computed_from_data(ox_import *im, const ox_node *node, int32_t i) {
  const char *name = ox_input(node, i);
  const ox_value *v = name ? ox_value_find(im, name) : NULL;
  if (!v || v->known || v->initializer)
    return false;
  return v->tensor == TF_NO_TENSOR || !weights_of(im, v->tensor);
}

/* Per-channel values of BatchNormalization input i (the running mean or variance): C floats, the
 * caller's to free. */
static tf_status running_statistic(ox_import *im, const ox_node *node, int32_t i, int64_t channels, ox_known **k) {
  TF_RETURN_IF_ERROR(float_values(im, node, i, k));
  if ((*k)->is_float && (*k)->count == channels)
    return NULL;
  tf_status status = ox_fail(im, node, TF_ERR_INVALID_INPUT,
                             "input %" PRId32 " (a running statistic) must hold %" PRId64
                             " floats, one per channel; it holds %" PRId64 " %s",
                             i, channels, (*k)->count, (*k)->is_float ? "floats" : "integers");
  ox_known_free(*k);
  *k = NULL;
  return status;
}

/* Known value [C] from f(statistic[c]) (the running mean as it is, or 1 / sqrt(variance + eps)). */
static tf_status channel_constant(ox_import *im, const ox_node *node, const char *suffix, const ox_known *from,
                                  double epsilon, bool inverse_std, tf_tensor_id *out) {
  ox_known *k = ox_known_new(true, TF_F32, 1, &from->count);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t c = 0; c < from->count; c++)
    k->reals[c] = inverse_std ? 1.0 / sqrt(from->reals[c] + epsilon) : from->reals[c];
  char name[300];
  snprintf(name, sizeof(name), "%s.%s", node->proto->output[0], suffix);
  return ox_known_constant(im, node, name, k, out);
}

/* A BatchNormalization's input x with its dims, which must have a channel axis. */
static tf_status channels_input(ox_import *im, const ox_node *node, tf_tensor_id *x, int32_t *rank, tf_dim *dims) {
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, x));
  ox_tensor_dims(im, *x, rank, dims);
  if (*rank < 2)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its input must have a channel axis (rank 2 or more)");
  return NULL;
}

/* Running statistic i (3: mean, 4: variance) of a training-mode BatchNormalization as an f32
 * constant named like its ONNX input (the module's buffer, "bn1.running_mean"), which training
 * updates. */
static tf_status tracked_statistic(ox_import *im, const ox_node *node, int32_t i, int64_t channels, tf_tensor_id *out) {
  ox_known *k = NULL;
  TF_RETURN_IF_ERROR(running_statistic(im, node, i, channels, &k));
  for (int64_t c = 0; c < channels; c++)
    if (!isfinite(k->reals[c]) || (i == 4 && k->reals[c] < 0)) {
      const double value = k->reals[c];
      ox_known_free(k);
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "channel %" PRId64 ": running %s %g is not a finite %s", c,
                     i == 3 ? "mean" : "variance", value, i == 3 ? "number" : "variance (>= 0)");
    }
  return ox_stored_constant(im, node, ox_input(node, i), k, out);
}

/* BatchNormalization as exported in training mode (model.train(), TrainingMode.TRAINING or PRESERVE):
 * batch_norm, normalised by each batch's own statistics, scale and B trained, and its running mean
 * and variance (inputs 3, 4) tracked as PyTorch does: constants named like the module's buffers
 * that each micro-batch updates with momentum 1 - ONNX's momentum (ONNX keeps `momentum` of the
 * old value, PyTorch exports 1 - its momentum), the variance unbiased as PyTorch's. Its running
 * mean and variance outputs are not values of the graph: a node that reads them fails as one
 * reading a value nothing produced. */
static tf_status batch_statistics(ox_import *im, const ox_node *node) {
  tf_tensor_id x, scale, bias;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(channels_input(im, node, &x, &rank, dims));
  const double momentum = 1.0 - ox_attr_float(node, "momentum", 0.9);
  if (!(momentum >= 0 && momentum <= 1))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "momentum %g must be in [0, 1]", 1.0 - momentum);
  if (dims[1].symbol >= 0 || dims[1].size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its channel axis must have a fixed size");
  /* F.batch_norm(training=True) without running statistics (timm's StdConv2d and ScaledStdConv2d
   * standardise their weights so: BiT, NFNets): PyTorch exports the batch's own mean and variance
   * as inputs 3 and 4, computed from the data, which training mode's output does not read */
  const bool untracked = computed_from_data(im, node, 3) && computed_from_data(im, node, 4);
  tf_tensor_id mean = TF_NO_TENSOR, var = TF_NO_TENSOR;
  if (!untracked) {
    TF_RETURN_IF_ERROR(tracked_statistic(im, node, 3, dims[1].size, &mean));
    TF_RETURN_IF_ERROR(tracked_statistic(im, node, 4, dims[1].size, &var));
  }
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &scale));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &bias));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (ox_dtype_of(im, scale) != dtype)
    scale = tf_cast(im->graph, scale, dtype);
  if (ox_dtype_of(im, bias) != dtype)
    bias = tf_cast(im->graph, bias, dtype);
  const double epsilon = ox_attr_float(node, "epsilon", 1e-5);
  if (untracked)
    return ox_set_tensor(im, node, 0, tf_batch_norm(im->graph, x, scale, bias, (float)epsilon));
  return ox_set_tensor(im, node, 0,
                       tf_batch_norm_tracked(im->graph, x, scale, bias, mean, var, (float)epsilon, (float)momentum));
}

/* BatchNormalization as exported in eval mode (PyTorch's model.eval()): normalised by its running
 * statistics, which the import keeps as constants (frozen, as in eval mode or torchvision's
 * FrozenBatchNorm2d), scale and B trained: y = (x - mean) * (scale / sqrt(var + eps)) + B per
 * channel (axis 1), the gradients PyTorch's eval-mode ones. In training mode: batch_statistics(). */
tf_status ox_convert_batch_norm(ox_import *im, const ox_node *node) {
  if (ox_attr_int(node, "training_mode", 0) != 0 || node->proto->n_output > 1)
    return batch_statistics(im, node);
  tf_tensor_id x, scale, bias, mean, inverse_std;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(channels_input(im, node, &x, &rank, dims));
  if (dims[1].symbol >= 0 || dims[1].size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its channel axis must have a fixed size");
  const int64_t channels = dims[1].size;
  const double epsilon = ox_attr_float(node, "epsilon", 1e-5);
  ox_known *running_mean = NULL, *running_var = NULL;
  tf_status status = running_statistic(im, node, 3, channels, &running_mean);
  if (!status)
    status = running_statistic(im, node, 4, channels, &running_var);
  for (int64_t c = 0; !status && c < channels; c++)
    if (!(running_var->reals[c] + epsilon > 0) || !isfinite(running_mean->reals[c]) || !isfinite(running_var->reals[c]))
      status = ox_fail(im, node, TF_ERR_INVALID_INPUT,
                       "channel %" PRId64 ": running mean %g, variance %g (+ epsilon %g): not a finite mean and a "
                       "positive variance",
                       c, running_mean->reals[c], running_var->reals[c], epsilon);
  if (!status)
    status = ox_tensor_of(im, node, 1, &scale);
  if (!status)
    status = ox_tensor_of(im, node, 2, &bias);
  if (!status)
    status = channel_constant(im, node, "batch_norm_running_mean", running_mean, epsilon, false, &mean);
  if (!status)
    status = channel_constant(im, node, &OX_FROZEN_BATCH_NORM_SUFFIX[1], running_var, epsilon, true, &inverse_std);
  ox_known_free(running_mean);
  ox_known_free(running_var);
  TF_RETURN_IF_ERROR(status);
  /* [C] -> [C, 1, ...]: broadcast over the axes after the channel's */
  dims[0] = tf_fixed(channels);
  for (int32_t i = 1; i < rank - 1; i++)
    dims[i] = tf_fixed(1);
  const tf_shape per_channel = tf_shape_from(dims, rank - 1);
  tf_graph *g = im->graph;
  /* scale / sqrt(var + eps) in f32, rounded once where x is f16/bf16 (a half model's scale is its f32
   * parameter read through a cast) */
  if (ox_dtype_of(im, scale) != TF_F32)
    scale = tf_cast(g, scale, TF_F32);
  tf_tensor_id multiplier = tf_reshape(g, tf_mul(g, scale, inverse_std), per_channel);
  mean = tf_reshape(g, mean, per_channel);
  bias = tf_reshape(g, bias, per_channel);
  ox_match_half(im, &x, &mean);
  ox_match_half(im, &x, &multiplier);
  ox_match_half(im, &x, &bias);
  return ox_set_tensor(im, node, 0, tf_add(g, tf_mul(g, tf_sub(g, x, mean), multiplier), bias));
}
