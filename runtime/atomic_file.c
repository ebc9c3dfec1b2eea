#define _POSIX_C_SOURCE 200809L
/* Temporary file + fsync + rename. The temporary name matches the repository's ignore pattern
 * (*.tmp[0-9]*) so a leftover from a crash is never committed by accident. */
#include "runtime/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tf_atomic_file {
  int fd;
  char *path;
  char *temporary;
};

static char *copy_string(const char *text) {
  size_t length = strlen(text) + 1;
  char *copy = malloc(length);
  if (copy)
    memcpy(copy, text, length);
  return copy;
}

/* The folder holding `path` ("." when it has none), so that the rename itself can be synced. */
static void sync_folder(const char *path) {
  const char *slash = strrchr(path, '/');
  char *folder = slash ? copy_string(path) : copy_string(".");
  if (!folder)
    return;
  if (slash)
    folder[slash == path ? 1 : slash - path] = '\0';
  int fd = open(folder, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    /* Some file systems refuse fsync on a folder (EINVAL); the data itself is already synced. */
    (void)fsync(fd);
    close(fd);
  }
  free(folder);
}

tf_status tf_atomic_file_open(const char *path, tf_atomic_file **out) {
  *out = NULL;
  if (!path || !*path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "atomic file: empty path");
  tf_atomic_file *file = calloc(1, sizeof(*file));
  size_t length = strlen(path) + 40;
  char *temporary = malloc(length);
  char *target = copy_string(path);
  if (!file || !temporary || !target) {
    free(file);
    free(temporary);
    free(target);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a file handle", path);
  }
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
    if (attempt == 0)
      snprintf(temporary, length, "%s.tmp%ld", path, (long)getpid());
    else
      snprintf(temporary, length, "%s.tmp%ld.%d", path, (long)getpid(), attempt);
    do
      fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    tf_status status = tf_status_new(TF_ERR_IO, "%s: cannot create %s: %s", path, temporary, strerror(errno));
    free(file);
    free(temporary);
    free(target);
    return status;
  }
  file->fd = fd;
  file->path = target;
  file->temporary = temporary;
  *out = file;
  return NULL;
}

tf_status tf_atomic_file_write(tf_atomic_file *file, const void *data, size_t size) {
  const unsigned char *bytes = data;
  while (size > 0) {
    size_t chunk = size < ((size_t)1 << 30) ? size : ((size_t)1 << 30);
    ssize_t written = write(file->fd, bytes, chunk);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return tf_status_new(TF_ERR_IO, "%s: write failed: %s", file->temporary,
                           written < 0 ? strerror(errno) : "no progress");
    bytes += written;
    size -= (size_t)written;
  }
  return NULL;
}

static void release(tf_atomic_file *file) {
  free(file->path);
  free(file->temporary);
  free(file);
}

tf_status tf_atomic_file_commit(tf_atomic_file *file) {
  tf_status status = NULL;
  if (fsync(file->fd) != 0)
    status = tf_status_new(TF_ERR_IO, "%s: fsync failed: %s", file->temporary, strerror(errno));
  if (close(file->fd) != 0 && !status)
    status = tf_status_new(TF_ERR_IO, "%s: close failed: %s", file->temporary, strerror(errno));
  if (!status && rename(file->temporary, file->path) != 0)
    status =
        tf_status_new(TF_ERR_IO, "%s: cannot rename %s into place: %s", file->path, file->temporary, strerror(errno));
  if (status)
    unlink(file->temporary);
  else
    sync_folder(file->path);
  release(file);
  return status;
}

void tf_atomic_file_discard(tf_atomic_file *file) {
  if (!file)
    return;
  close(file->fd);
  unlink(file->temporary);
  release(file);
}

tf_status tf_atomic_file_write_all(const char *path, const void *data, size_t size) {
  tf_atomic_file *file;
  TF_RETURN_IF_ERROR(tf_atomic_file_open(path, &file));
  tf_status status = tf_atomic_file_write(file, data, size);
  if (status) {
    tf_atomic_file_discard(file);
    return status;
  }
  return tf_atomic_file_commit(file);
}
