/* Frozen parameters, from the compile options' patterns (tf_compile_options.freeze, .train_only),
 * on the compiler's bound copy before any other pass. Autodiff then starts its backward pass only
 * from trainable parameters (autodiff.c): a frozen one gets no gradient, no optimizer state and no
 * update, and no gradient is computed toward a subgraph that only frozen parameters feed. A frozen
 * half weight needs no f32 master (half_ops.c). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"

/* A pattern fnmatch would read as something the user did not mean: empty, or an unclosed '['. */
static tf_status check_pattern(const char *what, const char *pattern) {
  if (!pattern || !*pattern)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s pattern is empty: give a parameter name or a glob", what);
  for (const char *p = pattern; *p; p++) {
    if (*p == '\\' && p[1]) {
      p++;
      continue;
    }
    if (*p != '[')
      continue;
    const char *close = p + 1;
    if (*close == '!' || *close == '^')
      close++;
    if (*close == ']')
      close++;
    while (*close && *close != ']')
      close++;
    if (!*close)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "%s pattern '%s' has a '[' without its ']' (at byte %d): close the set, or write \\[ "
                           "for a literal bracket",
                           what, pattern, (int)(p - pattern));
    p = close;
  }
  return NULL;
}

/* "a, b, c, ... (12 parameters)" into buf: what a pattern could have named. */
static void some_parameters(const tf_graph *g, char *buf, size_t size) {
  size_t used = 0;
  int32_t shown = 0, total = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < g->n_tensors; i++) {
    if (g->tensors[i].kind != TF_PARAMETER)
      continue;
    if (shown < 6 && used < size) {
      used += (size_t)snprintf(buf + used, size - used, "%s'%s'", shown ? ", " : "", g->tensors[i].name);
      shown++;
    }
    total++;
  }
  if (used < size)
    snprintf(buf + used, size - used, "%s (%d parameter%s)", total > shown ? ", ..." : "", total,
             total == 1 ? "" : "s");
}

/* Sets frozen to `frozen` on every parameter `pattern` names; an error when it names none. */
static tf_status apply(tf_graph *g, const char *what, const char *pattern, bool frozen, bool *matched) {
  TF_RETURN_IF_ERROR(check_pattern(what, pattern));
  bool any = false;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    tf_ir_tensor *t = &g->tensors[i];
    if (t->kind != TF_PARAMETER || fnmatch(pattern, t->name, 0) != 0)
      continue;
    any = true;
    if (matched)
      matched[i] = true;
    else
      t->frozen = frozen;
  }
  if (any)
    return NULL;
  char names[512];
  some_parameters(g, names, sizeof(names));
  return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s pattern '%s' names no parameter of graph '%s'; its parameters: %s",
                       what, pattern, g->name, names);
}

tf_status tf_freeze_pass(tf_training *t) {
  tf_graph *g = t->g;
  const tf_compile_options *o = &t->options;
  if (o->freeze_count < 0 || o->train_only_count < 0 || (o->freeze_count > 0 && !o->freeze) ||
      (o->train_only_count > 0 && !o->train_only))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "freeze: %d freeze and %d train-only patterns without their list",
                         o->freeze_count, o->train_only_count);
  if (o->train_only_count > 0) {
    bool *named = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof(bool));
    if (!named)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "freeze: out of memory for %d tensors", g->n_tensors);
    tf_status status = NULL;
    for (int32_t k = 0; k < o->train_only_count && !status; k++)
      status = apply(g, "train-only", o->train_only[k], false, named);
    for (int32_t i = 0; i < g->n_tensors && !status; i++)
      if (g->tensors[i].kind == TF_PARAMETER && !named[i])
        g->tensors[i].frozen = true;
    free(named);
    TF_RETURN_IF_ERROR(status);
  }
  for (int32_t k = 0; k < o->freeze_count; k++)
    TF_RETURN_IF_ERROR(apply(g, "freeze", o->freeze[k], true, NULL));
  int32_t parameters = 0, frozen = 0;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    parameters += g->tensors[i].kind == TF_PARAMETER;
    frozen += g->tensors[i].kind == TF_PARAMETER && g->tensors[i].frozen;
  }
  if (o->training && parameters > 0 && frozen == parameters && o->lora_rank <= 0) /* LoRA adds trainable ones */
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "every parameter of graph '%s' is frozen (%d of %d): nothing to train; freeze fewer, or "
                         "compile with --inference",
                         g->name, frozen, parameters);
  return NULL;
}
