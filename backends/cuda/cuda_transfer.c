/* Host <-> device copies for the CUDA backend.
 *
 * Input micro-batches (io region, once the plan is prepared) are double-buffered: the host data is
 * copied into a pinned mirror of the io region and sent with cudaMemcpyAsync on the copy stream,
 * which first waits until the steps that last read that io half have finished; the next run on that
 * half waits (on the device) until its upload has landed. So uploading micro-batch i + 1 overlaps
 * the steps of micro-batch i. Host data that is page-locked already (a feed staged in the session's
 * host memory, tf_feed_stage_in) is sent from where it is, and waited for: no host copy at all. Every other copy
 * (parameters at creation, checkpoints, reads of the loss) is synchronous: both streams drain first. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "backends/cuda/cuda_internal.h"

/* A micro-batch's copy into the pinned mirror is the host's share of each step: 38.5 MB of vit-b16
 * images at N = 64 took 10.4 ms of a 215 ms step on an H200's host (one thread, 3.7 GB/s). Copies of
 * at least PARALLEL_COPY_BYTES are split over up to PARALLEL_COPY_THREADS threads. */
enum { PARALLEL_COPY_BYTES = 8 << 20, PARALLEL_COPY_THREADS = 8 };

typedef struct copy_part {
  char *to;
  const char *from;
  size_t bytes;
} copy_part;

static void *copy_one_part(void *arg) {
  const copy_part *part = arg;
  memcpy(part->to, part->from, part->bytes);
  return NULL;
}

/* memcpy, on several threads when it is large and the host has the cores; the calling thread copies
 * the first part, and a thread that cannot be started leaves its part to the caller. */
static void copy_to_mirror(char *to, const char *from, size_t bytes) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores > PARALLEL_COPY_THREADS ? PARALLEL_COPY_THREADS : (int)(cores > 1 ? cores : 1);
  if (bytes < PARALLEL_COPY_BYTES || threads < 2) {
    memcpy(to, from, bytes);
    return;
  }
  copy_part parts[PARALLEL_COPY_THREADS];
  pthread_t ids[PARALLEL_COPY_THREADS];
  bool started[PARALLEL_COPY_THREADS] = {false};
  const size_t share = (bytes / (size_t)threads + 63) / 64 * 64;
  for (int i = 0; i < threads; i++) {
    const size_t begin = share * (size_t)i < bytes ? share * (size_t)i : bytes;
    const size_t end = begin + share < bytes ? begin + share : bytes;
    parts[i] = (copy_part){to + begin, from + begin, end - begin};
    if (i > 0 && parts[i].bytes > 0)
      started[i] = pthread_create(&ids[i], NULL, copy_one_part, &parts[i]) == 0;
  }
  copy_one_part(&parts[0]);
  for (int i = 1; i < threads; i++) {
    if (started[i])
      pthread_join(ids[i], NULL);
    else if (parts[i].bytes > 0)
      copy_one_part(&parts[i]);
  }
}

/* The io half the bytes [offset, offset + bytes) of the io region belong to, or -1. */
static int32_t io_half_of(const cuda_state *s, int64_t offset, int64_t bytes) {
  for (int32_t i = 0; i < s->n_io_buffers; i++) {
    const cuda_io_buffer *b = &s->io_buffers[i];
    if (offset >= b->offset && offset + bytes <= b->offset + b->bytes)
      return b->half;
  }
  return -1;
}

/* Whether `host` is page-locked memory CUDA knows (cudaHostAlloc'ed or registered). */
static bool is_page_locked(const void *host) {
  struct cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    cudaGetLastError(); /* an unknown pointer is not an error worth keeping */
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

static tf_status drain(cuda_state *s) {
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamSynchronize(s->copy), "waiting for uploads"));
  return tf_cuda_status(cudaStreamSynchronize(s->compute), "waiting for the steps");
}

tf_status tf_cuda_upload(void *state, void *region, int64_t offset, const void *host, int64_t bytes) {
  cuda_state *s = state;
  if (bytes <= 0)
    return NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  char *target = (char *)region + offset;
  const int32_t half = s->prepared && region == s->regions[TF_REGION_IO] ? io_half_of(s, offset, bytes) : -1;
  if (half >= 0 && is_page_locked(host)) {
    // From page-locked memory (a feed staged in the session's host memory): no copy into the mirror;
    // the caller may reuse its bytes on return, so the upload is waited for (the link's full speed).
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamWaitEvent(s->copy, s->consumed[half], 0), "ordering an upload"));
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaMemcpyAsync(target, host, (size_t)bytes, cudaMemcpyHostToDevice, s->copy),
                                      "uploading a micro-batch"));
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventRecord(s->uploaded[half], s->copy), "recording an upload"));
    return tf_cuda_status(cudaEventSynchronize(s->uploaded[half]), "waiting for an upload");
  }
  if (half >= 0 && s->io_mirror) {
    // The mirror's bytes may still be on their way to the device from the last upload of this half.
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventSynchronize(s->uploaded[half]), "waiting for an upload"));
    copy_to_mirror((char *)s->io_mirror + offset, host, (size_t)bytes);
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamWaitEvent(s->copy, s->consumed[half], 0), "ordering an upload"));
    TF_RETURN_IF_ERROR(
        tf_cuda_status(cudaMemcpyAsync(target, s->io_mirror + offset, (size_t)bytes, cudaMemcpyHostToDevice, s->copy),
                       "uploading a micro-batch"));
    return tf_cuda_status(cudaEventRecord(s->uploaded[half], s->copy), "recording an upload");
  }
  TF_RETURN_IF_ERROR(drain(s));
  TF_RETURN_IF_ERROR(
      tf_cuda_status(cudaMemcpyAsync(target, host, (size_t)bytes, cudaMemcpyHostToDevice, s->compute), "uploading"));
  return tf_cuda_status(cudaStreamSynchronize(s->compute), "uploading");
}

tf_status tf_cuda_download(void *state, void *region, int64_t offset, void *host, int64_t bytes) {
  cuda_state *s = state;
  if (bytes <= 0)
    return NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  TF_RETURN_IF_ERROR(drain(s));
  TF_RETURN_IF_ERROR(tf_cuda_status(
      cudaMemcpyAsync(host, (const char *)region + offset, (size_t)bytes, cudaMemcpyDeviceToHost, s->compute),
      "downloading"));
  return tf_cuda_status(cudaStreamSynchronize(s->compute), "downloading");
}

tf_status tf_cuda_synchronize(void *state) {
  cuda_state *s = state;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  TF_RETURN_IF_ERROR(drain(s));
  /* A kernel fault surfaces at the synchronisation after it; it is sticky, so say so. */
  return tf_cuda_status(cudaGetLastError(), "a step failed on the device");
}
