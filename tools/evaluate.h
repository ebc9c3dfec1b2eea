/* Evaluation shared by `train --eval` and `run`: every micro-batch of a data set in file order
 * through the forward steps; mean loss, classification accuracy, and optionally the graph's
 * outputs written to .npy files. */
#ifndef TIGHTFIT_TOOLS_EVALUATE_H
#define TIGHTFIT_TOOLS_EVALUATE_H

#include "tightfit/runtime.h"

/* The batches between two progress lines when stderr is not a terminal (run --log-every's default). */
#define TF_TOOL_PROGRESS_EVERY 100

/* Runs the forward steps over `data_dir`. *loss: mean loss (NAN without one); *accuracy: argmax
 * accuracy of the logits cross-entropy reads (NAN without cross-entropy). With `outputs_dir`, each
 * plan output is written to outputs_dir/<name>.npy (all samples, in order). Progress goes to stderr
 * (never stdout), as "PROGRESS_NAME: batch B/TOTAL (P%)": rewritten in place every 2 seconds on a
 * terminal (and erased at the end), else a line every `progress_every` batches. */
tf_status tf_tool_evaluate(tf_session *session, const char *data_dir, uint64_t seed, const char *outputs_dir,
                           const char *progress_name, int64_t progress_every, double *loss,
                           double *accuracy) TF_MUST_USE;

#endif
