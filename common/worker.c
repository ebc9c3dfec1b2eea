#define _POSIX_C_SOURCE 200809L
#include "common/worker.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct tf_worker {
  tf_worker_job job;
  void *context;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  /* Under `lock`. posted: a job is queued or running; done: it finished with `result`. */
  bool posted, done, stop;
  int64_t ticket;
  tf_status result;
};

static void *run(void *argument) {
  tf_worker *worker = argument;
  pthread_mutex_lock(&worker->lock);
  for (;;) {
    while (!worker->stop && !(worker->posted && !worker->done))
      pthread_cond_wait(&worker->changed, &worker->lock);
    if (worker->stop)
      break;
    const int64_t ticket = worker->ticket;
    pthread_mutex_unlock(&worker->lock);
    tf_status result = worker->job(worker->context, ticket);
    pthread_mutex_lock(&worker->lock);
    worker->result = result;
    worker->done = true;
    pthread_cond_broadcast(&worker->changed);
  }
  pthread_mutex_unlock(&worker->lock);
  return NULL;
}

tf_status tf_worker_create(tf_worker_job job, void *context, tf_worker **out) {
  *out = NULL;
  tf_worker *worker = calloc(1, sizeof(*worker));
  if (!worker)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate a background worker");
  worker->job = job;
  worker->context = context;
  pthread_mutex_init(&worker->lock, NULL);
  pthread_cond_init(&worker->changed, NULL);
  /* The thread inherits the creator's signal mask: every signal blocked there, then restored here.
   * Not the faults a job's own instructions raise: a blocked SIGBUS from a read of a truncated
   * mapping would kill the process past any handler (the CLI's guard catches it on this thread). */
  sigset_t all, previous;
  sigfillset(&all);
  const int faults[] = {SIGBUS, SIGSEGV, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
    sigdelset(&all, faults[i]);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const int error = pthread_create(&worker->thread, NULL, run, worker);
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  if (error) {
    pthread_cond_destroy(&worker->changed);
    pthread_mutex_destroy(&worker->lock);
    free(worker);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot start a background thread: %s", strerror(error));
  }
  *out = worker;
  return NULL;
}

void tf_worker_post(tf_worker *worker, int64_t ticket) {
  pthread_mutex_lock(&worker->lock);
  worker->ticket = ticket;
  worker->posted = true;
  worker->done = false;
  worker->result = NULL;
  pthread_cond_broadcast(&worker->changed);
  pthread_mutex_unlock(&worker->lock);
}

bool tf_worker_busy(const tf_worker *worker) { return worker->posted; } /* only the owner writes it */

tf_status tf_worker_wait(tf_worker *worker, int64_t *ticket) {
  pthread_mutex_lock(&worker->lock);
  while (worker->posted && !worker->done)
    pthread_cond_wait(&worker->changed, &worker->lock);
  tf_status result = worker->posted ? worker->result : NULL;
  *ticket = worker->posted ? worker->ticket : -1;
  worker->posted = false;
  worker->result = NULL;
  pthread_mutex_unlock(&worker->lock);
  return result;
}

void tf_worker_destroy(tf_worker *worker) {
  if (!worker)
    return;
  int64_t ticket;
  tf_status_free(tf_worker_wait(worker, &ticket));
  pthread_mutex_lock(&worker->lock);
  worker->stop = true;
  pthread_cond_broadcast(&worker->changed);
  pthread_mutex_unlock(&worker->lock);
  pthread_join(worker->thread, NULL);
  pthread_cond_destroy(&worker->changed);
  pthread_mutex_destroy(&worker->lock);
  free(worker);
}
