/* The compile options shared by `tightfit compile` and `tightfit check`: parsing, help text, and
 * the summary of a plan's memory both print. */
#ifndef TIGHTFIT_TOOLS_COMPILE_ARGS_H
#define TIGHTFIT_TOOLS_COMPILE_ARGS_H

#include "tightfit/compiler.h"
#include "tools/cli.h"

#define TF_COMPILE_ARGS_MAX_OVERRIDES 64

typedef struct tf_compile_args {
  tf_compile_options options;
  char bindings[1024]; /* all --set lists joined */
  const char *graph_path;
  int64_t budget;             /* --budget (or what --gpu / --device / --device-profile set), or -1 */
  bool budget_given;          /* --budget was on the command line */
  bool target_given;          /* --target, --gpu or --device chose the target */
  bool target_option;         /* --target itself was given (it wins over --gpu's target) */
  const char *gpu;            /* --gpu NAME, or NULL */
  const char *device;         /* --device cuda:N | vulkan:N, or NULL */
  const char *device_profile; /* --device-profile FILE (tools/device_profile.h), or NULL */
  char target_note[512];      /* which target and budget were assumed, and why (tf_compile_args_resolve) */
  int64_t global_batch;       /* --global-batch, or -1: with --budget, search N, k and recompute */
  bool allow_precision;       /* --allow-precision P: the search may also store activations in P */
  int32_t allow_lora_rank;    /* --allow-lora R: the search may fall back on LoRA rank R */
  bool allow_optimizer_8bit;  /* --allow-optimizer adamw8bit: the search may fall back on 8-bit AdamW state */
  bool allow_offload;         /* --allow-offload: the search may fall back on the optimizer state in host memory */
  tf_precision allowed_precision;
  const char *precision_overrides[TF_COMPILE_ARGS_MAX_OVERRIDES]; /* --precision-override NODE=P, as given */
  int32_t n_precision_overrides;
  bool json;
  bool no_half_kernels; /* --no-half-kernels: every op on half data between f32 casts */
  bool smallest; /* unless --no-smallest: the rewrites not given chosen by the smaller plan (TF_CHOICE_SMALLEST) */
  bool update_in_backward_off;                       /* --no-update-in-backward */
  bool fuse_loss_given;                              /* --fuse-loss was given (--smallest leaves it) */
  const char *freeze[TF_COMPILE_ARGS_MAX_OVERRIDES]; /* --freeze PATTERN, as given */
  int32_t n_freeze;
  const char *lora_targets[TF_COMPILE_ARGS_MAX_OVERRIDES]; /* --lora-targets PATTERN, as given */
  int32_t n_lora_targets;
  const char *train_only[TF_COMPILE_ARGS_MAX_OVERRIDES]; /* --train-only PATTERN, as given */
  int32_t n_train_only;
} tf_compile_args;

/* Initialises args with the defaults (CPU target, training). */
void tf_compile_args_init(tf_compile_args *args);
/* 1 when `name` ("--budget") is a compile option that takes a value, 0 a switch ("--inference"),
 * -1 not a compile option. */
int tf_compile_args_arity(const char *name);
/* Sets compile option `name` as the command line spells it, dashes included; `value` NULL for a
 * switch, kept by pointer (it must outlive args); a repeatable option ("--set", "--freeze") adds
 * one. An unknown name or a bad value is an error saying which and why. */
tf_status tf_compile_args_set(tf_compile_args *args, const char *name, const char *value) TF_MUST_USE;
/* Consumes the argument at hand of `walk` (and its value) when it is a compile option; true when
 * consumed. Sets walk->error (after printing why) on a bad value. */
bool tf_compile_args_take(tf_compile_args *args, tf_cli_args *walk);
/* After parsing: applies --gpu (budget and target from the GPU table) and --device (target, budget
 * and overhead measured on this machine's device), and fills args->target_note. Errors name the
 * option: an unknown GPU, a device that cannot be opened, --gpu with --budget. */
tf_status tf_compile_args_resolve(tf_compile_args *args) TF_MUST_USE;
/* The warning a budget without --target, --gpu or --device gets (the cpu target is assumed), or
 * NULL when one was given. */
const char *tf_compile_args_target_warning(const tf_compile_args *args);
/* Prints, to stderr, that warning as `command`'s. */
void tf_compile_args_warn_target(const tf_compile_args *args, const char *command);
/* Prints the budget verdict of a plan that misses args->budget: the device total, the budget and
 * the shortfall, then the memory breakdown (text, or JSON members). */
void tf_compile_args_print_shortfall(const tf_compile_args *args, const tf_plan *plan, tf_json *json);
/* Prints the compile options' help lines. */
void tf_compile_args_help(void);
/* Loads the graph and compiles it (searching micro-batch, accumulation and recompute when
 * --global-batch is given); the caller destroys *plan. *search (may be NULL) describes the search. */
tf_status tf_compile_args_run(const tf_compile_args *args, tf_plan **plan, tf_budget_result *search) TF_MUST_USE;
/* Prints the plan's regions, device overhead parts, device total and arena quality (text or JSON
 * object members). */
void tf_compile_args_print_memory(const tf_plan *plan, tf_json *json);

/* The summary `tightfit compile --json` prints of a plan that compiled (and fits args->budget),
 * written to `output` when not NULL, as members of the object `json` is in. */
void tf_compile_summary_json(const tf_compile_args *args, const tf_plan *plan, const char *output, tf_json *json);

#endif
