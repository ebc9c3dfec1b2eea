/* A checkpoint copied with some of its metadata changed: how the hostile-input tests plant bad
 * counters in a real checkpoint (runtime_io/test_hostile_files.c, and hostile/st_set_metadata.c for
 * the shell tests). */
#ifndef TIGHTFIT_TESTS_CHECKPOINT_REWRITE_H
#define TIGHTFIT_TESTS_CHECKPOINT_REWRITE_H

#include "tightfit/status.h"

/* Copies the safetensors file `from` to `to`, every tensor unchanged, with the metadata keys[i] set
 * to values[i] (NULL: removed), i < n; the other metadata as it was. */
tf_status tf_checkpoint_rewrite(const char *from, const char *to, const char *const *keys, const char *const *values,
                                int n);

#endif
