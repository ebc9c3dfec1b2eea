/* `tightfit dump F.tfg|P.tfplan`: a graph or a plan as JSON, readable by
 * `flatc -b schema/graph.fbs F.json` (graphs) or `flatc -b schema/plan.fbs P.json` (plans). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/file.h"
#include "schema/graph_fb.h"
#include "schema/plan_fb.h"
#include "tools/cli.h"

static void help(void) {
  fprintf(tf_cli_out(), "usage: tightfit dump F.tfg|P.tfplan [-o F.json]\n\n"
                        "Prints a graph or a plan file as JSON (strict, enums by name); the file identifier says\n"
                        "which. flatc turns it back into a binary:\n"
                        "  flatc -b schema/graph.fbs F.json     (graphs)\n"
                        "  flatc -b schema/plan.fbs P.json      (plans)\n"
                        "Only the FlatBuffers Verifier runs, so dump also shows files that 'inspect' or 'report'\n"
                        "refuse.\n\n"
                        "options:\n"
                        "  -o, --output F   write the JSON to F instead of standard output\n");
}

int tf_cmd_dump(int argc, char **argv) {
  const char *input = NULL, *output = NULL;
  tf_cli_args walk = tf_cli_args_start("dump", argc, argv, help, NULL);
  while (tf_cli_args_next(&walk))
    if (!tf_cli_args_output(&walk, &output))
      tf_cli_args_positional(&walk, "graph file", &input);
  if (!tf_cli_args_done(&walk, input != NULL, "missing the graph file"))
    return walk.exit_code;
  void *data;
  size_t size;
  tf_status status = tf_file_read(input, &data, &size);
  if (status)
    return tf_cli_fail("dump", status);
  char *json = NULL;
  bool is_plan = size >= 8 && memcmp((const char *)data + 4, "TFPL", 4) == 0;
  status = is_plan ? tf_plan_fb_to_json(data, size, &json) : tf_graph_fb_to_json(data, size, &json);
  free(data);
  if (status)
    return tf_cli_fail("dump", tf_status_prefix(status, "%s", input));
  /* -o goes through the atomic writer, like every other output: through a symbolic link to its file,
   * never over a FIFO, a device or a folder, and never half-written. */
  if (output) {
    status = tf_atomic_file_write_all(output, json, strlen(json));
    free(json);
    return status ? tf_cli_fail("dump", status) : TF_EXIT_OK;
  }
  bool written = fputs(json, tf_cli_out()) >= 0 && fflush(tf_cli_out()) == 0;
  free(json);
  if (!written)
    return tf_cli_fail("dump", tf_status_new(TF_ERR_IO, "tf_cli_out(): write failed: %s", strerror(errno)));
  return TF_EXIT_OK;
}
