/* The zoo registry: the preset table, and knob resolution (family defaults, then the preset's
 * settings, then the caller's "knob=value" overrides, then derived defaults, then checks). */
#include "tightfit/zoo.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/family.h"
#include "tightfit/layers.h"

typedef struct preset_row {
  tf_zoo_preset info; /* first, so that &row->info is what tf_zoo_preset_at() hands out */
  const tf_zoo_family *family;
  const char *settings; /* "knob=value,..." applied over the family's defaults */
} preset_row;

static const preset_row presets[] = {
    {{"mlp", "mlp", "8x8 digits classifier: 64 inputs, 2 hidden layers of 128 (relu), 10 classes"},
     &tf_zoo_family_mlp,
     ""},
    {{"cnn", "cnn", "8x8 digits classifier: two conv3x3 + relu + maxpool stages (16, 32 channels), linear head"},
     &tf_zoo_family_cnn,
     ""},
    {{"gpt", "gpt", "character GPT-2-style model: vocab 128, ctx 256, d 128, 4 layers, 4 heads, tied head"},
     &tf_zoo_family_gpt,
     ""},
    {{"gpt2-small", "gpt", "GPT-2 small (124M): vocab 50257, ctx 1024, d 768, 12 layers, 12 heads, tied head"},
     &tf_zoo_family_gpt,
     "vocab=50257,ctx=1024,d_model=768,layers=12,heads=12,seq=128"},
    {{"vit-b16", "vit", "ViT-Base/16 (86.6M): 224x224 images, 16x16 patches, d 768, 12 layers, 1000 classes"},
     &tf_zoo_family_vit,
     ""},
    {{"asr-256-12-6", "asr", "transformer encoder-decoder speech recogniser: d 256, 12 encoder, 6 decoder layers"},
     &tf_zoo_family_asr,
     ""},
    {{"asr-192-8-4", "asr", "transformer encoder-decoder speech recogniser: d 192, 8 encoder, 4 decoder layers"},
     &tf_zoo_family_asr,
     "d_model=192,enc_layers=8,dec_layers=4"},
    {{"asr-128-6-3", "asr", "transformer encoder-decoder speech recogniser: d 128, 6 encoder, 3 decoder layers"},
     &tf_zoo_family_asr,
     "d_model=128,enc_layers=6,dec_layers=3"},
    {{"xtts-gpt", "xtts", "XTTS-v2-style GPT decoder over text tokens + audio codes: 30 layers, d 1024, 16 heads"},
     &tf_zoo_family_xtts,
     ""},
    {{"dcgan", "dcgan", "DCGAN over 128x64 mel spectrograms; the graph's loss is the discriminator's"},
     &tf_zoo_family_dcgan,
     ""},
};

typedef struct knob_values {
  int64_t value[TF_ZOO_MAX_KNOBS];
  bool set[TF_ZOO_MAX_KNOBS]; /* by the preset or an override: derived defaults leave it alone */
} knob_values;

int32_t tf_zoo_preset_count(void) { return TF_ZOO_COUNT_OF(presets); }

const tf_zoo_preset *tf_zoo_preset_at(int32_t index) {
  if (index < 0 || index >= tf_zoo_preset_count())
    return NULL;
  return &presets[index].info;
}

tf_status tf_zoo_check_heads(int64_t d_model, int64_t heads) {
  if (d_model % heads == 0)
    return NULL;
  return tf_status_new(TF_ERR_INVALID_ARGUMENT, "heads (%" PRId64 ") must divide d_model (%" PRId64 ")", heads,
                       d_model);
}

void tf_zoo_finish_classifier(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, tf_training_config training) {
  tf_graph_set_scope(g, "loss");
  tf_tensor_id loss = tf_cross_entropy(g, logits, labels, -100);
  tf_layers_finish(g, logits, NULL, loss, &training);
}

/* ---- error messages that list the valid choices ---- */

static void append(char *buffer, size_t size, const char *text) {
  size_t used = strlen(buffer);
  if (used + 1 < size)
    snprintf(buffer + used, size - used, "%s", text);
}

static const char *list_presets(char *buffer, size_t size) {
  buffer[0] = '\0';
  for (int32_t i = 0; i < tf_zoo_preset_count(); i++) {
    append(buffer, size, i ? ", " : "");
    append(buffer, size, presets[i].info.name);
  }
  return buffer;
}

