#define _POSIX_C_SOURCE 200809L
#include "runtime/mapped_file.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/file.h"

tf_status tf_mapped_file_open(const char *path, tf_mapped_file *out) {
  out->data = NULL;
  out->size = 0;
  int fd;
  uint64_t size;
  TF_RETURN_IF_ERROR(
      tf_file_open_regular(path, TF_FILE_TENSOR_MAX_BYTES, "tensor files (.npy, safetensors)", &fd, &size));
  tf_status status = NULL;
  if (size > SIZE_MAX)
    status = tf_status_new(TF_ERR_IO, "%s: too large to map", path);
  else if (size > 0) {
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
      status = tf_status_new(TF_ERR_IO, "%s: cannot map %zu bytes: %s", path, (size_t)size, strerror(errno));
    else {
      out->data = map;
      out->size = (size_t)size;
    }
  }
  close(fd); /* the mapping keeps the file alive */
  return status;
}

void tf_mapped_file_close(tf_mapped_file *file) {
  if (file->data)
    munmap((void *)file->data, file->size);
  file->data = NULL;
  file->size = 0;
}
