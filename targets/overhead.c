/* A plan's device overhead from its target's model: the fixed parts, the rounding of each region
 * to the allocation granularity, and the memory of the CUDA graphs a backend captures. */
#include <stdio.h>
#include <string.h>

#include "tightfit/target.h"

static int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

static int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}

/* The bytes the allocator adds to the regions when it rounds each up to `granularity`. */
static int64_t rounding_bytes(const int64_t region_bytes[TF_REGION_COUNT], int64_t granularity) {
  int64_t extra = 0;
  if (granularity <= 1)
    return 0;
  for (int r = 0; r < TF_REGION_COUNT; r++) {
    int64_t bytes = region_bytes[r];
    if (bytes <= 0)
      continue;
    int64_t remainder = bytes % granularity;
    if (remainder)
      extra = saturating_add(extra, granularity - remainder);
  }
  return extra;
}

static void append(tf_device_overhead *out, const char *name, int64_t bytes, const char *source) {
  if (out->n_parts >= TF_MAX_OVERHEAD_PARTS)
    return;
  tf_overhead_part *part = &out->parts[out->n_parts++];
  snprintf(part->name, sizeof(part->name), "%s", name);
  part->bytes = bytes;
  snprintf(part->source, sizeof(part->source), "%s", source);
}

void tf_target_plan_collectives(const tf_target *target, int32_t ranks, tf_device_overhead *out) {
  if (ranks > 1 && target->kind == TF_TARGET_CUDA)
    append(out, "collectives", TF_TARGET_COLLECTIVES_BYTES,
           "default, not measured: NCCL's communicator (its buffers, NCCL_BUFFSIZE 4 MiB a channel, connection "
           "and protocol over up to 32 channels, and its kernels), whether NCCL or MPI sums at run time");
}

void tf_target_plan_overhead(const tf_target *target, const int64_t region_bytes[TF_REGION_COUNT], int64_t graph_steps,
                             tf_device_overhead *out) {
  const tf_overhead_model *m = &target->overhead;
  memset(out, 0, sizeof(*out));
  for (int32_t i = 0; i < m->n_fixed; i++)
    append(out, m->fixed[i].name, m->fixed[i].bytes, m->fixed[i].source);
  int64_t rounding = rounding_bytes(region_bytes, m->granularity);
  if (m->granularity > 1)
    append(out, "rounding", rounding, m->granularity_source);
  if (m->graph_base_bytes > 0 || m->graph_step_bytes > 0)
    append(out, "graphs", saturating_add(m->graph_base_bytes, saturating_mul(m->graph_step_bytes, graph_steps)),
           m->graph_source);
}
