/* Data validation (data_check.h): at feed open a scan of every value, and a cache of files that
 * passed; the same scan of a batch written through the session (tf_session_check_input). The scans
 * go in blocks: a branch-free pass over a block (which the compiler vectorises) says whether it
 * holds a bad value, and only then a second pass finds the first one. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "runtime/data_check.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/atomic_file.h"
#include "common/file.h"
#include "core/linear_loss.h"
#include "tightfit/runtime.h"

#define SCAN_BLOCK 4096
#define CACHE_VERSION "tightfit data check 2"

void tf_data_position(const tf_data_rule *rule, int64_t index, char *text, size_t size) {
  if (rule->stream)
    snprintf(text, size, "token %" PRId64, index);
  else if (rule->per_sample <= 1)
    snprintf(text, size, "sample %" PRId64, index);
  else
    snprintf(text, size, "sample %" PRId64 ", element %" PRId64, index / rule->per_sample, index % rule->per_sample);
}

/* ---- the scans: each returns the index of the first bad element, or -1 ---- */

static int64_t first_nonfinite_f32(const uint32_t *bits, int64_t n) {
  for (int64_t start = 0; start < n; start += SCAN_BLOCK) {
    const int64_t end = n - start < SCAN_BLOCK ? n : start + SCAN_BLOCK;
    uint32_t any = 0;
    for (int64_t i = start; i < end; i++)
      any |= (bits[i] & 0x7F800000u) == 0x7F800000u;
    for (int64_t i = start; any && i < end; i++)
      if ((bits[i] & 0x7F800000u) == 0x7F800000u)
        return i;
  }
  return -1;
}

/* f16 (exponent 0x7C00) and bf16 (0x7F80): all exponent bits set is an infinity or a NaN. */
static int64_t first_nonfinite_16(const uint16_t *bits, int64_t n, uint16_t exponent) {
  for (int64_t start = 0; start < n; start += SCAN_BLOCK) {
    const int64_t end = n - start < SCAN_BLOCK ? n : start + SCAN_BLOCK;
    uint32_t any = 0;
    for (int64_t i = start; i < end; i++)
      any |= (bits[i] & exponent) == exponent;
    for (int64_t i = start; any && i < end; i++)
      if ((bits[i] & exponent) == exponent)
        return i;
  }
  return -1;
}

/* Outside [0, limit) and not the ignored label; the unsigned compare catches negatives too. */
#define OUT_OF_RANGE(v, limit, rule)                                                                                   \
  ((uint64_t)(v) >= (uint64_t)(limit) && !((rule)->has_ignore && (v) == (rule)->ignore))

/* first_out_of_range_i32 and _i64: the index of the first value OUT_OF_RANGE, or -1; blocks of
 * SCAN_BLOCK are tested whole first (a loop without an exit, which vectorises). */
#define FIRST_OUT_OF_RANGE(suffix, type)                                                                               \
  static int64_t first_out_of_range_##suffix(const type *values, int64_t n, const tf_data_rule *rule) {                \
    const int64_t limit = rule->limit;                                                                                 \
    for (int64_t start = 0; start < n; start += SCAN_BLOCK) {                                                          \
      const int64_t end = n - start < SCAN_BLOCK ? n : start + SCAN_BLOCK;                                             \
      uint32_t any = 0;                                                                                                \
      for (int64_t i = start; i < end; i++)                                                                            \
        any |= OUT_OF_RANGE((int64_t)values[i], limit, rule);                                                          \
      for (int64_t i = start; any && i < end; i++)                                                                     \
        if (OUT_OF_RANGE((int64_t)values[i], limit, rule))                                                             \
          return i;                                                                                                    \
    }                                                                                                                  \
    return -1;                                                                                                         \
  }
FIRST_OUT_OF_RANGE(i32, int32_t)
FIRST_OUT_OF_RANGE(i64, int64_t)
#undef FIRST_OUT_OF_RANGE

