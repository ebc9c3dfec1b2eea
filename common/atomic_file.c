#define _POSIX_C_SOURCE 200809L
/* Temporary file + fsync + rename. The temporary name matches the repository's ignore pattern
 * (*.tmp[0-9]*) so a leftover from a crash is never committed by accident. */
#include "common/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/copy.h"
#include "common/file.h"

/* Symbolic links followed before giving up, as the kernel's own limit (MAXSYMLINKS) is 40. */
#define MAX_LINK_HOPS 40

struct tf_atomic_file {
  int fd;
  char *path;      /* as the caller named it, for messages */
  char *target;    /* the file actually replaced: `path` with symbolic links followed */
  char *temporary; /* beside `target` */
};

/* The folder part of `path` ("." when it has none, "/" for a file at the root); the caller frees it. */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return tf_copy_string(".");
  char *folder = tf_copy_string(path);
  if (folder)
    folder[slash == path ? 1 : slash - path] = '\0';
  return folder;
}

/* The folder holding `path`, synced so that the rename itself is on disk. */
static void sync_folder(const char *path) {
  char *folder = folder_of(path);
  if (!folder)
    return;
  int fd = open(folder, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    /* Some file systems refuse fsync on a folder (EINVAL); the data itself is already synced. */
    (void)fsync(fd);
    close(fd);
  }
  free(folder);
}

/* Where the symbolic link `link` points, as a path usable from here: a relative destination counts
 * from the link's own folder. The caller frees it; NULL with errno set on failure. */
static char *link_destination(const char *link) {
  struct stat info;
  if (lstat(link, &info) != 0)
    return NULL;
  size_t capacity = info.st_size > 0 ? (size_t)info.st_size + 1 : 4096;
  char *destination = malloc(capacity);
  if (!destination)
    return NULL;
  ssize_t length = readlink(link, destination, capacity);
  if (length < 0 || (size_t)length >= capacity) { /* changed size since lstat: give up, it is racing */
    int error = length < 0 ? errno : EAGAIN;
    free(destination);
    errno = error;
    return NULL;
  }
  destination[length] = '\0';
  if (destination[0] == '/' || !strchr(link, '/'))
    return destination;
  size_t folder_length = (size_t)(strrchr(link, '/') - link) + 1;
  char *joined = malloc(folder_length + (size_t)length + 1);
  if (joined) {
    memcpy(joined, link, folder_length);
    memcpy(joined + folder_length, destination, (size_t)length + 1);
  }
  free(destination);
  return joined;
}

/* The file that writing to `path` must replace: `path` itself, or the end of its chain of symbolic
 * links (which may not exist yet). Refuses anything that exists and is not a regular file; on
 * success *mode is the existing file's permission bits, or -1 for a new file. The caller frees
 * *target. realpath() is not enough: it fails on a dangling link, which names a file to create. */
static tf_status resolve_target(const char *path, char **target, int *mode) {
  *target = NULL;
  *mode = -1;
  char *current = tf_copy_string(path);
  for (int hops = 0; current; hops++) {
    struct stat info;
    if (lstat(current, &info) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        *target = current; /* a new file; a missing folder is reported when creating the temporary */
        return NULL;
      }
      tf_status status = tf_status_new(TF_ERR_IO, "%s: cannot examine %s: %s", path, current, strerror(errno));
      free(current);
      return status;
    }
    if (!S_ISLNK(info.st_mode)) {
      if (S_ISREG(info.st_mode)) {
        *target = current;
        *mode = (int)(info.st_mode & 07777);
        return NULL;
      }
      bool followed = strcmp(path, current) != 0;
      tf_status status = tf_status_new(
          TF_ERR_IO,
          "%s%s%s: not a regular file (it is %s); tightfit writes only regular files and replaces nothing else", path,
          followed ? " -> " : "", followed ? current : "", tf_file_kind_name((unsigned)info.st_mode));
      free(current);
      return status;
    }
    if (hops == MAX_LINK_HOPS) {
      free(current);
      return tf_status_new(TF_ERR_IO, "%s: more than %d symbolic links in a row (a loop?)", path, MAX_LINK_HOPS);
    }
    char *next = link_destination(current);
    if (!next) {
      tf_status status =
          tf_status_new(TF_ERR_IO, "%s: cannot read the symbolic link %s: %s", path, current, strerror(errno));
      free(current);
      return status;
    }
    free(current);
    current = next;
  }
  return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a path", path);
}

/* The process id in `name` when it is "<base>.tmp<pid>" or "<base>.tmp<pid>.<n>", else 0. */
static long temporary_owner(const char *name, const char *base) {
  size_t base_length = strlen(base);
  if (strncmp(name, base, base_length) != 0 || strncmp(name + base_length, ".tmp", 4) != 0)
    return 0;
  char digits[32];
  const char *pid_text = name + base_length + 4, *dot = strchr(pid_text, '.');
  size_t pid_length = dot ? (size_t)(dot - pid_text) : strlen(pid_text);
  if (pid_length == 0 || pid_length >= sizeof(digits))
    return 0;
  memcpy(digits, pid_text, pid_length);
  digits[pid_length] = '\0';
  int64_t pid, attempt;
  if (tf_parse_i64(digits, 1, INT32_MAX, &pid) != TF_PARSE_OK ||
      (dot && tf_parse_i64(dot + 1, 1, INT32_MAX, &attempt) != TF_PARSE_OK))
    return 0;
  return (long)pid;
}

