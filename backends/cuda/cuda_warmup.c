/* The warm-up: prepare() (cuda_graphs.c) runs every step of the plan once, eagerly, before it
 * captures anything, so that every first-launch cost happens inside prepare(), where the session's
 * device memory is measured, and outside stream capture:
 *   - CUDA loads kernel modules lazily (CUDA_MODULE_LOADING=LAZY is the default since CUDA 12.2):
 *     the first launch of a kernel loads its module, which takes device memory;
 *   - cuBLAS sets itself up and picks (and loads) its kernels at the first call of each shape;
 *   - a kernel that fails on this device fails here, at its step, named with its operands
 *     (tf_cuda_step_run_checked), instead of inside an anonymous graph replay later.
 * Each step runs on the compute stream (io half 0: the other half runs the same kernels on the
 * same shapes) and is waited for before the next one starts.
 *
 * Running the steps has side effects the user must never see: the optimizer steps update the
 * parameters and optimizer state in place, accumulate and zero write the gradients, every step
 * writes the arena. tf_session_create() has uploaded the initial parameters before prepare(), and
 * a plan may read an arena buffer in one block that the other block wrote. So the warm-up copies
 * every region to the host first and writes every byte back afterwards: when prepare() returns,
 * the device holds exactly what it held before, whatever the steps wrote. This needs no knowledge
 * of which step writes what (restoring only what the op table says is written would trust every
 * kernel to write nothing else). It relies only on facts that hold for every run anyway: a verified
 * plan's operands lie inside its regions, and the steps keep no other device state (the run
 * values are only read; the RNG is counter-based; cuBLAS keeps no results between calls).
 *
 * Host memory: the copy is taken in chunks of 16 MiB; a chunk whose bytes are all zero is not kept
 * (it is restored with a memset), so the copy holds the regions' non-zero bytes rounded up to
 * chunks, plus one staging chunk. At session creation only the parameters and constants are
 * non-zero (alloc_region zeroes every region), so that is about the parameters region's bytes,
 * freed before prepare() returns; tf_cuda_memory.warmup_host_bytes records the peak. Time: one
 * device-to-host read of every region and one write of the kept chunks. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

enum { CHUNK_BYTES = 16 << 20 };

typedef struct region_copy {
  int64_t n_chunks;
  unsigned char **chunks; /* per chunk: its bytes on the host, NULL when they were all zero */
} region_copy;

typedef struct regions_copy {
  region_copy regions[TF_REGION_COUNT];
  unsigned char *staging;
  int64_t host_bytes, peak_host_bytes;
} regions_copy;

static bool all_zero(const unsigned char *bytes, int64_t n) {
  // Each byte equals the next and the first is 0: memcmp is vectorised, a byte loop is not.
  return n <= 0 || (bytes[0] == 0 && memcmp(bytes, bytes + 1, (size_t)(n - 1)) == 0);
}

static int64_t chunk_bytes(int64_t region_bytes, int64_t chunk) {
  const int64_t left = region_bytes - chunk * CHUNK_BYTES;
  return left < CHUNK_BYTES ? left : CHUNK_BYTES;
}

/* Reads region r into copy->regions[r], keeping the chunks that are not all zero. */
static tf_status copy_region(cuda_state *s, int r, regions_copy *copy) {
  const int64_t bytes = s->plan->region_bytes[r];
  region_copy *region = &copy->regions[r];
  region->n_chunks = (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
  region->chunks = calloc((size_t)region->n_chunks, sizeof(unsigned char *));
  if (!region->chunks)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot list the chunks of the %s region",
                         tf_region_name((tf_region)r));
  for (int64_t c = 0; c < region->n_chunks; c++) {
    if (!copy->staging) {
      copy->staging = malloc(CHUNK_BYTES);
      if (!copy->staging)
        return tf_status_new(TF_ERR_OUT_OF_MEMORY,
                             "cuda backend: the warm-up's host copy of the regions ran out of host memory after "
                             "%lld bytes (at the %s region's byte %lld)",
                             (long long)copy->host_bytes, tf_region_name((tf_region)r), (long long)(c * CHUNK_BYTES));
      copy->host_bytes += CHUNK_BYTES;
    }
    const int64_t n = chunk_bytes(bytes, c);
    const char *device = (const char *)s->regions[r] + c * CHUNK_BYTES;
    TF_RETURN_IF_ERROR(tf_cuda_status(
        cudaMemcpyAsync(copy->staging, device, (size_t)n, cudaMemcpyDeviceToHost, s->compute), "copying a region"));
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamSynchronize(s->compute), "copying a region"));
    if (copy->host_bytes > copy->peak_host_bytes)
      copy->peak_host_bytes = copy->host_bytes;
    if (all_zero(copy->staging, n))
      continue;
    region->chunks[c] = copy->staging; /* kept: the next chunk gets a new staging buffer */
    copy->staging = NULL;
  }
  return NULL;
}

