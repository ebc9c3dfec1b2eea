/* Shared by the libFuzzer targets (built only with -DTIGHTFIT_FUZZ=ON, clang, ASan + UBSan; see
 * docs/fuzzing.md). Every reader must see its input in a heap block of exactly the input's size, so
 * that ASan reports a read one byte past the end. */
#ifndef TIGHTFIT_TESTS_FUZZ_SUPPORT_H
#define TIGHTFIT_TESTS_FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tightfit/graph.h"

/* The libFuzzer entry points: each target defines TestOneInput; heap_mapping.c defines Initialize
 * for the targets it is linked into. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd copy of data[0..size) with nothing after it (the caller frees it). libFuzzer already
 * hands the target such a copy; copying again keeps the guarantee under any other driver (AFL++,
 * a replay main) that passes a larger or shared buffer. */
static inline unsigned char *fuzz_heap_copy(const uint8_t *data, size_t size) {
  unsigned char *copy = malloc(size);
  if (!copy && size)
    abort();
  if (size)
    memcpy(copy, data, size);
  return copy;
}

/* Reads every byte of data[0..bytes), so that ASan sees a view that strays outside its memory. */
static inline void fuzz_touch(const void *data, size_t bytes) {
  volatile unsigned char sink = 0;
  for (size_t i = 0; i < bytes; i++)
    sink ^= ((const unsigned char *)data)[i];
  (void)sink;
}

/* The end of a graph target's input: a graph that loaded or imported (`status` NULL) must also
 * survive serialising again, binding N=3 and inferring its shapes (their errors are fine, crashes
 * are not); then `status` and `g` are freed. */
static inline void fuzz_graph_done(tf_status status, tf_graph *g) {
  if (!status) {
    void *bytes = NULL;
    size_t n = 0;
    tf_status_free(tf_graph_serialize(g, &bytes, &n));
    free(bytes);
    tf_status_free(tf_graph_bind_list(g, "N=3"));
    tf_status_free(tf_graph_infer_shapes(g));
  }
  tf_status_free(status);
  tf_graph_destroy(g);
}

/* The readers of .npy and safetensors take a path and mmap it, where ASan cannot see an over-read.
 * heap_mapping.c, linked with -Wl,--wrap=mmap,--wrap=munmap, turns every read-only private mapping
 * of a whole file into an exact-size heap block (freed by munmap), so a reader's stray read past the
 * end of the file, and a mapping it never releases, are reported like any heap bug. */

/* Puts data[0..size) in an anonymous in-memory file (memfd), created on the first call and reused,
 * and returns its path "/proc/self/fd/N" (static storage). Aborts if the kernel refuses. */
const char *fuzz_memory_file(const uint8_t *data, size_t size);

/* A folder on tmpfs when there is one (/dev/shm), else /tmp: where targets write round-trip copies,
 * so the writers' fsync costs nothing. */
const char *fuzz_scratch_folder(void);

/* Aborts with a message unless the mmap wrapper is linked in and effective for the library's
 * mapped-file reader: heap_mapping.c's LLVMFuzzerInitialize calls it, so the ASan guarantee cannot
 * rot silently. */
void fuzz_heap_mapping_check(void);

#endif