/* Removes the temporaries beside `target` left by saves whose process is gone (see the header).
 * Best effort: a leftover that cannot be removed does not stop this save. */
static void remove_stale_temporaries(const char *target) {
  char *folder = folder_of(target);
  const char *slash = strrchr(target, '/');
  const char *base = slash ? slash + 1 : target;
  DIR *dir = folder ? opendir(folder) : NULL;
  if (dir) {
    const long self = (long)getpid();
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
      long owner = temporary_owner(entry->d_name, base);
      if (owner == 0 || owner == self || kill((pid_t)owner, 0) == 0 || errno != ESRCH)
        continue; /* not ours to judge, or a process that still runs (EPERM: runs as another user) */
      /* Only a regular file of our own user: a save by this user made it; anything else that merely
       * looks like a temporary is left alone. */
      struct stat info;
      if (fstatat(dirfd(dir), entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(info.st_mode) &&
          info.st_uid == geteuid())
        (void)unlinkat(dirfd(dir), entry->d_name, 0);
    }
    closedir(dir);
  }
  free(folder);
}

static void release(tf_atomic_file *file) {
  free(file->path);
  free(file->target);
  free(file->temporary);
  free(file);
}

/* Creates "<target>.tmp<pid>[.n]" exclusively into file->fd and file->temporary. */
static tf_status create_temporary(tf_atomic_file *file) {
  size_t length = strlen(file->target) + 40;
  file->temporary = malloc(length);
  if (!file->temporary)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a file name", file->path);
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
    if (attempt == 0)
      snprintf(file->temporary, length, "%s.tmp%ld", file->target, (long)getpid());
    else
      snprintf(file->temporary, length, "%s.tmp%ld.%d", file->target, (long)getpid(), attempt);
    do
      fd = open(file->temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return tf_status_new(TF_ERR_IO, "%s: cannot create %s: %s", file->path, file->temporary, strerror(errno));
  file->fd = fd;
  return NULL;
}

tf_status tf_atomic_file_open(const char *path, tf_atomic_file **out) {
  *out = NULL;
  if (!path || !*path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "atomic file: empty path");
  tf_atomic_file *file = calloc(1, sizeof(*file));
  if (!file || !(file->path = tf_copy_string(path))) {
    free(file);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a file handle", path);
  }
  file->fd = -1;
  int mode;
  tf_status status = resolve_target(path, &file->target, &mode);
  if (!status) {
    remove_stale_temporaries(file->target);
    status = create_temporary(file);
  }
  /* Replacing a file keeps its permission bits (a private key stays private); a new file gets
   * 0666 less the umask, as any other tool's output. */
  if (!status && mode >= 0 && fchmod(file->fd, (mode_t)mode) != 0)
    status = tf_status_new(TF_ERR_IO, "%s: cannot set the mode of %s: %s", path, file->temporary, strerror(errno));
  if (status) {
    if (file->fd >= 0) {
      close(file->fd);
      unlink(file->temporary);
    }
    release(file);
    return status;
  }
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

/* Checked again just before the rename: something other than a regular file put at the target
 * since the open (a device node, a FIFO, a folder, a link) is refused, not replaced. */
static tf_status check_target_still_regular(const tf_atomic_file *file) {
  struct stat info;
  if (lstat(file->target, &info) != 0)
    return errno == ENOENT
               ? NULL
               : tf_status_new(TF_ERR_IO, "%s: cannot examine %s: %s", file->path, file->target, strerror(errno));
  if (S_ISREG(info.st_mode))
    return NULL;
  return tf_status_new(TF_ERR_IO, "%s: %s became %s while being written; not replaced", file->path, file->target,
                       tf_file_kind_name((unsigned)info.st_mode));
}

tf_status tf_atomic_file_commit(tf_atomic_file *file) {
  tf_status status = NULL;
  if (fsync(file->fd) != 0)
    status = tf_status_new(TF_ERR_IO, "%s: fsync failed: %s", file->temporary, strerror(errno));
  if (close(file->fd) != 0 && !status)
    status = tf_status_new(TF_ERR_IO, "%s: close failed: %s", file->temporary, strerror(errno));
  if (!status)
    status = check_target_still_regular(file);
  if (!status && rename(file->temporary, file->target) != 0)
    status =
        tf_status_new(TF_ERR_IO, "%s: cannot rename %s into place: %s", file->path, file->temporary, strerror(errno));
  if (status)
    unlink(file->temporary);
  else
    sync_folder(file->target);
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