/* "nan", "inf" or "-inf" for the non-finite value at `index` of `data` (of `dtype`). */
static const char *nonfinite_name(const void *data, tf_dtype dtype, int64_t index) {
  bool nan, negative;
  if (dtype == TF_F32) {
    uint32_t bits = ((const uint32_t *)data)[index];
    nan = (bits & 0x007FFFFFu) != 0;
    negative = bits >> 31;
  } else {
    uint16_t bits = ((const uint16_t *)data)[index];
    uint16_t mantissa = dtype == TF_F16 ? 0x03FF : 0x007F;
    nan = (bits & mantissa) != 0;
    negative = bits >> 15;
  }
  return nan ? "nan" : negative ? "-inf" : "inf";
}

tf_status tf_data_check_values(const char *source, const void *data, tf_dtype dtype, int64_t n,
                               const tf_data_rule *rule) {
  char where[96];
  int64_t bad = -1;
  if (dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16) {
    bad =
        dtype == TF_F32 ? first_nonfinite_f32(data, n) : first_nonfinite_16(data, n, dtype == TF_F16 ? 0x7C00 : 0x7F80);
    if (bad < 0)
      return NULL;
    tf_data_position(rule, bad, where, sizeof(where));
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: %s is %s: '%s' takes finite values only (one non-finite input makes every weight NaN "
                         "within a few steps); clean the data or drop that sample",
                         source, where, nonfinite_name(data, dtype, bad), rule->tensor);
  }
  if (rule->limit <= 0 || (dtype != TF_I32 && dtype != TF_I64))
    return NULL;
  bad = dtype == TF_I32 ? first_out_of_range_i32(data, n, rule) : first_out_of_range_i64(data, n, rule);
  if (bad < 0)
    return NULL;
  int64_t value = dtype == TF_I32 ? ((const int32_t *)data)[bad] : ((const int64_t *)data)[bad];
  tf_data_position(rule, bad, where, sizeof(where));
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s is %" PRId64 ", outside [0, %" PRId64 ") for '%s' (%s)", source,
                       where, value, rule->limit, rule->tensor, rule->limit_what);
}

static tf_status scan(const tf_npy *file, const tf_data_rule *rule) {
  return tf_data_check_values(tf_npy_path(file), tf_npy_data(file), tf_npy_dtype(file), tf_npy_count(file), rule);
}

void tf_data_rule_limits(const tf_plan *plan, int32_t id, tf_data_rule *rule, char *what, size_t size) {
  memset(rule, 0, sizeof(*rule));
  rule->limit_what = what;
  what[0] = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op == TF_OP_EMBEDDING && step->inputs[0] == id) {
      const tf_plan_buffer *table = &plan->buffers[step->inputs[1]];
      rule->limit = table->shape[0];
      snprintf(what, size, "the rows of the embedding table '%s'", table->name);
    }
    if (step->op == TF_OP_CROSS_ENTROPY && step->inputs[1] == id) {
      const tf_plan_buffer *logits = &plan->buffers[step->inputs[0]];
      rule->limit = logits->shape[logits->rank - 1];
      snprintf(what, size, "the classes of the logits '%s'", logits->name);
      rule->ignore = step->attrs.u.cross_entropy.ignore_index;
      rule->has_ignore = true;
    }
    if (tf_linear_loss_op(step->op) && step->inputs[2] == id) {
      const tf_plan_buffer *weight = &plan->buffers[step->inputs[1]];
      rule->limit = weight->shape[step->attrs.u.cross_entropy.transpose_weight ? 0 : 1];
      snprintf(what, size, "the classes of the fused loss head's weight '%s'", weight->name);
      rule->ignore = step->attrs.u.cross_entropy.ignore_index;
      rule->has_ignore = true;
    }
  }
}

