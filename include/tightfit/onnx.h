/* Importing ONNX models (the import layer, docs/import.md): an ONNX file exported from PyTorch
 * becomes a tightfit graph whose parameters are the model's initializers. The initializers' values
 * go to a safetensors file that the graph's parameters reference (TF_INIT_EXTERNAL), so a session
 * starts from the exported weights. Dynamic axes become symbols named after their dim_param. */
#ifndef TIGHTFIT_ONNX_H
#define TIGHTFIT_ONNX_H

#include <stdint.h>

#include "tightfit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_onnx_loss {
  TF_ONNX_LOSS_NONE = 0,        /* inference graph: outputs only */
  TF_ONNX_LOSS_CROSS_ENTROPY,   /* integer label [output shape without its last axis] */
  TF_ONNX_LOSS_MSE,             /* float label of the output's shape */
  TF_ONNX_LOSS_BCE_WITH_LOGITS, /* float label of the output's shape */
  TF_ONNX_LOSS_L1,              /* float label of the output's shape: mean |output - label| */
  TF_ONNX_LOSS_CTC,             /* output [N, T, C] logits, integer label [N, S] (S: label_length), blank 0 */
  TF_ONNX_LOSS_OUTPUT,          /* the first output is the loss already (an f32 scalar); no label */
} tf_onnx_loss;

/* What `tightfit import` sets from its flags. Start from tf_onnx_options_default(): a zeroed struct
 * has ignore_index 0, which would drop class 0 from a cross-entropy loss. */
typedef struct tf_onnx_options {
  /* Where the initializers' values are written (safetensors, atomically). NULL: beside the ONNX
   * file, its name with .safetensors for .onnx. */
  const char *weights_path;
  /* The file name the graph's parameters reference, relative to the graph file (and to a
   * session's weights_dir). NULL: the last component of the weights path. */
  const char *weights_ref;
  /* Symbol defaults, "N=8,T=64"; symbols not listed default to 1. NULL: all 1. */
  const char *symbol_defaults;
  tf_onnx_loss loss;      /* adds a label input `labels` and the loss on the (first) output */
  int64_t ignore_index;   /* cross_entropy: label value that does not count (default -100) */
  const char *label_name; /* NULL: "labels" */
  const char *graph_name; /* NULL: the ONNX graph's name, or "onnx" */
  int64_t label_length;   /* ctc: S, the labels per sample (targets padded with negatives); 0: T */
  /* A Cast of data to DOUBLE, and a DOUBLE graph input or output, compute in f32 (as float64 constants
   * are narrowed) instead of being refused: torch.onnx's TorchScript exporter (1.13; 2.x with
   * dynamo=False) writes them for torch.where(m, 0.0, -inf) of Python numbers and torch.nan_to_num,
   * which eager PyTorch computes in f32 (from_torch sets it, and checks the import against the
   * module). */
  bool narrow_float64;
} tf_onnx_options;

/* The defaults: weights beside the ONNX file, no loss, ignore_index -100. */
tf_onnx_options tf_onnx_options_default(void);

/* Reads `onnx_path` and builds a graph (the caller destroys *out with tf_graph_destroy()); writes
 * the weights file only when the whole graph was built. `options` may be NULL (the defaults).
 * Unsupported operators are all listed (name, count, first node) in one TF_ERR_UNSUPPORTED. */
tf_status tf_onnx_import(const char *onnx_path, const tf_onnx_options *options, tf_graph **out) TF_MUST_USE;

/* Like tf_onnx_import() on `size` bytes in memory (`source` names them in errors); writes no weights
 * file unless options->weights_path is set (the fuzzer's entry). */
tf_status tf_onnx_import_bytes(const void *data, size_t size, const char *source, const tf_onnx_options *options,
                               tf_graph **out) TF_MUST_USE;

/* How many BatchNormalization nodes an imported graph holds frozen at their running statistics
 * (eval mode: docs/import.md), counted from the constants the importer names for them. */
int32_t tf_onnx_frozen_batch_norms(const tf_graph *graph);
/* How many batch_norm nodes a graph holds: BatchNormalization imported in training mode, normalised
 * by each batch's statistics, its running statistics updated by training (docs/import.md). */
int32_t tf_onnx_batch_statistics_norms(const tf_graph *graph);

/* What an eval-mode export changed in the ONNX file `onnx_path` (docs/import.md, "Exporting the model
 * as it is"): parameters tied through Identity nodes, weights the exporter computed (a BatchNorm folded
 * into a convolution, a transposed copy). One line per finding and a last line on how to export
 * instead, in *warnings (NULL when there is nothing to say; the caller frees it with free()). */
tf_status tf_onnx_export_warnings(const char *onnx_path, char **warnings) TF_MUST_USE;

/* "none", "cross_entropy", "mse", "bce_with_logits", "l1", "ctc", "output"; tf_onnx_loss_parse() is its
 * inverse (false when `name` is none of them). */
const char *tf_onnx_loss_name(tf_onnx_loss loss);
bool tf_onnx_loss_parse(const char *name, tf_onnx_loss *out);

#ifdef __cplusplus
}
#endif
#endif
