/* Which device a plan is compiled for, as `compile` and `check` are told: --target (the defaults of
 * a target kind), --gpu NAME (a named card's memory as the budget, its target), or --device
 * cuda:N | vulkan:N (this machine's device, asked for its free memory and measured overhead). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "tools/compile_args.h"
#include "tools/device_profile.h"

static tf_status resolve_gpu(tf_compile_args *args) {
  const tf_gpu *gpu = tf_gpu_find(args->gpu);
  if (!gpu) {
    char names[1024] = "";
    int32_t count = 0;
    const tf_gpu *list = tf_gpu_list(&count);
    for (int32_t i = 0; i < count; i++)
      snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "", list[i].name);
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--gpu: no GPU named '%s' (known: %s; or give --budget SIZE)",
                         args->gpu, names);
  }
  if (args->budget_given)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--gpu %s sets the budget to the card's memory; give --gpu or --budget, not both", args->gpu);
  if (!args->target_option) {
    int32_t threads = args->options.target.threads;
    args->options.target = tf_target_default(gpu->target);
    args->options.target.threads = threads;
  }
  const int64_t context = tf_gpu_context_bytes(gpu);
  if (context > 0 && args->options.target.kind == TF_TARGET_CUDA) {
    char source[TF_OVERHEAD_SOURCE_BYTES];
    snprintf(source, sizeof(source),
             "modelled for the %s: 288 MiB (fitted to an H200's measured context) + %d SMs x %d threads x 1 KiB "
             "of stack (docs/gpus.md)",
             gpu->name, gpu->sms, gpu->threads_per_sm);
    tf_target_set_part(&args->options.target, "context", context, source);
  }
  args->budget = gpu->bytes;
  char bytes[32];
  snprintf(args->target_note, sizeof(args->target_note),
           "target %s; budget %s (%" PRId64 " bytes): what the %s reports to processes (--gpu %s; "
           "docs/gpus.md)",
           tf_target_name(args->options.target.kind), tf_cli_bytes(gpu->bytes, bytes, sizeof(bytes)), gpu->bytes,
           gpu->description, gpu->name);
  return NULL;
}

/* The device's figures: on CUDA the whole calibration (tools/device_calibrate.c: its seven small
 * sessions measure the module code and the graphs, which the defaults overstate by about 180 MiB on
 * an H200), elsewhere what the backend measures before a session. Sessions that cannot run (a card
 * already nearly full) leave those two parts at their defaults, said in `why` (else empty). */
static tf_status measure_device(const char *device, tf_device_profile *measured, char *why, size_t why_size) {
  char backend_name[16];
  int32_t index = 0;
  tf_target_kind kind = TF_TARGET_CPU;
  why[0] = '\0';
  if (tf_backend_parse_device(device, backend_name, sizeof(backend_name), &index) &&
      tf_target_parse(backend_name, &kind) && kind == TF_TARGET_CUDA) {
    tf_status status = tf_device_calibrate(device, measured, stderr); /* a line per session: progress */
    if (!status)
      return NULL;
    snprintf(why, why_size, " (module code and graphs: defaults, the calibration failed: %.300s)",
             tf_status_message(status));
    tf_status_free(status);
  }
  tf_device_capacity capacity;
  return tf_device_measure(device, "--device", measured, &capacity);
}

static tf_status resolve_device(tf_compile_args *args) {
  if (args->gpu)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "give --gpu or --device, not both");
  tf_device_profile measured;
  char why[384];
  TF_RETURN_IF_ERROR(measure_device(args->device, &measured, why, sizeof(why)));
  int32_t threads = args->options.target.threads;
  args->options.target = tf_device_profile_target(&measured);
  args->options.target.threads = threads;
  const char *what = "set by --budget";
  if (!args->budget_given) {
    args->budget = measured.free_bytes >= 0 ? measured.free_bytes : measured.memory_bytes;
    what = measured.free_bytes >= 0 ? "the memory the driver says this process may use now"
                                    : "the device's memory (the driver does not say what is free)";
  }
  char budget[32];
  snprintf(args->target_note, sizeof(args->target_note),
           "target %s; device %s '%.64s'; budget %s (%" PRId64 " bytes), %s; measured parts replace the defaults%s",
           tf_target_name(measured.kind), args->device, measured.name,
           tf_cli_bytes(args->budget, budget, sizeof(budget)), args->budget, what, why);
  return NULL;
}

/* --device-profile F: the target and budget of a card measured elsewhere (tools/device_profile.h). */
static tf_status resolve_profile(tf_compile_args *args) {
  if (args->gpu || args->device)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "give one of --gpu, --device and --device-profile");
  tf_device_profile profile;
  TF_RETURN_IF_ERROR(tf_status_prefix(tf_device_profile_read(args->device_profile, &profile), "--device-profile"));
  if (args->target_option && args->options.target.kind != profile.kind)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--target %s, but the profile %s is of a %s device",
                         tf_target_name(args->options.target.kind), args->device_profile, tf_target_name(profile.kind));
  int32_t threads = args->options.target.threads;
  args->options.target = tf_device_profile_target(&profile);
  args->options.target.threads = threads;
  const char *what = "set by --budget";
  if (!args->budget_given) {
    args->budget = profile.memory_bytes;
    what = "the card's memory as the profile measured it";
  }
  char budget[32];
  snprintf(args->target_note, sizeof(args->target_note),
           "target %s; device profile %.160s of '%.64s' (%s, measured %s); budget %s (%" PRId64
           " bytes), %s; its measured parts replace the defaults",
           tf_target_name(profile.kind), args->device_profile, profile.name, profile.device, profile.measured_at,
           tf_cli_bytes(args->budget, budget, sizeof(budget)), args->budget, what);
  return NULL;
}

tf_status tf_compile_args_resolve(tf_compile_args *args) {
  if (args->device_profile)
    return resolve_profile(args);
  if (args->device)
    return resolve_device(args);
  if (args->gpu)
    return resolve_gpu(args);
  const char *kind = tf_target_name(args->options.target.kind);
  if (args->target_given)
    snprintf(args->target_note, sizeof(args->target_note), "target %s (--target %s)", kind, kind);
  else
    snprintf(args->target_note, sizeof(args->target_note),
             "target %s (the default: no --target, --gpu or --device given)%s", kind,
             args->options.target.kind == TF_TARGET_CPU ? "; no device overhead is counted" : "");
  return NULL;
}

const char *tf_compile_args_target_warning(const tf_compile_args *args) {
  return args->target_given ? NULL
                            : "no --target, --gpu or --device given: assuming the cpu target, which counts no device "
                              "overhead; for a GPU say --gpu NAME (e.g. --gpu t4), --target cuda|vulkan, or --device "
                              "cuda:0";
}

void tf_compile_args_warn_target(const tf_compile_args *args, const char *command) {
  const char *warning = tf_compile_args_target_warning(args);
  if (warning)
    fprintf(tf_cli_err(), "tightfit %s: warning: %s\n", command, warning);
}
