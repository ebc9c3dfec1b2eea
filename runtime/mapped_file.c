#define _POSIX_C_SOURCE 200809L
#include "runtime/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tf_status tf_mapped_file_open(const char *path, tf_mapped_file *out) {
  out->data = NULL;
  out->size = 0;
  int fd;
  do
    fd = open(path, O_RDONLY);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return tf_status_new(TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat info;
  tf_status status = NULL;
  if (fstat(fd, &info) != 0)
    status = tf_status_new(TF_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(info.st_mode))
    status = tf_status_new(TF_ERR_IO, "%s: not a regular file", path);
  else if ((uint64_t)info.st_size > SIZE_MAX)
    status = tf_status_new(TF_ERR_IO, "%s: too large to map", path);
  else if (info.st_size > 0) {
    void *map = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
      status =
          tf_status_new(TF_ERR_IO, "%s: cannot map %lld bytes: %s", path, (long long)info.st_size, strerror(errno));
    else {
      out->data = map;
      out->size = (size_t)info.st_size;
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
