#include "checkpoint_rewrite.h"

#include <string.h>

#include "runtime/safetensors.h"

tf_status tf_checkpoint_rewrite(const char *from, const char *to, const char *const *keys, const char *const *values,
                                int n) {
  tf_safetensors *file;
  TF_RETURN_IF_ERROR(tf_safetensors_open(from, &file));
  tf_safetensors_writer *writer = NULL;
  tf_status status = tf_safetensors_writer_create(&writer);
  for (int32_t i = 0; i < tf_safetensors_count(file) && !status; i++) {
    tf_safetensors_tensor view;
    tf_safetensors_at(file, i, &view);
    status = tf_safetensors_writer_add(writer, view.name, view.dtype, view.rank, view.shape, view.data);
  }
  for (int32_t i = 0; i < tf_safetensors_metadata_count(file) && !status; i++) {
    const char *key, *value;
    tf_safetensors_metadata_at(file, i, &key, &value);
    for (int k = 0; k < n; k++)
      if (strcmp(keys[k], key) == 0)
        value = NULL; /* replaced or removed below */
    if (value)
      status = tf_safetensors_writer_set_metadata(writer, key, value);
  }
  for (int k = 0; k < n && !status; k++)
    if (values[k])
      status = tf_safetensors_writer_set_metadata(writer, keys[k], values[k]);
  if (!status)
    status = tf_safetensors_writer_write(writer, to);
  tf_safetensors_writer_destroy(writer);
  tf_safetensors_close(file);
  return status;
}
