/* The name map of tf_session_init_from (include/tightfit/init_from.h): its text form, the builtin maps,
 * and how a file's tensor name becomes a plan's. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/init_map.h"

/* Hugging Face GPT-2 checkpoints (GPT2Model's names, GPT2LMHeadModel's under "transformer.") into the
 * zoo's gpt presets, which use the same names: GPT-2's Conv1D layers store [in, out], the zoo's
 * linears [out, in]; the causal-mask buffers are no parameters; the LM head is tied to wte. */
static const char hf_gpt2[] = "prefix transformer.\n"
                              "ignore *.attn.bias\n"
                              "ignore *.attn.masked_bias\n"
                              "ignore lm_head.weight\n"
                              "transpose *.attn.c_attn.weight\n"
                              "transpose *.attn.c_proj.weight\n"
                              "transpose *.mlp.c_fc.weight\n"
                              "transpose *.mlp.c_proj.weight\n";

static const struct { const char *name, *text; } builtins[] = {{"hf-gpt2", hf_gpt2}};

static tf_status add_rule(tf_init_map *map, tf_init_rule_kind kind, const char *a, const char *b) {
  if (map->n_rules == map->capacity) {
    int32_t capacity = map->capacity ? 2 * map->capacity : 8;
    tf_init_rule *rules = realloc(map->rules, (size_t)capacity * sizeof(*rules));
    if (!rules)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "init map: out of memory");
    map->rules = rules;
    map->capacity = capacity;
  }
  tf_init_rule *rule = &map->rules[map->n_rules];
  rule->kind = kind;
  rule->a = strdup(a);
  rule->b = b ? strdup(b) : NULL;
  if (!rule->a || (b && !rule->b)) {
    free(rule->a);
    free(rule->b);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "init map: out of memory");
  }
  map->n_rules++;
  return NULL;
}

/* Splits `line` (modified) into up to 3 words; returns how many it held (4: too many). */
static int split(char *line, char *words[3]) {
  int n = 0;
  char *rest = NULL;
  for (char *p = strtok_r(line, " \t\r", &rest); p; p = strtok_r(NULL, " \t\r", &rest)) {
    if (n == 3)
      return 4;
    words[n++] = p;
  }
  return n;
}

static int stars(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '*';
  return n;
}

static tf_status parse_line(tf_init_map *map, char *line, const char *source, int number) {
  char *hash = strchr(line, '#');
  if (hash)
    *hash = '\0';
  char *words[3] = {NULL, NULL, NULL};
  int n = split(line, words);
  if (n == 0)
    return NULL;
  static const struct {
    const char *word;
    tf_init_rule_kind kind;
    int arguments;
  } kinds[] = {{"prefix", TF_INIT_RULE_PREFIX, 1},
               {"rename", TF_INIT_RULE_RENAME, 2},
               {"ignore", TF_INIT_RULE_IGNORE, 1},
               {"transpose", TF_INIT_RULE_TRANSPOSE, 1},
               {"keep", TF_INIT_RULE_KEEP, 1}};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    if (strcmp(words[0], kinds[k].word) != 0)
      continue;
    if (n != kinds[k].arguments + 1)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s:%d: '%s' takes %d argument%s, got %d", source, number,
                           kinds[k].word, kinds[k].arguments, kinds[k].arguments == 1 ? "" : "s", n - 1);
    if (kinds[k].kind == TF_INIT_RULE_RENAME && (stars(words[1]) > 1 || stars(words[2]) > stars(words[1])))
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s:%d: rename '%s' '%s': the first name takes one '*' at most, and the second "
                           "only where the first has one",
                           source, number, words[1], words[2]);
    return add_rule(map, kinds[k].kind, words[1], n > 2 ? words[2] : NULL);
  }
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s:%d: '%s' is no map line: prefix P, rename A B, ignore GLOB, transpose GLOB or keep GLOB",
                       source, number, words[0]);
}

tf_status tf_init_map_parse(const char *text, const char *source, tf_init_map **out) {
  *out = NULL;
  tf_init_map *map = calloc(1, sizeof(*map));
  char *copy = strdup(text ? text : "");
  if (!map || !copy) {
    free(map);
    free(copy);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: out of memory", source);
  }
  tf_status status = NULL;
  int number = 1;
  for (char *line = copy; line && !status; number++) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    status = parse_line(map, line, source, number);
    line = next;
  }
  free(copy);
  if (status) {
    tf_init_map_destroy(map);
    return status;
  }
  *out = map;
  return NULL;
}

