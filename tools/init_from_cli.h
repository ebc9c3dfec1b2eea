/* `--init-from FILE [--init-map MAP]` of `train` and `run`: pretrained weights into a new session
 * (include/tightfit/init_from.h), checked finite, with one line saying what was loaded. */
#ifndef TIGHTFIT_TOOLS_INIT_FROM_CLI_H
#define TIGHTFIT_TOOLS_INIT_FROM_CLI_H

#include <stdio.h>

#include "tightfit/runtime.h"

/* Loads `file` into `session` through map `map` (a file or a builtin name; NULL: names as they are),
 * refuses non-finite values, and prints what it did to `log` (nothing when NULL). */
tf_status tf_tool_init_from(tf_session *session, const char *file, const char *map, FILE *log) TF_MUST_USE;

#endif
