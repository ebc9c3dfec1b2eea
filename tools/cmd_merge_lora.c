/* `tightfit merge-lora P.tfplan CHECKPOINT -o OUT.safetensors`: a LoRA plan's trained weights as the
 * model's own (tf_lora_merge, include/tightfit/init_from.h). */
#include <stdio.h>
#include <string.h>

#include "tightfit/init_from.h"
#include "tools/cli.h"

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit merge-lora P.tfplan CHECKPOINT.safetensors -o OUT.safetensors\n\n"
          "P.tfplan was compiled with --lora and trained into CHECKPOINT (train --checkpoint DIR writes\n"
          "DIR/latest.safetensors). Writes the model's weights with the adapters merged in: each adapted\n"
          "weight W + alpha/rank x B A, every other parameter as trained, no adapter and no optimizer\n"
          "state. The plan compiled from the same graph without --lora reads OUT with\n"
          "`train --init-from OUT` (docs/finetune.md).\n\n"
          "options:\n"
          "  -o, --output F   the merged weights (safetensors, written atomically; required)\n");
}

int tf_cmd_merge_lora(int argc, char **argv) {
  const char *plan_path = NULL, *checkpoint = NULL, *output = NULL;
  tf_cli_args walk = tf_cli_args_start("merge-lora", argc, argv, help, NULL);
  while (tf_cli_args_next(&walk)) {
    if (tf_cli_args_output(&walk, &output)) {
    } else if (!plan_path && argv[walk.i][0] != '-') {
      plan_path = argv[walk.i];
    } else {
      tf_cli_args_positional(&walk, "checkpoint", &checkpoint);
    }
  }
  tf_plan *plan = NULL;
  if (!tf_cli_args_done(&walk, plan_path && checkpoint,
                        "give the plan and the checkpoint: merge-lora P.tfplan CHECKPOINT -o OUT") ||
      !tf_cli_args_done(&walk, output != NULL, "missing -o OUT.safetensors") ||
      !tf_cli_args_load_plan(&walk, plan_path, &plan))
    return walk.exit_code;
  int32_t merged = 0;
  tf_status status = tf_lora_merge(plan, checkpoint, output, &merged);
  tf_plan_destroy(plan);
  if (status)
    return tf_cli_fail("merge-lora", status);
  fprintf(tf_cli_out(), "%s: %d weight%s merged with their adapters, written to %s\n", checkpoint, merged,
          merged == 1 ? "" : "s", output);
  return TF_EXIT_OK;
}
