/* Pretrained weights into any plan (issue 43): a session's parameters, and the running statistics
 * the file holds, loaded from a safetensors file by name, through a map that says how the file's names
 * and layouts differ from the plan's (docs/finetune.md). Every tensor the plan trains must come from
 * the file, every tensor of the file must land somewhere, and every shape must agree: all the
 * problems are named in one error before anything is written. */
#ifndef TIGHTFIT_INIT_FROM_H
#define TIGHTFIT_INIT_FROM_H

#include <stdint.h>

#include "tightfit/plan.h"
#include "tightfit/runtime.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a file's names map onto a plan's: lines of
 *   prefix P          strip P from the file's names that start with it
 *   rename A B        a file name matching A (one '*' at most) becomes B (its '*' the part A's matched)
 *   ignore GLOB       the file's tensors so named (after prefix and rename) are not loaded
 *   transpose GLOB    the plan's 2-D parameters so named are stored transposed in the file
 *   keep GLOB         the plan's parameters so named keep their own initial values (new layers)
 * ('#' starts a comment; GLOB as fnmatch(3)). The empty map: the file's names are the plan's. */
typedef struct tf_init_map tf_init_map;

/* Parses `text` (`source` names it in errors: file and line). */
tf_status tf_init_map_parse(const char *text, const char *source, tf_init_map **out) TF_MUST_USE;
/* A map this library ships: "hf-gpt2" (Hugging Face GPT-2 checkpoints into the zoo's gpt presets). */
tf_status tf_init_map_builtin(const char *name, tf_init_map **out) TF_MUST_USE;
/* Reads a map from file `path`, or a builtin one when `path` names one. */
tf_status tf_init_map_load(const char *path, tf_init_map **out) TF_MUST_USE;
void tf_init_map_destroy(tf_init_map *map);

/* What tf_session_init_from() did. */
typedef struct tf_init_from_result {
  int32_t loaded;     /* plan tensors written from the file */
  int32_t transposed; /* of those, read transposed */
  int32_t converted;  /* of those, converted between f32, f16, bf16 (or from f64) */
  int32_t kept;       /* parameters left at their initial values by a `keep` line */
  int32_t state_kept; /* running statistics the file lacks, left at their initial values */
  int32_t ignored;    /* the file's tensors left out by an `ignore` line */
} tf_init_from_result;

/* Loads `session`'s parameters (and running statistics) from safetensors file `path` through `map`
 * (NULL: the empty map). Checks everything first; on any problem writes nothing and returns one
 * error naming each (up to 8, then a count). `out` may be NULL. */
tf_status tf_session_init_from(tf_session *session, const char *path, const tf_init_map *map,
                               tf_init_from_result *out) TF_MUST_USE;

/* The weights of a plan compiled with --lora (compiler/lora.c), trained into checkpoint `checkpoint`,
 * as the model without adapters: each adapted weight W + alpha/rank * B A (in W's layout), every other
 * parameter and running statistic as it is, the adapters left out; written to safetensors file
 * `out_path` (atomically, with checksums), which `--init-from` of the plan compiled without --lora
 * reads. *merged (may be NULL): how many weights were merged. */
tf_status tf_lora_merge(const tf_plan *plan, const char *checkpoint, const char *out_path, int32_t *merged) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
