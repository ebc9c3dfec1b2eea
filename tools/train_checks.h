/* What `tightfit train` does when a step's numbers are not finite (issue 18): the error for a
 * non-finite loss, the gradient and weight scans around the optimizer step, the loss scale's log
 * lines and the stops where skipping an update cannot help. Each error says what was and was not
 * overwritten. */
#ifndef TIGHTFIT_TOOLS_TRAIN_CHECKS_H
#define TIGHTFIT_TOOLS_TRAIN_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include "tightfit/runtime.h"

/* The error for a non-finite loss at (0-based) `step`, micro-batch `micro` of `accumulate`;
 * `in_backward`: the plan updates in the backward pass, so the step's updates ran. */
tf_status tf_tool_train_nonfinite_loss(int64_t step, int32_t micro, int32_t accumulate, double loss,
                                       bool in_backward) TF_MUST_USE;

/* After an optimizer step: prints (unless `json`, whose step line carries it) when the update was
 * skipped or the loss scale changed (`window`: --loss-scale-window, 0 for the default), to stderr on a
 * terminal (`tty`) or stdout; an error where skipping cannot help (no loss scale, or scale 1). */
tf_status tf_tool_train_follow_scaling(tf_session *session, int64_t step, bool json, bool tty,
                                       int64_t window) TF_MUST_USE;

/* The gradients of `step` scanned before its optimizer step. */
tf_status tf_tool_train_check_gradients(tf_session *session, int64_t step) TF_MUST_USE;

/* The weights after `step` of a plan that updates in the backward pass (it keeps no gradient). */
tf_status tf_tool_train_check_updated_weights(tf_session *session, int64_t step) TF_MUST_USE;

/* The weights at the end of a run, whatever --check-finite says; `checkpoint`: one was asked for. */
tf_status tf_tool_train_check_final_weights(tf_session *session, bool checkpoint) TF_MUST_USE;

#endif
