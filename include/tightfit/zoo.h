/* The model zoo: C builders for real architectures, each with named presets and overridable knobs
 * (layers, d_model, heads, vocab, ...). Parameter counts equal the same architecture in PyTorch
 * (tests/zoo checks this against python3-torch). */
#ifndef TIGHTFIT_ZOO_H
#define TIGHTFIT_ZOO_H

#include "tightfit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_zoo_preset {
  const char *name;        /* "gpt2-small" */
  const char *family;      /* "gpt" */
  const char *description; /* one line */
} tf_zoo_preset;

typedef struct tf_zoo_param {
  const char *name; /* "layers" */
  int64_t value;    /* the preset's value */
  const char *help; /* one line */
} tf_zoo_param;

/* Number of presets, and preset `index` (NULL when out of range). */
int32_t tf_zoo_preset_count(void);
const tf_zoo_preset *tf_zoo_preset_at(int32_t index);

/* Fills params[0..cap) with the knobs of preset `name` and the values a build with these overrides
 * uses (overrides and derived defaults applied); *count gets the total. */
tf_status tf_zoo_params(const char *name, const char *const *overrides, int32_t n_overrides, tf_zoo_param *params,
                        int32_t cap, int32_t *count) TF_MUST_USE;

/* Builds preset `name` with `n_overrides` "knob=value" strings applied; an unknown preset or knob, or
 * a bad value, is an error that lists the valid ones. The caller destroys *out. */
tf_status tf_zoo_build(const char *name, const char *const *overrides, int32_t n_overrides, tf_graph **out) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