tf_status tf_init_map_builtin(const char *name, tf_init_map **out) {
  *out = NULL;
  for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
    if (strcmp(builtins[i].name, name) == 0)
      return tf_init_map_parse(builtins[i].text, name, out);
  return tf_status_new(TF_ERR_INVALID_ARGUMENT, "no builtin init map '%s' (there is: hf-gpt2)", name);
}

tf_status tf_init_map_load(const char *path, tf_init_map **out) {
  *out = NULL;
  for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
    if (strcmp(builtins[i].name, path) == 0)
      return tf_init_map_builtin(path, out);
  FILE *file = fopen(path, "rb");
  if (!file)
    return tf_status_new(TF_ERR_IO, "%s: cannot open: %s (a map file, or a builtin map: hf-gpt2)", path,
                         strerror(errno));
  char *text = NULL;
  size_t size = 0, capacity = 0;
  for (;;) {
    if (size + 4096 + 1 > capacity) {
      capacity = 2 * (size + 4096 + 1);
      char *grown = capacity <= (1u << 24) ? realloc(text, capacity) : NULL;
      if (!grown) {
        free(text);
        fclose(file);
        return tf_status_new(TF_ERR_INVALID_INPUT, "%s: a map of more than 16 MiB", path);
      }
      text = grown;
    }
    size_t got = fread(text + size, 1, 4096, file);
    size += got;
    if (got < 4096)
      break;
  }
  bool failed = ferror(file);
  fclose(file);
  text[size] = '\0';
  if (failed || strlen(text) != size) {
    free(text);
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s", path, failed ? "read error" : "not a text file");
  }
  tf_status status = tf_init_map_parse(text, path, out);
  free(text);
  return status;
}

void tf_init_map_destroy(tf_init_map *map) {
  if (!map)
    return;
  for (int32_t i = 0; i < map->n_rules; i++) {
    free(map->rules[i].a);
    free(map->rules[i].b);
  }
  free(map->rules);
  free(map);
}

bool tf_init_map_matches(const tf_init_map *map, tf_init_rule_kind kind, const char *name) {
  for (int32_t i = 0; map && i < map->n_rules; i++)
    if (map->rules[i].kind == kind && fnmatch(map->rules[i].a, name, 0) == 0)
      return true;
  return false;
}

/* `pattern` (one '*' at most) against `name`: the part its '*' matched in [*begin, *end). */
static bool capture(const char *pattern, const char *name, size_t *begin, size_t *end) {
  const char *star = strchr(pattern, '*');
  size_t length = strlen(name);
  if (!star) {
    *begin = *end = 0;
    return strcmp(pattern, name) == 0;
  }
  size_t head = (size_t)(star - pattern), tail = strlen(star + 1);
  if (length < head + tail || strncmp(pattern, name, head) != 0 || strcmp(star + 1, name + length - tail) != 0)
    return false;
  *begin = head;
  *end = length - tail;
  return true;
}

tf_status tf_init_map_plan_name(const tf_init_map *map, const char *file_name, char *out, size_t size) {
  const char *name = file_name;
  for (int32_t i = 0; map && i < map->n_rules; i++) {
    const tf_init_rule *r = &map->rules[i];
    if (r->kind == TF_INIT_RULE_PREFIX && strncmp(name, r->a, strlen(r->a)) == 0) {
      name += strlen(r->a);
      break;
    }
  }
  for (int32_t i = 0; map && i < map->n_rules; i++) {
    const tf_init_rule *r = &map->rules[i];
    size_t begin, end;
    if (r->kind != TF_INIT_RULE_RENAME || !capture(r->a, name, &begin, &end))
      continue;
    const char *star = strchr(r->b, '*');
    int written =
        star ? snprintf(out, size, "%.*s%.*s%s", (int)(star - r->b), r->b, (int)(end - begin), name + begin, star + 1)
             : snprintf(out, size, "%s", r->b);
    if (written < 0 || (size_t)written >= size)
      return tf_status_new(TF_ERR_INVALID_INPUT, "'%s' renamed by '%s %s' is too long", file_name, r->a, r->b);
    return NULL;
  }
  if (snprintf(out, size, "%s", name) >= (int)size)
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor name '%s' is too long", file_name);
  return NULL;
}
