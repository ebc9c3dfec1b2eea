/* `tightfit devices`: the devices each backend of this build can run plans on. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "tools/cli.h"

/* One line of tf_backend_describe_devices(): "<id>  <description>" for a device, "<backend>:
 * unavailable: <why>" or "<backend>: not in this build" for a backend without one; as JSON. */
static void line_json(char *line, tf_json *json) {
  char *gap = strstr(line, "  ");
  const char *unavailable = strstr(line, ": unavailable: ");
  const char *absent = strstr(line, ": not in this build");
  if (gap && (!unavailable || gap < unavailable) && (!absent || gap < absent)) {
    *gap = '\0';
    char backend[64];
    snprintf(backend, sizeof(backend), "%.*s", (int)strcspn(line, ":"), line);
    tf_json_begin_object(json, NULL);
    tf_json_string(json, "device", line);
    tf_json_string(json, "backend", backend);
    tf_json_bool(json, "available", true);
    tf_json_string(json, "description", gap + 2);
    tf_json_end_object(json);
    return;
  }
  const char *why = unavailable ? unavailable + strlen(": unavailable: ") : "not in this build";
  tf_json_begin_object(json, NULL);
  line[strcspn(line, ":")] = '\0';
  tf_json_string(json, "backend", line);
  tf_json_bool(json, "available", false);
  tf_json_string(json, "why", why);
  tf_json_end_object(json);
}

static void devices_json(char *text) {
  tf_json json = {stdout, 0, {false}};
  tf_json_begin_object(&json, NULL);
  tf_json_begin_array(&json, "devices");
  for (char *line = text; *line;) {
    char *end = line + strcspn(line, "\n");
    const bool last = *end == '\0';
    *end = '\0';
    if (*line)
      line_json(line, &json);
    line = last ? end : end + 1;
  }
  tf_json_end_array(&json);
  tf_json_end_object(&json);
  fputc('\n', stdout);
}

int tf_cmd_devices(int argc, char **argv) {
  if (argc > 1 && tf_cli_is_help(argv[1])) {
    printf("usage: tightfit devices [--json]\n\n"
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
  char text[8192];
  tf_backend_describe_devices(text, sizeof(text));
  if (json)
    devices_json(text);
  else
    fputs(text, stdout);
  return TF_EXIT_OK;
}
