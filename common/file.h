/* Whole-file reading for the loaders. */
#ifndef TIGHTFIT_COMMON_FILE_H
#define TIGHTFIT_COMMON_FILE_H

#include <stddef.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads all of `path` into a new buffer (*data, *size); the caller frees *data. Errors name the path. */
tf_status tf_file_read(const char *path, void **data, size_t *size) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
