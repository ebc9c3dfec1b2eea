/* The CLI's --init-from (tools/init_from_cli.h). */
#include "tools/init_from_cli.h"

#include "tightfit/init_from.h"
#include "tightfit/plan.h"
#include "tools/finite_check.h"

tf_status tf_tool_init_from(tf_session *session, const char *file, const char *map_path, FILE *log) {
  tf_init_map *map = NULL;
  if (map_path)
    TF_RETURN_IF_ERROR(tf_init_map_load(map_path, &map));
  tf_init_from_result r;
  tf_status status = tf_session_init_from(session, file, map, &r);
  tf_init_map_destroy(map);
  if (!status)
    status = tf_tool_check_finite(session, 1u << TF_ROLE_PARAMETER | 1u << TF_ROLE_STATE, file,
                                  "refusing to train from non-finite weights");
  if (status || !log)
    return status;
  fprintf(log, "initialised from %s: %d tensors (%d read transposed, %d converted)", file, r.loaded, r.transposed,
          r.converted);
  if (r.ignored)
    fprintf(log, ", %d of the file's left out", r.ignored);
  if (r.kept)
    fprintf(log, ", %d parameters kept at their initial values", r.kept);
  if (r.state_kept)
    fprintf(log, ", %d running statistics not in the file kept", r.state_kept);
  fprintf(log, "\n");
  return NULL;
}
