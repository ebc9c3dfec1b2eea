/* `tightfit check --baseline previous.json --max-growth 5%`: a plan's memory by category, the same
 * categories read back from an earlier `check --json` result, and the comparison of the two. */
#ifndef TIGHTFIT_TOOLS_BASELINE_H
#define TIGHTFIT_TOOLS_BASELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tightfit/plan.h"
#include "tools/cli.h"

/* parameters, gradients, optimizer_state, activations, workspace, inputs, device_overhead, total. */
#define TF_CATEGORY_COUNT 8
#define TF_CATEGORY_TOTAL (TF_CATEGORY_COUNT - 1)

/* The category names as `check --json` writes them under "categories". */
extern const char *const tf_category_names[TF_CATEGORY_COUNT];

/* A set of categories: bit c is tf_category_names[c]. */
#define TF_CATEGORIES_ALL ((1u << TF_CATEGORY_COUNT) - 1u)

/* One result's bytes by category, and what identifies the model and target it is about. */
typedef struct tf_categories {
  int64_t bytes[TF_CATEGORY_COUNT];
  unsigned present;     /* the categories the result holds: all for a plan's; a baseline from an older
                           tightfit may lack some, which are then not compared */
  char graph_name[256]; /* the graph's own name ("mlp"), "" when unknown */
  char target[32];      /* "cpu", "cuda", "vulkan" */
} tf_categories;

/* The plan's device total split into the categories. The arena is split at its peak step: the
 * workspace buffers live there are "workspace", the rest of the arena (activations, and any gap the
 * placement left) "activations"; so the first seven always sum to the total. */
void tf_categories_of_plan(const tf_plan *plan, tf_categories *out);

/* Writes the "categories" object (and "graph_name") as members of the open JSON object. */
void tf_categories_json(const tf_categories *categories, tf_json *json);

/* Reads an earlier `check --json` result. Errors (TF_ERR_IO, TF_ERR_INVALID_INPUT) name the file
 * and the reason: unreadable, not JSON (with the byte offset), no "categories" object or none of the
 * names above in it, a category not a non-negative integer, and (when it holds every category)
 * categories that do not sum to the total. A category it lacks is left out of `present`. */
tf_status tf_categories_read(const char *path, tf_categories *out) TF_MUST_USE;

/* A baseline whose graph name or target differs from `current`'s is the wrong file: an error
 * naming both (the comparison would mean nothing). */
tf_status tf_categories_check_same_model(const char *path, const tf_categories *baseline,
                                         const tf_categories *current) TF_MUST_USE;

/* "parameters,total" -> the set of those categories. An empty list, an empty item or a name that is
 * not a category is TF_ERR_INVALID_ARGUMENT naming it and listing the names. */
tf_status tf_categories_parse(const char *list, unsigned *set) TF_MUST_USE;

/* Category c's growth over the baseline, as a share of the baseline (0.05 = 5%); infinite when the
 * baseline's bytes are 0 and these are not. */
double tf_categories_growth(const tf_categories *baseline, const tf_categories *current, int c);

/* The categories of `checked` that both results hold and that grew by more than max_growth. */
unsigned tf_categories_failed(const tf_categories *baseline, const tf_categories *current, double max_growth,
                              unsigned checked);

/* Prints the verdict (each checked category over max_growth with both byte counts and its growth,
 * and the total's line) and the per-category diff as text to `out`, or, with a JSON writer, as a
 * "baseline" object member. */
void tf_categories_print_diff(const char *path, const tf_categories *baseline, const tf_categories *current,
                              double max_growth, unsigned checked, FILE *out, tf_json *json);

#endif
