/* The init map's rules (include/tightfit/init_from.h has the text form), as runtime/init_from.c reads
 * them. */
#ifndef TIGHTFIT_RUNTIME_INIT_MAP_H
#define TIGHTFIT_RUNTIME_INIT_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tightfit/init_from.h"

typedef enum tf_init_rule_kind {
  TF_INIT_RULE_PREFIX,
  TF_INIT_RULE_RENAME,
  TF_INIT_RULE_IGNORE,
  TF_INIT_RULE_TRANSPOSE,
  TF_INIT_RULE_KEEP,
} tf_init_rule_kind;

typedef struct tf_init_rule {
  tf_init_rule_kind kind;
  char *a; /* the prefix, the first name of a rename, or the glob */
  char *b; /* a rename's second name; else NULL */
} tf_init_rule;

struct tf_init_map {
  tf_init_rule *rules;
  int32_t n_rules, capacity;
};

/* Whether a rule of `kind` (ignore, transpose, keep) has a glob matching `name`. */
bool tf_init_map_matches(const tf_init_map *map, tf_init_rule_kind kind, const char *name);
/* The plan's name of the file's tensor `file_name`: the first matching prefix stripped, then the
 * first matching rename applied, into out[size]. */
tf_status tf_init_map_plan_name(const tf_init_map *map, const char *file_name, char *out, size_t size) TF_MUST_USE;

#endif
