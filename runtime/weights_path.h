/* Where an external initializer's safetensors file is (issue 44): a graph names it relative to its
 * own folder, and the plan may be written anywhere and run from anywhere. */
#ifndef TIGHTFIT_RUNTIME_WEIGHTS_PATH_H
#define TIGHTFIT_RUNTIME_WEIGHTS_PATH_H

#include <stddef.h>

#include "tightfit/plan.h"

/* The path of `file` into path[size]: as it is when absolute; else weights_dir/file (weights_dir
 * NULL: ".") when that exists, else plan->graph_dir/file when that exists. When neither exists,
 * path holds the first and the error (TF_ERR_IO) names both places and how to point elsewhere. */
tf_status tf_weights_path(const tf_plan *plan, const char *weights_dir, const char *file, char *path,
                          size_t size) TF_MUST_USE;

#endif