/* Copies every region to the host; in-flight uploads land first. */
static tf_status copy_regions(cuda_state *s, regions_copy *copy) {
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamSynchronize(s->copy), "waiting for uploads"));
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamSynchronize(s->compute), "waiting for the steps"));
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (s->regions[r] && s->plan->region_bytes[r] > 0)
      TF_RETURN_IF_ERROR(copy_region(s, r, copy));
  return NULL;
}

/* Writes region r back: kept chunks copied, each run of zero chunks one memset. */
static tf_status restore_region(cuda_state *s, int r, const region_copy *region) {
  const int64_t bytes = s->plan->region_bytes[r];
  char *base = s->regions[r];
  for (int64_t c = 0; c < region->n_chunks;) {
    if (region->chunks[c]) {
      TF_RETURN_IF_ERROR(
          tf_cuda_status(cudaMemcpyAsync(base + c * CHUNK_BYTES, region->chunks[c], (size_t)chunk_bytes(bytes, c),
                                         cudaMemcpyHostToDevice, s->compute),
                         "restoring a region after the warm-up"));
      c++;
      continue;
    }
    int64_t end = c;
    while (end < region->n_chunks && !region->chunks[end])
      end++;
    const int64_t zero_bytes = (end - c - 1) * (int64_t)CHUNK_BYTES + chunk_bytes(bytes, end - 1);
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaMemsetAsync(base + c * CHUNK_BYTES, 0, (size_t)zero_bytes, s->compute),
                                      "restoring a region after the warm-up"));
    c = end;
  }
  return NULL;
}

static tf_status restore_regions(cuda_state *s, const regions_copy *copy) {
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (copy->regions[r].chunks)
      TF_RETURN_IF_ERROR(restore_region(s, r, &copy->regions[r]));
  // The host chunks are freed after this: every copy from them must have finished.
  return tf_cuda_status(cudaStreamSynchronize(s->compute), "restoring the regions after the warm-up");
}

static void free_copy(regions_copy *copy) {
  for (int r = 0; r < TF_REGION_COUNT; r++) {
    for (int64_t c = 0; copy->regions[r].chunks && c < copy->regions[r].n_chunks; c++)
      free(copy->regions[r].chunks[c]);
    free(copy->regions[r].chunks);
  }
  free(copy->staging);
  memset(copy, 0, sizeof(*copy));
}

/* Runs step i, checked. When it is the launch step of a fused group (cuda_fused.c) and the fused
 * launch fails with an error that leaves the context usable, the group is turned off, keeping
 * the error as its reason, and its member steps run as compiled instead (those before i too:
 * their kernels load here, and what they compute is restored away with the rest). */
static tf_status run_step(cuda_state *s, int32_t i) {
  int32_t group = -1;
  const bool leads = tf_cuda_fused_leads(s, i, &group);
  tf_status status = tf_cuda_step_run_checked(s, i, 0);
  if (!status || !leads)
    return status;
  cudaGetLastError();
  if (cudaStreamSynchronize(s->compute) != cudaSuccess || cudaGetLastError() != cudaSuccess)
    return status; /* a sticky error: the context is lost, report the step */
  char why[256];
  snprintf(why, sizeof(why), "its launch failed in the warm-up: %s", tf_status_message(status));
  tf_status_free(status);
  tf_cuda_fused_disable(s, group, why);
  const tf_cuda_fusion *f = &s->fused[group].group;
  if (f->kind == TF_CUDA_FUSION_OPTIMIZER) {
    for (int32_t k = f->first; k <= f->last; k++)
      TF_RETURN_IF_ERROR(tf_cuda_step_run_checked(s, k, 0));
    return NULL;
  }
  for (int32_t k = 0; k < f->n_members; k++)
    TF_RETURN_IF_ERROR(tf_cuda_step_run_checked(s, f->members[k], 0));
  return NULL;
}

tf_status tf_cuda_warm_up(cuda_state *s) {
  regions_copy copy;
  memset(&copy, 0, sizeof(copy));
  tf_status status = copy_regions(s, &copy);
  const bool copied = status == NULL;
  // copy_regions waited for both streams, so a fault of ours would have failed it; what cudaGetLastError
  // still holds is a non-sticky error of an earlier call that its caller tolerated, which the first
  // step's check (tf_cuda_step_run_checked) must not blame on that step.
  if (copied)
    cudaGetLastError();
  for (int32_t i = 0; !status && i < s->n_steps; i++)
    status = run_step(s, i);
  if (copied) {
    // Restored after a failed step too, when the device still takes copies: a failed prepare()
    // should leave the regions as it found them wherever it can.
    tf_status restored = restore_regions(s, &copy);
    if (status)
      tf_status_free(restored);
    else
      status = restored;
  }
  s->memory.warmup_host_bytes = copy.peak_host_bytes;
  free_copy(&copy);
  return status ? tf_status_prefix(status, "warming up (every step run once before any capture)") : NULL;
}
