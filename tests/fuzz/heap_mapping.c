#define _GNU_SOURCE
/* The fuzz targets' stand-in for mmap (see fuzz_support.h). Linked with --wrap, so only the objects
 * of the fuzz executable that call mmap/munmap (runtime/mapped_file.c) reach it; the sanitizer
 * runtimes map their own memory with raw system calls. Anything but a read-only private mapping of a
 * file from offset 0 passes straight through to the real mmap. */
#include <errno.h>
#include <sanitizer/allocator_interface.h>
#include <sanitizer/asan_interface.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/mapped_file.h"
#include "tests/fuzz/fuzz_support.h"

void *__real_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset);
int __real_munmap(void *address, size_t length);
void *__wrap_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset);
int __wrap_munmap(void *address, size_t length);

/* Aligned like a page would be for any element type (the readers copy data whose offset in the
 * file is not a multiple of its element size, assuming the base is aligned). */
#define BLOCK_ALIGNMENT 64

void *__wrap_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
  struct stat info;
  if (address || protection != PROT_READ || (flags & MAP_TYPE) != MAP_PRIVATE || fd < 0 || offset != 0 || length == 0 ||
      fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))
    return __real_mmap(address, length, protection, flags, fd, offset);
  void *block = NULL;
  if (posix_memalign(&block, BLOCK_ALIGNMENT, length) != 0) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  size_t done = 0;
  while (done < length) {
    ssize_t got = pread(fd, (unsigned char *)block + done, length - done, (off_t)done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) { /* the file is shorter than the mapping: a real mapping would fault there */
      free(block);
      errno = EIO;
      return MAP_FAILED;
    }
    done += (size_t)got;
  }
  return block;
}

int __wrap_munmap(void *address, size_t length) {
  /* Ours when the heap allocator owns it (a real mapping never is) and it has the mapping's size. */
  if (address && __sanitizer_get_ownership(address) && __sanitizer_get_allocated_size(address) == length) {
    free(address);
    return 0;
  }
  return __real_munmap(address, length);
}

const char *fuzz_memory_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("tightfit-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
      perror("fuzz_memory_file: memfd_create");
      abort();
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
    perror("fuzz_memory_file: write");
    abort();
  }
  return path;
}

const char *fuzz_scratch_folder(void) { return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"; }

void fuzz_heap_mapping_check(void) {
  static const uint8_t bytes[3] = {1, 2, 3};
  tf_mapped_file map;
  tf_status status = tf_mapped_file_open(fuzz_memory_file(bytes, sizeof(bytes)), &map);
  bool heap =
      !status && map.size == 3 && !__asan_address_is_poisoned(map.data + 2) && __asan_address_is_poisoned(map.data + 3);
  tf_status_free(status);
  tf_mapped_file_close(&map);
  if (!heap) {
    fprintf(stderr, "fuzz_heap_mapping_check: mapped files are not exact-size heap blocks; link the target with "
                    "tests/fuzz/heap_mapping.c and -Wl,--wrap=mmap,--wrap=munmap\n");
    abort();
  }
}

/* Linking this file into a target arms the check before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_heap_mapping_check();
  return 0;
}
