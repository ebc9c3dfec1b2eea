/* Data validation at feed open (issue 18): every value of a training data file is checked once,
 * before the first step, so that nothing trains on garbage: floating-point features must be
 * finite (one NaN in x.npy would make every weight NaN a few steps later), integer ids and labels
 * must lie in [0, limit) (an embedding row or a class that does not exist). Errors name the file,
 * the sample and element (or the token), the value and the bound.
 *
 * A file that passed is remembered in a cache folder, keyed by its real path, device, inode, size,
 * modification time, change time (ctime, which the kernel sets at every write and no user can put
 * back, unlike the mtime: touch -r) and the rule, so the next run on unchanged data skips the scan,
 * and a rewritten file is scanned again: $TIGHTFIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/tightfit, else $HOME/.cache/tightfit; TIGHTFIT_CACHE_DIR=off (or empty) turns the
 * cache off. The cache is best effort: a folder that cannot be written only costs the next scan. */
#ifndef TIGHTFIT_RUNTIME_DATA_CHECK_H
#define TIGHTFIT_RUNTIME_DATA_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/npy.h"
#include "tightfit/plan.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a data file must hold. */
typedef struct tf_data_rule {
  const char *tensor;     /* the plan buffer it feeds, for messages */
  bool stream;            /* a token stream: positions are tokens, not (sample, element) */
  int64_t per_sample;     /* elements per sample (per-sample layout) */
  int64_t limit;          /* integers must be in [0, limit); 0: no range check */
  const char *limit_what; /* what `limit` counts, for messages: "rows of the embedding table 'wte'" */
  bool has_ignore;        /* a label value exempt from the range (cross-entropy ignore_index) */
  int64_t ignore;
} tf_data_rule;

/* Checks every value of `file` against `rule` (floats finite, integers in range), or finds it in
 * the cache of files that passed. Returns an error naming the first bad value's position. */
tf_status tf_data_check_file(const tf_npy *file, const tf_data_rule *rule) TF_MUST_USE;

/* Checks `n` values of `dtype` at `data` against `rule` as tf_data_check_file does a file's (no
 * cache); errors name `source` (a file, or what the values are) and the first bad value's position. */
tf_status tf_data_check_values(const char *source, const void *data, tf_dtype dtype, int64_t n,
                               const tf_data_rule *rule) TF_MUST_USE;

/* The range plan buffer `id` must lie in as ids or labels: rule->limit the rows of the embedding
 * table that reads it, or the classes of the cross-entropy (its logits', or a fused loss head's
 * weight's, which would otherwise skip a label past them as ignored) with its ignored label; 0 when
 * none reads it. What the limit counts goes into `what` (size bytes), which rule->limit_what points at. */
void tf_data_rule_limits(const tf_plan *plan, int32_t id, tf_data_rule *rule, char *what, size_t size);

/* The position of element `index` of `file` for messages: "sample 12, element 3", "sample 12"
 * (one element per sample) or "token 50" (a stream). Writes at most `size` bytes to `text`. */
void tf_data_position(const tf_data_rule *rule, int64_t index, char *text, size_t size);

#ifdef __cplusplus
}
#endif
#endif
