/* A session's backend, for a tool that calls one of its optional operations the runtime itself has
 * no use for: a data-parallel job's device collectives (tf_backend_vtable.allreduce_sum on the
 * session's gradient buffers, tools/dist.c). */
#ifndef TIGHTFIT_RUNTIME_SESSION_BACKEND_H
#define TIGHTFIT_RUNTIME_SESSION_BACKEND_H

#include "backends/backend.h"
#include "tightfit/runtime.h"

/* The session's backend table; its state in *state and its regions (TF_REGION_COUNT, a buffer at
 * regions[b->region] + b->offset) in *regions. Borrowed: valid while the session lives. */
const tf_backend_vtable *tf_session_backend(tf_session *session, void **state, void *const **regions);

#endif
