/* One background thread that runs one job at a time: the data feed prepares the next micro-batch
 * on it while the current step runs. The owner posts a job with a ticket (what to do, e.g. the
 * micro-batch's position), goes on, and later waits for it; post, wait and destroy come from one
 * owner thread. The thread blocks every signal but the faults of its own instructions (SIGBUS,
 * SIGSEGV, SIGFPE, SIGILL), so interrupts and alarms reach the owner's threads while a guard for a
 * bus error (tools/bus_guard.h) can still catch one on this thread. Nothing is allocated after
 * create. */
#ifndef TIGHTFIT_COMMON_WORKER_H
#define TIGHTFIT_COMMON_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_worker tf_worker;

/* The job: runs on the worker's thread with the context given to create and a posted ticket. */
typedef tf_status (*tf_worker_job)(void *context, int64_t ticket);

/* Starts the thread; *out is released by tf_worker_destroy. */
tf_status tf_worker_create(tf_worker_job job, void *context, tf_worker **out) TF_MUST_USE;

/* Waits for a posted job to finish (its status freed), stops and joins the thread. NULL is allowed. */
void tf_worker_destroy(tf_worker *worker);

/* Starts the job with `ticket`; the worker must be idle (no job posted since the last wait). */
void tf_worker_post(tf_worker *worker, int64_t ticket);

/* True when a job was posted and not yet waited for. */
bool tf_worker_busy(const tf_worker *worker);

/* Waits for the posted job and returns its status (the caller owns it) with its ticket in *ticket. */
tf_status tf_worker_wait(tf_worker *worker, int64_t *ticket) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
