/* tf_tool_check_finite and tf_tool_check_initial_weights (finite_check.h). */
#include "tools/finite_check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "runtime/weights_path.h"

static const char *role_noun(tf_buffer_role role) {
  switch (role) {
  case TF_ROLE_GRADIENT: return "gradient";
  case TF_ROLE_OPTIMIZER_STATE: return "optimizer state";
  case TF_ROLE_PARAMETER: return "parameter";
  default: return "tensor";
  }
}

tf_status tf_tool_check_finite(tf_session *session, uint32_t roles, const char *when, const char *consequence) {
  tf_nonfinite found;
  TF_RETURN_IF_ERROR(tf_session_find_nonfinite(session, roles, &found));
  if (found.buffer < 0)
    return NULL;
  const tf_plan_buffer *b = &tf_session_plan(session)->buffers[found.buffer];
  const char *value = isnan(found.value) ? "nan" : found.value < 0 ? "-inf" : "inf";
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s '%s' element %" PRId64 " is %s; %s", when, role_noun(b->role),
                       b->name, found.index, value, consequence);
}

static const char *value_name(double value) { return isnan(value) ? "nan" : value < 0 ? "-inf" : "inf"; }

static bool has_external_weights(const tf_plan *plan) {
  for (int32_t i = 0; i < plan->n_buffers; i++)
    if (plan->buffers[i].init.kind == TF_INIT_EXTERNAL)
      return true;
  return false;
}

tf_status tf_tool_check_initial_weights(tf_session *session, const char *weights_dir, const char *consequence) {
  const tf_plan *plan = tf_session_plan(session);
  if (!has_external_weights(plan))
    return NULL; /* computed initialisers of finite parameters are finite */
  tf_nonfinite found;
  TF_RETURN_IF_ERROR(tf_session_find_nonfinite(session, 1u << TF_ROLE_PARAMETER, &found));
  if (found.buffer < 0)
    return NULL;
  const tf_plan_buffer *b = &plan->buffers[found.buffer];
  if (b->init.kind != TF_INIT_EXTERNAL)
    return tf_status_new(TF_ERR_INVALID_INPUT, "parameter '%s' element %" PRId64 " is %s after its initialiser; %s",
                         b->name, found.index, value_name(found.value), consequence);
  char path[4096]; /* the file the session read: beside the plan, or in the graph's folder */
  tf_status where = tf_weights_path(plan, weights_dir, b->init.file, path, sizeof(path));
  if (where)
    snprintf(path, sizeof(path), "%s/%s", weights_dir ? weights_dir : ".", b->init.file);
  tf_status_free(where);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: tensor '%s' element %" PRId64 " is %s (the initial value of parameter '%s'); %s", path,
                       b->init.key, found.index, value_name(found.value), b->name, consequence);
}
