/* tf_tool_check_finite (finite_check.h). */
#include "tools/finite_check.h"

#include <inttypes.h>
#include <math.h>

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
