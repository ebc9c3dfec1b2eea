/* `tightfit devices`: the devices each backend of this build can run plans on. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "tools/cli.h"
#include "tools/device_profile.h"

/* The list as {"devices": [...]}: a device's entry, or a backend's without one and why. */
static void devices_json(FILE *out, const tf_device_list *list) {
  tf_json json = {out, 0, {false}};
  tf_json_begin_object(&json, NULL);
  tf_json_begin_array(&json, "devices");
  for (int32_t i = 0; i < list->count; i++) {
    const tf_device_entry *e = &list->entries[i];
    tf_json_begin_object(&json, NULL);
    if (e->available)
      tf_json_string(&json, "device", e->device);
    tf_json_string(&json, "backend", e->backend);
    tf_json_bool(&json, "available", e->available);
    tf_json_string(&json, e->available ? "description" : "why", e->text);
    tf_json_end_object(&json);
  }
  tf_json_end_array(&json);
  tf_json_end_object(&json);
  fputc('\n', out);
}

void tf_devices_json(FILE *out) {
  tf_device_list list;
  tf_backend_list_devices(&list);
  devices_json(out, &list);
}

/* `devices --calibrate D [-o F]`: measures D into a device profile, written to F (or stdout). */
static int calibrate(const char *device, const char *output) {
  tf_device_profile profile;
  tf_status status = tf_device_calibrate(device, &profile, tf_cli_err());
  if (!status && output)
    status = tf_device_profile_write(output, &profile);
  if (status)
    return tf_cli_fail("devices", status);
  if (output) {
    fprintf(tf_cli_out(), "%s: profile of %s '%s' written to %s; use it with `compile`/`check --device-profile %s`\n",
            device, tf_target_name(profile.kind), profile.name, output, output);
    return TF_EXIT_OK;
  }
  char text[TF_PROFILE_MAX_BYTES];
  if (tf_device_profile_format(&profile, text, sizeof(text)) >= sizeof(text))
    return tf_cli_fail("devices", tf_status_new(TF_ERR_INTERNAL, "the profile is longer than %zu bytes", sizeof(text)));
  fputs(text, tf_cli_out());
  return TF_EXIT_OK;
}

static void devices_help(void) {
  fprintf(tf_cli_out(), "usage: tightfit devices [--json]\n"
                        "       tightfit devices --calibrate D [-o FILE]\n\n"
                        "Lists the devices this build can train on: cpu:0, each Vulkan device (vulkan:N, with its\n"
                        "memory heaps) and CUDA, and for a backend without one, why (no driver, no device, the CUDA\n"
                        "module missing). Pass one to `train` or `run` with --device, e.g. --device vulkan:0.\n\n"
                        "With --calibrate D (cuda:N or vulkan:N): measures that device's memory and overhead (the\n"
                        "context, libraries, allocation granularity, and from seven small training sessions the\n"
                        "kernels' module code and CUDA graphs) into a device profile, which `compile` and `check`\n"
                        "take on any machine with --device-profile FILE (docs/memory.md, \"Device profiles\").\n\n"
                        "options:\n"
                        "  --json          machine-readable: {\"devices\": [{\"device\", \"backend\", \"available\",\n"
                        "                  \"description\" (a device) or \"why\" (a backend without one)}, ...]}\n"
                        "  --calibrate D   measure device D into a profile\n"
                        "  -o, --output F  where --calibrate writes the profile (default: printed)\n");
}

int tf_cmd_devices(int argc, char **argv) {
  if (argc > 1 && tf_cli_is_help(argv[1])) {
    devices_help();
    return TF_EXIT_OK;
  }
  if (argc > 1 && strcmp(argv[1], "--calibrate") == 0) {
    if (argc < 3)
      return tf_cli_usage_error("devices", "--calibrate needs a device (cuda:N or vulkan:N)");
    const char *output = NULL;
    if (argc == 5 && (strcmp(argv[3], "-o") == 0 || strcmp(argv[3], "--output") == 0))
      output = argv[4];
    else if (argc != 3)
      return tf_cli_usage_error("devices", "--calibrate D takes only -o FILE (got '%s')", argv[3]);
    return calibrate(argv[2], output);
  }
  const bool json = argc > 1 && strcmp(argv[1], "--json") == 0;
  if (argc > (json ? 2 : 1))
    return tf_cli_usage_error("devices", "takes only --json (got '%s')", argv[json ? 2 : 1]);
  if (json) {
    tf_devices_json(tf_cli_out());
  } else {
    char text[TF_MAX_DEVICE_ENTRIES * sizeof(tf_device_entry)]; /* a line is shorter than its entry */
    tf_backend_describe_devices(text, sizeof(text));
    fputs(text, tf_cli_out());
  }
  return TF_EXIT_OK;
}
