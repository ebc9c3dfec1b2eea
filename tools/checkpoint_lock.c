/* The checkpoint folder's lock (checkpoint_lock.h). flock rather than fcntl locks: an fcntl lock
 * belongs to the process and is lost when any descriptor of the file is closed, a flock lock to the
 * open file description; both are released by the kernel at exit. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "tools/checkpoint_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME "train.lock"

/* The pid that the holder wrote into the lock file, or 0 when it cannot be read (a holder that has
 * not written it yet). */
static long holder_pid(int fd) {
  char text[32];
  ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  if (n <= 0)
    return 0;
  text[n] = '\0';
  char *end;
  long pid = strtol(text, &end, 10);
  return end != text && pid > 0 ? pid : 0;
}

static tf_status write_pid(int fd, const char *path) {
  char text[32];
  int length = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)length, 0) != length)
    return tf_status_new(TF_ERR_IO, "%s: cannot write the lock file: %s", path, strerror(errno));
  return NULL;
}

tf_status tf_tool_checkpoint_lock(const char *dir, int *fd) {
  *fd = -1;
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return tf_status_new(TF_ERR_IO, "%s: cannot use as the checkpoint folder: %s", dir, strerror(errno));
  char path[4096];
  if (snprintf(path, sizeof(path), "%s/%s", dir, LOCK_NAME) >= (int)sizeof(path))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: checkpoint folder path too long", dir);
  int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (lock < 0)
    return tf_status_new(TF_ERR_IO, "%s: cannot use as the checkpoint folder: %s", dir, strerror(errno));
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const long pid = holder_pid(lock);
    close(lock);
    if (error != EWOULDBLOCK)
      return tf_status_new(TF_ERR_IO, "%s: cannot lock %s: %s", dir, LOCK_NAME, strerror(error));
    char holder[48] = "";
    if (pid)
      snprintf(holder, sizeof(holder), " (pid %ld)", pid);
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: checkpoint folder in use by another tightfit train%s, which holds its %s; two runs "
                         "on one folder would overwrite each other's checkpoints: wait for it to finish, or "
                         "give this run another --checkpoint folder",
                         dir, holder, LOCK_NAME);
  }
  tf_status status = write_pid(lock, path);
  if (status) {
    close(lock);
    return status;
  }
  *fd = lock;
  return NULL;
}

void tf_tool_checkpoint_unlock(int fd) {
  if (fd >= 0)
    close(fd);
}
