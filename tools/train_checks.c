/* What train does when a step's numbers are not finite (see tools/train_checks.h). */
#include "tools/train_checks.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "tools/cli.h"
#include "tools/finite_check.h"

static const char *const NOT_UPDATED = "stopped before the optimizer step: no weight was overwritten";

static const char *const UPDATED_IN_BACKWARD =
    "stopped; this plan updates in the backward pass, so this step's updates ran, but no checkpoint was written "
    "after them";

tf_status tf_tool_train_nonfinite_loss(int64_t step, int32_t micro, int32_t accumulate, double loss, bool in_backward) {
  char micro_batch[48] = "";
  if (accumulate > 1)
    snprintf(micro_batch, sizeof(micro_batch), " (micro-batch %d of %d)", micro + 1, accumulate);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "step %" PRId64 "%s: the loss is %s; %s (lower the learning rate, or clip gradients)", step + 1,
                       micro_batch,
                       isnan(loss) ? "nan"
                       : loss < 0  ? "-inf"
                                   : "inf",
                       in_backward ? UPDATED_IN_BACKWARD : NOT_UPDATED);
}

/* After an optimizer step: says when the update was skipped or the loss scale changed, and stops
 * the run where skipping cannot help (a plan that does not scale its loss, or scale 1 already). */
tf_status tf_tool_train_follow_scaling(tf_session *session, int64_t step, bool json, bool tty, int64_t window) {
  const tf_session_scaling c = tf_session_scaling_state(session);
  if (c.last_skipped && !c.scaled)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "step %" PRId64 ": the gradients' sum of squares, which clipping reads, is not finite (a "
                         "gradient is inf or NaN, or they are beyond 1e19); the update was skipped: no weight was "
                         "overwritten (lower the learning rate)",
                         step + 1);
  if (c.last_skipped && c.previous_log2 == TF_LOSS_SCALE_MIN_LOG2)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "step %" PRId64 ": a gradient is not finite even at loss scale 1; the update was skipped: "
                         "no weight was overwritten. Gradients are f32, so the overflow is not theirs: an activation "
                         "beyond f16's range (65504) stored in f16? Compile with --precision bf16",
                         step + 1);
  if (json || c.loss_scale_log2 == c.previous_log2)
    return NULL; /* the JSON step line carries the scale and the skip */
  char line[160];
  if (c.last_skipped)
    snprintf(line, sizeof(line), "step %" PRId64 ": a gradient overflowed: update skipped, loss scale %.0f -> %.0f",
             step + 1, ldexp(1.0, c.previous_log2), ldexp(1.0, c.loss_scale_log2));
  else
    snprintf(line, sizeof(line), "step %" PRId64 ": loss scale %.0f -> %.0f after %" PRId64 " steps without overflow",
             step + 1, ldexp(1.0, c.previous_log2), ldexp(1.0, c.loss_scale_log2), window ? window : 2000);
  if (tty)
    fprintf(tf_cli_err(), "\r%-100s\n", line);
  else
    fprintf(tf_cli_out(), "%s\n", line);
  fflush(tty ? tf_cli_err() : tf_cli_out());
  return NULL;
}

tf_status tf_tool_train_check_gradients(tf_session *session, int64_t step) {
  char when[48];
  snprintf(when, sizeof(when), "step %" PRId64, step + 1);
  return tf_tool_check_finite(session, TF_TOOL_GRADIENTS, when, NOT_UPDATED);
}

/* A plan that updates in the backward pass keeps no gradient past its update: the weights are
 * scanned after the step instead, so a NaN is caught before any checkpoint, not before the update. */
tf_status tf_tool_train_check_updated_weights(tf_session *session, int64_t step) {
  char when[96];
  snprintf(when, sizeof(when), "step %" PRId64 " (after its updates, which this plan runs in the backward pass)",
           step + 1);
  return tf_tool_check_finite(session, TF_TOOL_WEIGHTS, when,
                              "stopped before any checkpoint was written: the last one is intact");
}

/* The weights after the last step (or the interrupted one), whatever --check-finite says: a NaN
 * that slipped past every earlier check (the tester's went through a ReLU, whose gradient is 0,
 * into a weight after the scanned steps, while the loss stayed finite) fails the run here. */
tf_status tf_tool_train_check_final_weights(tf_session *session, bool checkpoint) {
  char when[96];
  snprintf(when, sizeof(when), "after step %" PRId64 " (the end of the run)", tf_session_optimizer_steps(session));
  return tf_tool_check_finite(session, TF_TOOL_WEIGHTS, when,
                              checkpoint ? "the trained weights are broken: no checkpoint written (the last one, if "
                                           "any, is left as it was); lower the learning rate, or check the data"
                                         : "the trained weights are broken; lower the learning rate, or check the "
                                           "data");
}