static const char *list_knobs(const tf_zoo_family *family, char *buffer, size_t size) {
  buffer[0] = '\0';
  for (int32_t i = 0; i < family->n_knobs; i++) {
    append(buffer, size, i ? ", " : "");
    append(buffer, size, family->knobs[i].name);
  }
  return buffer;
}

static tf_status unknown_preset(const char *name) {
  char valid[1024];
  return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown zoo preset '%s'; valid presets: %s", name ? name : "(null)",
                       list_presets(valid, sizeof(valid)));
}

/* ---- knob resolution ---- */

static const preset_row *find_preset(const char *name) {
  for (int32_t i = 0; name && i < tf_zoo_preset_count(); i++)
    if (strcmp(presets[i].info.name, name) == 0)
      return &presets[i];
  return NULL;
}

static int32_t find_knob(const tf_zoo_family *family, const char *name, size_t length) {
  for (int32_t i = 0; i < family->n_knobs; i++)
    if (strlen(family->knobs[i].name) == length && strncmp(family->knobs[i].name, name, length) == 0)
      return i;
  return -1;
}

/* Parses a whole base-10 integer; false on anything else (empty, trailing text, overflow). */
static bool parse_integer(const char *text, int64_t *value) {
  if (!*text)
    return false;
  errno = 0;
  char *end = NULL;
  long long parsed = strtoll(text, &end, 10);
  if (errno || *end != '\0')
    return false;
  *value = (int64_t)parsed;
  return true;
}

/* Applies one "knob=value" setting of length `length` (settings come from comma lists too). */
static tf_status apply_setting(const preset_row *preset, const char *text, size_t length, knob_values *knobs) {
  const tf_zoo_family *family = preset->family;
  char setting[256], valid[512];
  snprintf(setting, sizeof(setting), "%.*s", (int)length, text);
  char *equals = strchr(setting, '=');
  if (!equals)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "zoo preset '%s': override '%s' is not knob=value; valid knobs: %s",
                         preset->info.name, setting, list_knobs(family, valid, sizeof(valid)));
  int32_t index = find_knob(family, setting, (size_t)(equals - setting));
  if (index < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "zoo preset '%s' has no knob '%.*s'; valid knobs: %s",
                         preset->info.name, (int)(equals - setting), setting, list_knobs(family, valid, sizeof(valid)));
  const tf_zoo_knob *knob = &family->knobs[index];
  int64_t value = 0;
  if (!parse_integer(equals + 1, &value) || value < knob->min || value > knob->max)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "zoo preset '%s': knob '%s' (%s) needs an integer in [%" PRId64 ", %" PRId64 "], got '%s'",
                         preset->info.name, knob->name, knob->help, knob->min, knob->max, equals + 1);
  knobs->value[index] = value;
  knobs->set[index] = true;
  return NULL;
}

static tf_status apply_preset_settings(const preset_row *preset, knob_values *knobs) {
  const char *text = preset->settings;
  while (*text) {
    size_t length = strcspn(text, ",");
    TF_RETURN_IF_ERROR(apply_setting(preset, text, length, knobs));
    text += length;
    if (*text == ',')
      text++;
  }
  return NULL;
}

static tf_status derive_defaults(const preset_row *preset, knob_values *knobs) {
  const tf_zoo_family *family = preset->family;
  for (int32_t i = 0; i < family->n_knobs; i++) {
    const tf_zoo_knob *knob = &family->knobs[i];
    if (!knob->derived_from || knobs->set[i])
      continue;
    int32_t source = find_knob(family, knob->derived_from, strlen(knob->derived_from));
    assert(source >= 0 && !family->knobs[source].derived_from && knob->divide > 0);
    int64_t value = knobs->value[source] * knob->multiply / knob->divide;
    knobs->value[i] = value > 1 ? value : 1;
    if (knobs->value[i] > knob->max)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "zoo preset '%s': knob '%s' = %s x %" PRId64 " / %" PRId64 " = %" PRId64 " exceeds %" PRId64
                           "; set it explicitly",
                           preset->info.name, knob->name, knob->derived_from, knob->multiply, knob->divide,
                           knobs->value[i], knob->max);
  }
  return NULL;
}

