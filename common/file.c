#define _POSIX_C_SOURCE 200809L
/* Reading user-named input files without blocking, without reading forever, and within a bound. */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

const char *tf_file_kind_name(unsigned mode) {
  if (S_ISREG(mode))
    return "a regular file";
  if (S_ISDIR(mode))
    return "a folder";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "an unknown kind of file";
}

static tf_status not_regular(const char *path, unsigned mode) {
  return tf_status_new(TF_ERR_IO, "%s: not a regular file (it is %s); tightfit reads only regular files", path,
                       tf_file_kind_name(mode));
}

static tf_status too_large(const char *path, uint64_t size, uint64_t max_bytes, const char *kind) {
  return tf_status_new(TF_ERR_IO, "%s: %" PRIu64 " bytes, more than the %" PRIu64 "-byte bound for %s", path, size,
                       max_bytes, kind);
}

tf_status tf_file_open_regular(const char *path, uint64_t max_bytes, const char *kind, int *fd, uint64_t *size) {
  *fd = -1;
  *size = 0;
  /* stat first, so that a device is never opened at all: opening one can have effects (a tape
   * rewinds, a terminal becomes the controlling one) even when nothing is read. */
  struct stat info;
  if (stat(path, &info) != 0)
    return tf_status_new(TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  if (!S_ISREG(info.st_mode))
    return not_regular(path, (unsigned)info.st_mode);
  /* The path may be replaced between stat and open: O_NONBLOCK keeps a FIFO put there from blocking
   * the open, O_NOCTTY keeps a terminal from becoming ours, and fstat checks what was opened. */
  int opened;
  do
    opened = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  while (opened < 0 && errno == EINTR);
  if (opened < 0)
    return tf_status_new(TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  tf_status status = NULL;
  if (fstat(opened, &info) != 0)
    status = tf_status_new(TF_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(info.st_mode))
    status = not_regular(path, (unsigned)info.st_mode);
  else if ((uint64_t)info.st_size > max_bytes)
    status = too_large(path, (uint64_t)info.st_size, max_bytes, kind);
  /* Regular files ignore O_NONBLOCK today; clearing it keeps reads blocking-and-complete should a
   * file system ever honour it. */
  else if (fcntl(opened, F_SETFL, fcntl(opened, F_GETFL) & ~O_NONBLOCK) != 0)
    status = tf_status_new(TF_ERR_IO, "%s: cannot configure the descriptor: %s", path, strerror(errno));
  if (status) {
    close(opened);
    return status;
  }
  *fd = opened;
  *size = (uint64_t)info.st_size;
  return NULL;
}

/* Reads fd to its end into a buffer of at most max_bytes. The size from fstat is the first guess;
 * the file may still grow (or be a /proc-style file that reports 0), so reading continues to the
 * end, up to the bound and one byte past it to notice a file that exceeds it. */
static tf_status read_to_end(const char *path, int fd, uint64_t expected, uint64_t max_bytes, const char *kind,
                             unsigned char **data, size_t *size) {
  size_t capacity = (size_t)(expected < max_bytes ? expected : max_bytes) + 1, used = 0;
  unsigned char *buffer = malloc(capacity);
  if (!buffer)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes to read it", path, capacity);
  for (;;) {
    if (used == capacity) {
      if ((uint64_t)used > max_bytes) {
        free(buffer);
        return too_large(path, (uint64_t)used, max_bytes, kind);
      }
      size_t grown = capacity <= SIZE_MAX / 2 ? capacity * 2 : SIZE_MAX;
      if ((uint64_t)grown > max_bytes + 1)
        grown = (size_t)(max_bytes + 1);
      unsigned char *bigger = realloc(buffer, grown);
      if (!bigger) {
        free(buffer);
        return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes to read it", path, grown);
      }
      buffer = bigger;
      capacity = grown;
    }
    size_t chunk = capacity - used < ((size_t)1 << 30) ? capacity - used : ((size_t)1 << 30);
    ssize_t got = read(fd, buffer + used, chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      tf_status status = tf_status_new(TF_ERR_IO, "%s: read failed: %s", path, strerror(errno));
      free(buffer);
      return status;
    }
    if (got == 0)
      break;
    used += (size_t)got;
  }
  if ((uint64_t)used > max_bytes) {
    free(buffer);
    return too_large(path, (uint64_t)used, max_bytes, kind);
  }
  *data = buffer;
  *size = used;
  return NULL;
}

tf_status tf_file_read_bounded(const char *path, uint64_t max_bytes, const char *kind, void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  if (max_bytes >= SIZE_MAX) /* room for the one byte past the bound */
    max_bytes = SIZE_MAX - 1;
  int fd;
  uint64_t expected;
  TF_RETURN_IF_ERROR(tf_file_open_regular(path, max_bytes, kind, &fd, &expected));
  unsigned char *buffer = NULL;
  tf_status status = read_to_end(path, fd, expected, max_bytes, kind, &buffer, size);
  close(fd);
  *data = buffer;
  return status;
}

tf_status tf_file_read(const char *path, void **data, size_t *size) {
  return tf_file_read_bounded(path, TF_FILE_FLATBUFFER_MAX_BYTES, "graph and plan files (the FlatBuffers limit)", data,
                              size);
}
