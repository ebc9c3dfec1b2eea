/* tf_status: heap-allocated error values. The out-of-memory status is a shared constant so that
 * running out of memory while reporting an error still yields a valid status. */
#include "tightfit/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tf_status_s {
  tf_code code;
  char *message;
};

static char oom_message[] = "out of host memory while reporting an error";
static struct tf_status_s oom_status = {TF_ERR_OUT_OF_MEMORY, oom_message};

static char *vformat(const char *fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int length = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (length < 0)
    return NULL;
  char *text = malloc((size_t)length + 1);
  if (text)
    vsnprintf(text, (size_t)length + 1, fmt, args);
  return text;
}

tf_status tf_status_new(tf_code code, const char *fmt, ...) {
  if (code == TF_OK)
    return NULL;
  tf_status status = malloc(sizeof(*status));
  if (!status)
    return &oom_status;
  va_list args;
  va_start(args, fmt);
  status->message = vformat(fmt, args);
  va_end(args);
  if (!status->message) {
    free(status);
    return &oom_status;
  }
  status->code = code;
  return status;
}

tf_status tf_status_prefix(tf_status status, const char *fmt, ...) {
  if (status == NULL || status == &oom_status)
    return status;
  va_list args;
  va_start(args, fmt);
  char *context = vformat(fmt, args);
  va_end(args);
  if (!context)
    return status;
  size_t total = strlen(context) + 2 + strlen(status->message) + 1;
  char *joined = malloc(total);
  if (joined) {
    snprintf(joined, total, "%s: %s", context, status->message);
    free(status->message);
    status->message = joined;
  }
  free(context);
  return status;
}

tf_code tf_status_code(const struct tf_status_s *status) { return status ? status->code : TF_OK; }

const char *tf_status_message(const struct tf_status_s *status) { return status ? status->message : ""; }

const char *tf_code_name(tf_code code) {
  switch (code) {
  case TF_OK: return "ok";
  case TF_ERR_INVALID_ARGUMENT: return "invalid argument";
  case TF_ERR_INVALID_INPUT: return "invalid input";
  case TF_ERR_SHAPE: return "shape error";
  case TF_ERR_IO: return "i/o error";
  case TF_ERR_OUT_OF_MEMORY: return "out of memory";
  case TF_ERR_UNSUPPORTED: return "unsupported";
  case TF_ERR_DOES_NOT_FIT: return "does not fit";
  case TF_ERR_BACKEND: return "backend error";
  case TF_ERR_INTERNAL: return "internal error";
  }
  return "unknown error";
}

void tf_status_free(tf_status status) {
  if (status == NULL || status == &oom_status)
    return;
  free(status->message);
  free(status);
}
