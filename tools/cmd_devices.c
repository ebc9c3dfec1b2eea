/* `tightfit devices`: the devices each backend of this build can run plans on. */
#include <stdio.h>

#include "backends/backend.h"
#include "tools/cli.h"

int tf_cmd_devices(int argc, char **argv) {
  if (argc > 1 && tf_cli_is_help(argv[1])) {
    printf("usage: tightfit devices\n\n"
           "Lists the devices this build can train on: cpu:0, each Vulkan device (vulkan:N, with its\n"
           "memory heaps) and CUDA. Pass one to `train` or `run` with --device, e.g. --device vulkan:0.\n");
    return TF_EXIT_OK;
  }
  if (argc > 1)
    return tf_cli_usage_error("devices", "takes no arguments (got '%s')", argv[1]);
  char text[8192];
  tf_backend_describe_devices(text, sizeof(text));
  fputs(text, stdout);
  return TF_EXIT_OK;
}
