/* The CLI's checks for non-finite numbers (issue 18): `tightfit train --check-finite` scans the
 * gradients before the optimizer step of the first steps (all of them with `all`), and the weights
 * before every checkpoint is written; `train --resume` and `run --weights` scan what they loaded.
 * A NaN or infinity stops the command with the tensor, element, value and step named, before any
 * weight is overwritten and before a checkpoint replaces a good one. */
#ifndef TIGHTFIT_TOOLS_FINITE_CHECK_H
#define TIGHTFIT_TOOLS_FINITE_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "tightfit/runtime.h"

/* The roles scanned: a step's gradients; the weights (parameters and optimizer state). */
#define TF_TOOL_GRADIENTS (1u << TF_ROLE_GRADIENT)
#define TF_TOOL_WEIGHTS ((1u << TF_ROLE_PARAMETER) | (1u << TF_ROLE_OPTIMIZER_STATE))

/* NULL when every buffer of `roles` is finite; else an error "WHEN: ROLE 'NAME' element I is nan;
 * CONSEQUENCE" (`when` says where the run is, `consequence` what was not done because of it). */
tf_status tf_tool_check_finite(tf_session *session, uint32_t roles, const char *when,
                               const char *consequence) TF_MUST_USE;

/* NULL when the parameters are finite after tf_session_create; checked only for a plan with weights
 * from safetensors files (what `tightfit import` writes), else NULL at once. A NaN or infinity
 * gives "WEIGHTS_DIR/FILE: tensor 'KEY' element I is nan (the initial value of parameter 'NAME');
 * CONSEQUENCE": the file's fault, not the learning rate's (issue 49). */
tf_status tf_tool_check_initial_weights(tf_session *session, const char *weights_dir,
                                        const char *consequence) TF_MUST_USE;

#endif
