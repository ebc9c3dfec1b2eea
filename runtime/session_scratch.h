/* A session's host scratch for reading its buffers in large pieces (runtime/finite.c): allocated once
 * by tf_session_create, so reads between steps allocate nothing. On a device backend every read is a
 * round trip (a CUDA stream drain, a Vulkan staging submission), so the piece size is what makes a
 * scan of every gradient cost milliseconds rather than seconds. */
#ifndef TIGHTFIT_RUNTIME_SESSION_SCRATCH_H
#define TIGHTFIT_RUNTIME_SESSION_SCRATCH_H

#include <stdint.h>

#include "tightfit/runtime.h"

/* The largest piece tf_session_create sizes the scratch for: 1 MiB (under the allocation probe's 2 MiB
 * line for "a second copy of a tensor" at create), or the largest buffer of the
 * parameters, gradients and optimizer state when that is smaller. */
#define TF_SESSION_SCRATCH_MAX_BYTES ((int64_t)1 << 20)

/* The scratch and its size in bytes (8-byte aligned); NULL and 0 when the session has none. */
void *tf_session_scratch(tf_session *session, int64_t *bytes);

#endif
