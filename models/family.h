/* What a model family gives the zoo registry (models/zoo.c): its knobs as a table and two
 * functions, one that checks knob values against each other and one that builds the graph.
 * Each family lives in its own file (mlp.c, cnn.c, gpt.c, vit.c, asr.c, xtts.c, dcgan.c). */
#ifndef TIGHTFIT_MODELS_FAMILY_H
#define TIGHTFIT_MODELS_FAMILY_H

#include <stdint.h>

#include "tightfit/graph.h"

#define TF_ZOO_MAX_KNOBS 16
#define TF_ZOO_SIZE_MAX ((int64_t)1 << 24) /* upper bound of size knobs: keeps every product in int64 */
#define TF_ZOO_LAYERS_MAX 1024

/* One integer knob. When `derived_from` names another knob, the default is
 * max(1, that knob's value x multiply / divide) unless this knob is set explicitly (by the preset
 * or an override): ffn = 4 x d_model, heads = d_model / 64. */
typedef struct tf_zoo_knob {
  const char *name;
  int64_t default_value;
  int64_t min, max;
  const char *help;
  const char *derived_from;
  int64_t multiply, divide;
} tf_zoo_knob;

/* A knob row; the designated initializers keep every field named. */
#define TF_ZOO_KNOB(name_, default_, min_, max_, help_)                                                                \
  { .name = (name_), .default_value = (default_), .min = (min_), .max = (max_), .help = (help_) }
/* A knob whose default is max(1, source x multiply / divide) unless set explicitly. */
#define TF_ZOO_DERIVED_KNOB(name_, default_, min_, max_, help_, source_, multiply_, divide_)                           \
  {                                                                                                                    \
    .name = (name_), .default_value = (default_), .min = (min_), .max = (max_), .help = (help_),                       \
    .derived_from = (source_), .multiply = (multiply_), .divide = (divide_)                                            \
  }

typedef struct tf_zoo_family {
  const char *name;
  const tf_zoo_knob *knobs;
  int32_t n_knobs;
  /* Checks relations between resolved knob values (heads divide d_model, ...); NULL when fine,
   * else a TF_ERR_INVALID_ARGUMENT status naming the knobs and values. May be NULL. */
  tf_status (*check)(const int64_t *knobs);
  /* Builds the model into an empty graph; errors stick in the graph. */
  void (*build)(tf_graph *g, const int64_t *knobs);
} tf_zoo_family;

extern const tf_zoo_family tf_zoo_family_mlp;
extern const tf_zoo_family tf_zoo_family_cnn;
extern const tf_zoo_family tf_zoo_family_gpt;
extern const tf_zoo_family tf_zoo_family_vit;
extern const tf_zoo_family tf_zoo_family_asr;
extern const tf_zoo_family tf_zoo_family_xtts;
extern const tf_zoo_family tf_zoo_family_dcgan;

/* The "heads must divide d_model" error shared by the transformer families; NULL when it holds. */
tf_status tf_zoo_check_heads(int64_t d_model, int64_t heads);

/* The classifiers' ending (mlp, cnn, gpt, vit, asr): cross-entropy of `logits` against `labels`
 * (class -100 ignored) in the scope "loss", then the graph's output, loss and `training`
 * (tf_layers_finish). */
void tf_zoo_finish_classifier(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, tf_training_config training);

#define TF_ZOO_COUNT_OF(array) ((int32_t)(sizeof(array) / sizeof((array)[0])))

#endif
