/* st_set_metadata IN OUT KEY=VALUE...: copies the safetensors file IN to OUT with metadata KEY set to
 * VALUE ("KEY=" removes it), every tensor unchanged. The hostile-input tests use it to plant bad
 * counters in a real checkpoint. Errors print a message and exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/safetensors.h"

/* The value argv[first..argc) gives `key`: *found says whether one does; NULL means "remove". */
static const char *override_for(const char *key, char **argv, int first, int argc, int *found) {
  *found = 0;
  for (int i = first; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    if (eq && (size_t)(eq - argv[i]) == strlen(key) && strncmp(argv[i], key, strlen(key)) == 0) {
      *found = 1;
      return eq[1] ? eq + 1 : NULL;
    }
  }
  return NULL;
}

static tf_status copy_with_metadata(const char *in, const char *out, char **argv, int first, int argc) {
  tf_safetensors *file;
  TF_RETURN_IF_ERROR(tf_safetensors_open(in, &file));
  tf_safetensors_writer *writer = NULL;
  tf_status status = tf_safetensors_writer_create(&writer);
  for (int32_t i = 0; i < tf_safetensors_count(file) && !status; i++) {
    tf_safetensors_tensor view;
    tf_safetensors_at(file, i, &view);
    status = tf_safetensors_writer_add(writer, view.name, view.dtype, view.rank, view.shape, view.data);
  }
  for (int32_t i = 0; i < tf_safetensors_metadata_count(file) && !status; i++) {
    const char *key, *value;
    int found;
    tf_safetensors_metadata_at(file, i, &key, &value);
    const char *replacement = override_for(key, argv, first, argc, &found);
    if (found)
      value = replacement;
    if (value)
      status = tf_safetensors_writer_set_metadata(writer, key, value);
  }
  for (int i = first; i < argc && !status; i++) {
    const char *eq = strchr(argv[i], '=');
    if (!eq || eq == argv[i]) {
      status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "'%s' is not KEY=VALUE", argv[i]);
    } else if (eq[1]) {
      char key[256];
      snprintf(key, sizeof(key), "%.*s", (int)(eq - argv[i]), argv[i]);
      status = tf_safetensors_writer_set_metadata(writer, key, eq + 1);
    }
  }
  if (!status)
    status = tf_safetensors_writer_write(writer, out);
  tf_safetensors_writer_destroy(writer);
  tf_safetensors_close(file);
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
