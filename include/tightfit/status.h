/* tightfit status values: every fallible call returns one.
 *
 * A tf_status is NULL on success. On failure it points to a heap object holding an error code
 * and a formatted message that names the file, node, op and numbers involved. The caller owns a
 * non-NULL status and releases it with tf_status_free(). */
#ifndef TIGHTFIT_STATUS_H
#define TIGHTFIT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_code {
  TF_OK = 0,
  TF_ERR_INVALID_ARGUMENT, /* a caller passed a bad argument (API misuse, bad CLI usage) */
  TF_ERR_INVALID_INPUT,    /* a file or graph is malformed or semantically wrong */
  TF_ERR_SHAPE,            /* shapes or dtypes do not fit an op */
  TF_ERR_IO,               /* a file could not be read or written */
  TF_ERR_OUT_OF_MEMORY,    /* host memory ran out */
  TF_ERR_UNSUPPORTED,      /* valid, but not supported by this build or target */
  TF_ERR_DOES_NOT_FIT,     /* a plan does not fit its memory budget */
  TF_ERR_BACKEND,          /* a device or driver call failed */
  TF_ERR_INTERNAL          /* a bug in tightfit */
} tf_code;

typedef struct tf_status_s *tf_status;

#if defined(__GNUC__) || defined(__clang__)
#define TF_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define TF_MUST_USE __attribute__((warn_unused_result))
#else
#define TF_PRINTF(fmt_index, first_arg)
#define TF_MUST_USE
#endif

/* Returns a new status with `code` and a printf-formatted message; never NULL for code != TF_OK
 * (on allocation failure it returns a shared, immutable out-of-memory status). */
tf_status tf_status_new(tf_code code, const char *fmt, ...) TF_PRINTF(2, 3);

/* Prepends "context: " to the message of `status` and returns it; a NULL status stays NULL. */
tf_status tf_status_prefix(tf_status status, const char *fmt, ...) TF_PRINTF(2, 3);

/* Returns the code of `status`; TF_OK for NULL. */
tf_code tf_status_code(const struct tf_status_s *status);

/* Returns the message of `status` (borrowed, valid until freed); "" for NULL. */
const char *tf_status_message(const struct tf_status_s *status);

/* Returns a short stable name for a code, e.g. "invalid input". */
const char *tf_code_name(tf_code code);

/* Releases `status`; NULL is allowed. */
void tf_status_free(tf_status status);

/* Returns from the enclosing function with the status of `expr` if it failed. */
#define TF_RETURN_IF_ERROR(expr)                                                                                       \
  do {                                                                                                                 \
    tf_status tf_status_tmp_ = (expr);                                                                                 \
    if (tf_status_tmp_ != NULL)                                                                                        \
      return tf_status_tmp_;                                                                                           \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
