/* `tightfit devices`: the devices each backend of this build can run plans on. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "tools/cli.h"

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

int tf_cmd_devices(int argc, char **argv) {
  if (argc > 1 && tf_cli_is_help(argv[1])) {
    fprintf(tf_cli_out(),
            "usage: tightfit devices [--json]\n\n"
            "Lists the devices this build can train on: cpu:0, each Vulkan device (vulkan:N, with its\n"
            "memory heaps) and CUDA, and for a backend without one, why (no driver, no device, the CUDA\n"
            "module missing). Pass one to `train` or `run` with --device, e.g. --device vulkan:0.\n\n"
            "options:\n"
            "  --json   machine-readable: {\"devices\": [{\"device\", \"backend\", \"available\", \"description\"\n"
            "           (a device) or \"why\" (a backend without one)}, ...]}\n");
    return TF_EXIT_OK;
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
