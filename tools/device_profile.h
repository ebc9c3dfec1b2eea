/* Device profiles (issue 42): a card's device overhead and memory, measured once on the machine that
 * has it (`tightfit devices --calibrate cuda:0 -o card.profile`) and used anywhere after, a CI runner
 * without the card included (`tightfit check model.tfg --device-profile card.profile`). A text file,
 * one fact a line, every figure with where it came from (docs/memory.md, "Device profiles"). */
#ifndef TIGHTFIT_TOOLS_DEVICE_PROFILE_H
#define TIGHTFIT_TOOLS_DEVICE_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/backend.h"
#include "tightfit/status.h"
#include "tightfit/target.h"

#define TF_PROFILE_MAX_PARTS (TF_MAX_OVERHEAD_PARTS - 2)

typedef struct tf_device_profile {
  tf_target_kind kind;  /* cuda or vulkan */
  char device[32];      /* "cuda:0": where it was measured */
  char name[128];       /* the card as the driver names it */
  char measured_at[32]; /* UTC, ISO 8601 */
  int64_t memory_bytes; /* the card's memory as it reports it to a process: the default budget */
  int64_t free_bytes;   /* free when it was measured (-1: unknown) */
  int64_t granularity;  /* regions round up to this (-1: the target's default) */
  int32_t n_parts;      /* measured fixed overhead parts, replacing the target's defaults by name */
  tf_overhead_part parts[TF_PROFILE_MAX_PARTS];
  int64_t graph_base_bytes, graph_step_bytes; /* CUDA graphs (-1: the target's default) */
  char graph_source[TF_OVERHEAD_SOURCE_BYTES];
} tf_device_profile;

/* Reads profile `path`; an unreadable file, an unknown line, a missing or repeated fact, or a bad
 * number is TF_ERR_INVALID_INPUT naming the file and line. */
tf_status tf_device_profile_read(const char *path, tf_device_profile *out) TF_MUST_USE;

/* The most bytes a profile's text takes. */
#define TF_PROFILE_MAX_BYTES 8192

/* Writes the profile's text into text[0..size) (cut short, still terminated, when it does not fit);
 * returns the length the whole text needs. */
size_t tf_device_profile_format(const tf_device_profile *profile, char *text, size_t size);

/* Writes `profile` to `path` atomically (a temporary file renamed over it). */
tf_status tf_device_profile_write(const char *path, const tf_device_profile *profile) TF_MUST_USE;

/* The target the profile describes: its kind's defaults with every measured figure in their place. */
tf_target tf_device_profile_target(const tf_device_profile *profile);

/* What the backend of `device` ("cuda:0", "vulkan:0") measures before any session (its memory, the
 * context, the libraries, the allocation granularity), as a profile without sessions' figures; the
 * raw measurement in *capacity. `option` names the command-line option in errors ("--device"). */
tf_status tf_device_measure(const char *device, const char *option, tf_device_profile *out,
                            tf_device_capacity *capacity) TF_MUST_USE;

/* Measures device `device` ("cuda:0", "vulkan:0") into `out`: what the backend measures before a
 * session (memory, context, libraries, granularity), then three sessions of small plans for what
 * only running shows (the kernels' module code, CUDA graphs per plan and per captured step).
 * `progress` (may be NULL) gets a line per phase. */
tf_status tf_device_calibrate(const char *device, tf_device_profile *out, FILE *progress) TF_MUST_USE;

#endif
