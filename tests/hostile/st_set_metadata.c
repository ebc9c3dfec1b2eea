/* st_set_metadata IN OUT KEY=VALUE...: copies the safetensors file IN to OUT with metadata KEY set to
 * VALUE ("KEY=" removes it), every tensor unchanged (tf_checkpoint_rewrite). The hostile-input tests
 * use it to plant bad counters in a real checkpoint. Errors print a message and exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_rewrite.h"

enum { KEY_CHARS = 256 };

/* Splits argv[first..argc) at each '=' into keys and values (NULL for "KEY="), then rewrites. */
static tf_status copy_with_metadata(const char *in, const char *out, char **argv, int first, int argc) {
  const int n = argc - first;
  char(*names)[KEY_CHARS] = calloc((size_t)n + 1, sizeof(*names));
  const char **keys = calloc((size_t)n + 1, sizeof(*keys)), **values = calloc((size_t)n + 1, sizeof(*values));
  tf_status status = names && keys && values ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "st_set_metadata: no memory");
  for (int i = 0; i < n && !status; i++) {
    const char *arg = argv[first + i], *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
      status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "'%s' is not KEY=VALUE", arg);
      continue;
    }
    snprintf(names[i], KEY_CHARS, "%.*s", (int)(eq - arg), arg);
    keys[i] = names[i];
    values[i] = eq[1] ? eq + 1 : NULL;
  }
  if (!status)
    status = tf_checkpoint_rewrite(in, out, keys, values, n);
  free(names);
  free(keys);
  free(values);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: st_set_metadata IN OUT KEY=VALUE...\n");
    return 2;
  }
  tf_status status = copy_with_metadata(argv[1], argv[2], argv, 3, argc);
  if (status) {
    fprintf(stderr, "st_set_metadata: %s\n", tf_status_message(status));
    tf_status_free(status);
    return 2;
  }
  return 0;
}