static tf_status resolve_knobs(const preset_row *preset, const char *const *overrides, int32_t n_overrides,
                               int64_t *values) {
  const tf_zoo_family *family = preset->family;
  assert(family->n_knobs <= TF_ZOO_MAX_KNOBS);
  knob_values knobs;
  memset(&knobs, 0, sizeof(knobs));
  for (int32_t i = 0; i < family->n_knobs; i++)
    knobs.value[i] = family->knobs[i].default_value;
  TF_RETURN_IF_ERROR(apply_preset_settings(preset, &knobs));
  if (n_overrides < 0 || (n_overrides > 0 && !overrides))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "zoo preset '%s': %" PRId32 " overrides but no array",
                         preset->info.name, n_overrides);
  for (int32_t i = 0; i < n_overrides; i++) {
    const char *text = overrides[i] ? overrides[i] : "";
    TF_RETURN_IF_ERROR(apply_setting(preset, text, strlen(text), &knobs));
  }
  TF_RETURN_IF_ERROR(derive_defaults(preset, &knobs));
  tf_status error = family->check ? family->check(knobs.value) : NULL;
  if (error) {
    /* Name the defaults that were derived: the caller never typed those values. */
    char note[512] = "";
    for (int32_t i = 0; i < family->n_knobs; i++) {
      const tf_zoo_knob *knob = &family->knobs[i];
      if (!knob->derived_from || knobs.set[i])
        continue;
      char line[128];
      if (knob->divide == 1)
        snprintf(line, sizeof(line), "%s%s = %" PRId64 " x %s = %" PRId64, note[0] ? ", " : " (derived: ", knob->name,
                 knob->multiply, knob->derived_from, knobs.value[i]);
      else
        snprintf(line, sizeof(line), "%s%s = %s / %" PRId64 " = %" PRId64, note[0] ? ", " : " (derived: ", knob->name,
                 knob->derived_from, knob->divide, knobs.value[i]);
      append(note, sizeof(note), line);
    }
    if (note[0])
      append(note, sizeof(note), ")");
    tf_status described = tf_status_new(tf_status_code(error), "zoo preset '%s': %s%s", preset->info.name,
                                        tf_status_message(error), note);
    tf_status_free(error);
    return described;
  }
  memcpy(values, knobs.value, sizeof(knobs.value));
  return NULL;
}

/* ---- the public API ---- */

tf_status tf_zoo_params(const char *name, const char *const *overrides, int32_t n_overrides, tf_zoo_param *params,
                        int32_t cap, int32_t *count) {
  if (count)
    *count = 0;
  const preset_row *preset = find_preset(name);
  if (!preset)
    return unknown_preset(name);
  int64_t values[TF_ZOO_MAX_KNOBS];
  TF_RETURN_IF_ERROR(resolve_knobs(preset, overrides, n_overrides, values));
  const tf_zoo_family *family = preset->family;
  for (int32_t i = 0; params && i < cap && i < family->n_knobs; i++)
    params[i] = (tf_zoo_param){family->knobs[i].name, values[i], family->knobs[i].help};
  if (count)
    *count = family->n_knobs;
  return NULL;
}

tf_status tf_zoo_build(const char *name, const char *const *overrides, int32_t n_overrides, tf_graph **out) {
  if (!out)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_zoo_build: out is NULL");
  *out = NULL;
  const preset_row *preset = find_preset(name);
  if (!preset)
    return unknown_preset(name);
  int64_t values[TF_ZOO_MAX_KNOBS];
  TF_RETURN_IF_ERROR(resolve_knobs(preset, overrides, n_overrides, values));

  tf_graph *g;
  TF_RETURN_IF_ERROR(tf_graph_create(preset->info.name, &g));
  preset->family->build(g, values);
  tf_graph_set_scope(g, NULL);
  const struct tf_status_s *error = tf_graph_status(g);
  if (error) {
    tf_status copy =
        tf_status_new(tf_status_code(error), "zoo preset '%s': %s", preset->info.name, tf_status_message(error));
    tf_graph_destroy(g);
    return copy;
  }
  *out = g;
  return NULL;
}