tf_status tf_session_check_input(const tf_session *session, const char *name, const void *data, int64_t bytes) {
  const tf_plan *plan = tf_session_plan(session);
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || strcmp(b->name, name) != 0)
      continue;
    if (bytes != b->bytes)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "'%s' holds %" PRId64 " bytes, not %" PRId64, name, b->bytes,
                           bytes);
    char what[192], source[300];
    tf_data_rule rule;
    tf_data_rule_limits(plan, id, &rule, what, sizeof(what));
    rule.tensor = b->name;
    rule.per_sample = 1;
    for (int32_t d = b->unbatched ? 0 : 1; d < b->rank; d++)
      rule.per_sample *= b->shape[d];
    snprintf(source, sizeof(source), "the data written to '%s'", name);
    return tf_data_check_values(source, data, b->dtype, b->bytes / tf_dtype_size(b->dtype), &rule);
  }
  return NULL;
}

/* ---- the cache of files that passed ---- */

/* The cache folder (see data_check.h) into `dir`; false when the cache is off or has no home. */
static bool cache_dir(char *dir, size_t size) {
  const char *set = getenv("TIGHTFIT_CACHE_DIR");
  if (set)
    return *set && strcmp(set, "off") != 0 && snprintf(dir, size, "%s", set) < (int)size;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg == '/')
    return snprintf(dir, size, "%s/tightfit", xdg) < (int)size;
  return home && *home && snprintf(dir, size, "%s/.cache/tightfit", home) < (int)size;
}

/* mkdir -p, best effort. */
static void make_folders(const char *dir) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
    return;
  for (char *slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
    if (slash)
      *slash = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return;
    if (!slash)
      return;
    *slash = '/';
  }
}

/* The entry that identifies this file's contents and the rule: its text (the key) and the cache
 * file's name (a hash of the key). False when the file cannot be identified. The key holds the
 * inode and its change time besides the size and modification time: touch -r puts an old mtime back
 * on a rewritten file (issue 49: a NaN went into training that way), but the kernel sets the ctime
 * to the current time at every write, truncation, rename or utimensat, and no call lets a user set
 * it. Hashing the content instead would read every byte, which costs as much as the scan the cache
 * exists to skip. */
static bool cache_entry(const tf_npy *file, const tf_data_rule *rule, char *key, size_t key_size, char *path,
                        size_t path_size) {
  char dir[PATH_MAX], real[PATH_MAX];
  struct stat st;
  if (!cache_dir(dir, sizeof(dir)) || !realpath(tf_npy_path(file), real) || stat(real, &st) != 0)
    return false;
  int length = snprintf(
      key, key_size,
      "%s\n%s\ndevice %llu inode %llu size %lld mtime %lld.%09ld ctime %lld.%09ld\nstream %d per_sample %" PRId64
      " limit %" PRId64 " ignore %d %" PRId64 "\n",
      CACHE_VERSION, real, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (long long)st.st_size,
      (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, (long)st.st_ctim.tv_nsec,
      rule->stream, rule->per_sample, rule->limit, rule->has_ignore, rule->ignore);
  if (length < 0 || length >= (int)key_size)
    return false;
  uint64_t hash = 1469598103934665603ull; /* FNV-1a */
  for (const char *c = key; *c; c++)
    hash = (hash ^ (unsigned char)*c) * 1099511628211ull;
  return snprintf(path, path_size, "%s/data-%016" PRIx64 ".ok", dir, hash) < (int)path_size;
}

static bool cache_holds(const char *path, const char *key) {
  void *data = NULL;
  size_t size = 0;
  tf_status status = tf_file_read_bounded(path, 2 * PATH_MAX + 512, "data check cache", &data, &size);
  bool hit = status == NULL && size == strlen(key) && memcmp(data, key, size) == 0;
  tf_status_free(status);
  free(data);
  return hit;
}

tf_status tf_data_check_file(const tf_npy *file, const tf_data_rule *rule) {
  char key[2 * PATH_MAX + 512], path[PATH_MAX + 64];
  bool cached = cache_entry(file, rule, key, sizeof(key), path, sizeof(path));
  if (cached && cache_holds(path, key))
    return NULL;
  TF_RETURN_IF_ERROR(scan(file, rule));
  if (cached) {
    char dir[PATH_MAX];
    if (cache_dir(dir, sizeof(dir)))
      make_folders(dir);
    tf_status_free(tf_atomic_file_write_all(path, key, strlen(key)));
  }
  return NULL;
}
