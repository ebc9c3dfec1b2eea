/* `tightfit`: the command line (tightfit/cli.h). Dispatches to one tools/cmd_*.c file per command. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tightfit/cli.h"
#include "tools/cli.h"

typedef struct command {
  const char *name;
  tf_command_fn run;
  const char *summary;
} command;

static const command commands[] = {
    {.name = "zoo", .run = tf_cmd_zoo, .summary = "list the model zoo, or write a preset as a .tfg graph"},
    {.name = "import",
     .run = tf_cmd_import,
     .summary = "import an ONNX model (torch.onnx.export) as a .tfg graph and its weights"},
    {.name = "inspect",
     .run = tf_cmd_inspect,
     .summary = "summarise a .tfg graph: parameters, bytes, ops, symbols, inputs, loss"},
    {.name = "dump", .run = tf_cmd_dump, .summary = "print a .tfg graph as JSON that flatc reads back"},
    {.name = "compile",
     .run = tf_cmd_compile,
     .summary = "compile a graph into a training (or inference) plan with exact memory"},
    {.name = "train",
     .run = tf_cmd_train,
     .summary = "train with a plan on a backend: progress, checkpoints, held-out accuracy"},
    {.name = "run", .run = tf_cmd_run, .summary = "inference with a plan: loss, accuracy, outputs as .npy"},
    {.name = "devices",
     .run = tf_cmd_devices,
     .summary = "list the devices this build can run plans on (cpu, vulkan:N, cuda:N)"},
    {.name = "check",
     .run = tf_cmd_check,
     .summary = "does a graph's plan fit a memory budget? (exit 0 fits, 1 does not)"},
    {.name = "merge-lora",
     .run = tf_cmd_merge_lora,
     .summary = "a LoRA plan's trained checkpoint as the model's own weights (adapters merged)"},
    {.name = "report",
     .run = tf_cmd_report,
     .summary = "where a .tfplan plan's memory goes: regions, roles, arena vs lower bound, peak"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: tightfit <command> [options]\n\n"
               "tightfit compiles model graphs into training plans whose peak memory is known exactly.\n\n"
               "commands:\n");
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\n'tightfit <command> --help' describes a command.\n"
               "exit codes: 0 success, 1 a check failed (e.g. does not fit), 2 bad usage or bad input.\n");
}

int tf_cli_main(int argc, char **argv) {
  /* OpenMP's default active spin-wait collapses when the cores are shared (CI, a laptop under load):
   * idle kernel threads sleep instead, unless the user chose otherwise. */
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  if (argc < 2) {
    usage(tf_cli_err());
    return TF_EXIT_USAGE;
  }
  if (tf_cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
    if (argc >= 3) {
      for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[2], commands[i].name) == 0) {
          char help[] = "--help";
          char *help_argv[] = {argv[2], help, NULL};
          return commands[i].run(2, help_argv);
        }
      }
      fprintf(tf_cli_err(), "tightfit help: unknown command '%s'\n\n", argv[2]);
      usage(tf_cli_err());
      return TF_EXIT_USAGE;
    }
    usage(tf_cli_out());
    return TF_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    fprintf(tf_cli_out(), "tightfit 0.1.0 (graph schema version 1)\n");
    return TF_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  fprintf(tf_cli_err(), "tightfit: unknown command '%s'\n\n", argv[1]);
  usage(tf_cli_err());
  return TF_EXIT_USAGE;
}

int tf_cli_run_captured(int argc, char **argv, char **out, char **err) {
  *out = *err = NULL;
  size_t out_size = 0, err_size = 0;
  FILE *out_stream = open_memstream(out, &out_size), *err_stream = open_memstream(err, &err_size);
  if (!out_stream || !err_stream) {
    if (out_stream)
      fclose(out_stream);
    if (err_stream)
      fclose(err_stream);
    free(*out);
    free(*err);
    *out = *err = NULL;
    return -1;
  }
  FILE *outer_out = tf_cli_out(), *outer_err = tf_cli_err();
  tf_cli_set_streams(out_stream, err_stream);
  int code = tf_cli_main(argc, argv);
  tf_cli_set_streams(outer_out, outer_err);
  fclose(out_stream);
  fclose(err_stream);
  return code;
}
