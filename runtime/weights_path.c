/* An external initializer's file, found beside the plan or in the graph's folder (see weights_path.h). */
#include "runtime/weights_path.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tightfit/status.h"

static bool exists(const char *path) {
  struct stat info;
  return stat(path, &info) == 0;
}

static tf_status join(const char *folder, const char *file, char *path, size_t size) {
  const int n = snprintf(path, size, "%s/%s", folder, file);
  if (n < 0 || (size_t)n >= size)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s/%s: the path is longer than %zu bytes", folder, file, size - 1);
  return NULL;
}

tf_status tf_weights_path(const tf_plan *plan, const char *weights_dir, const char *file, char *path, size_t size) {
  if (file[0] == '/') {
    if (strlen(file) >= size)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: the path is longer than %zu bytes", file, size - 1);
    strcpy(path, file);
    return NULL; /* opening it says what is wrong */
  }
  const char *first = weights_dir ? weights_dir : ".";
  TF_RETURN_IF_ERROR(join(first, file, path, size));
  if (exists(path) || errno != ENOENT)
    return NULL;
  const char *graph_dir = plan->graph_dir;
  if (!graph_dir || !graph_dir[0])
    return NULL; /* an older plan: opening it says what is wrong, as before */
  char second[4096];
  TF_RETURN_IF_ERROR(join(graph_dir, file, second, sizeof(second)));
  if (exists(second)) {
    if (strlen(second) >= size)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: the path is longer than %zu bytes", second, size - 1);
    strcpy(path, second);
    return NULL;
  }
  return tf_status_new(TF_ERR_IO,
                       "%s: not found: looked for it in %s (the weights folder: the plan's, or --weights-dir DIR) "
                       "and in %s (the graph's folder when the plan was compiled); put it in one of them, or point "
                       "--weights-dir (tf_session_options.weights_dir) at the folder that holds it",
                       file, first, graph_dir);
}
