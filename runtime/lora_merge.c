/* tf_lora_merge (include/tightfit/init_from.h): a LoRA plan's trained weights as the plain model's,
 * each adapted weight W + alpha/rank * (B A) (transposed where W is stored [in, out]), the adapters
 * left out, so `train --init-from` or `run` of the plan compiled without --lora reads them. The
 * pairs, the scale and each weight's layout come from the plan compiler/lora.c wrote. A plan of
 * --param-dtype bf16 merges in f32 from the widened weights and the adapters' f32 masters. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half_bits.h"
#include "runtime/safetensors.h"
#include "tightfit/init_from.h"
#include "tightfit/plan.h"

static int32_t find_buffer(const tf_plan *plan, const char *name, tf_buffer_role role) {
  for (int32_t i = 0; i < plan->n_buffers; i++)
    if (plan->buffers[i].role == role && strcmp(plan->buffers[i].name, name) == 0)
      return i;
  return -1;
}

/* The adapted weight's name of adapter A `a` ("x.lora_A.weight" -> "x.weight", "W.lora_A" -> "W")
 * and its B's name; false when `a` is no adapter A. */
static bool pair_names(const char *a, char *base, char *b, size_t size) {
  size_t n = strlen(a);
  const char *suffix = n > 14 && strcmp(a + n - 14, ".lora_A.weight") == 0 ? ".lora_A.weight"
                       : n > 7 && strcmp(a + n - 7, ".lora_A") == 0        ? ".lora_A"
                                                                           : NULL;
  if (!suffix)
    return false;
  size_t stem = n - strlen(suffix);
  bool weight = strcmp(suffix, ".lora_A.weight") == 0;
  snprintf(base, size, "%.*s%s", (int)stem, a, weight ? ".weight" : "");
  snprintf(b, size, "%.*s%s", (int)stem, a, weight ? ".lora_B.weight" : ".lora_B");
  return true;
}

/* Whether some matmul step reads buffer w (or a cast of it) as its second operand with transpose_b;
 * *found says whether any matmul reads it so. */
static bool transposed_by_steps(const tf_plan *plan, int32_t w, bool *found) {
  *found = false;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op != TF_OP_MATMUL || step->n_inputs < 2)
      continue;
    int32_t x = step->inputs[1];
    for (int32_t c = 0; c < plan->n_steps && x != w; c++) /* one cast between them (autocast) */
      if (plan->steps[c].op == TF_OP_CAST && plan->steps[c].n_outputs > 0 && plan->steps[c].outputs[0] == x &&
          plan->steps[c].n_inputs > 0 && plan->steps[c].inputs[0] == w)
        x = w;
    if (x == w) {
      *found = true;
      return step->attrs.u.matmul.transpose_b;
    }
  }
  return false;
}

/* The file's tensor of parameter p as trained: its f32 master where the file has one (a plan of
 * --param-dtype bf16), else its own; *name says which. */
static tf_status trained_tensor(const tf_safetensors *file, const tf_plan_buffer *p, tf_safetensors_tensor *view,
                                char *name, size_t size) {
  tf_plan_master_name(p->name, name, size);
  tf_status missing = tf_safetensors_find(file, name, view);
  if (missing)
    snprintf(name, size, "%s", p->name);
  tf_status_free(missing);
  TF_RETURN_IF_ERROR(tf_safetensors_find(file, name, view));
  const tf_dtype dtype = view->dtype == TF_BF16 || view->dtype == TF_F16 ? view->dtype : TF_F32;
  return tf_safetensors_expect(file, name, dtype, p->rank, p->shape, view);
}

/* Parameter p's trained values in f32 (trained_tensor's): the file's data, or in *owned a copy
 * widened from f16/bf16 (the caller frees it). */
static tf_status f32_values(const tf_safetensors *file, const tf_plan_buffer *p, const float **values, float **owned) {
  char name[1100];
  tf_safetensors_tensor view;
  *owned = NULL;
  TF_RETURN_IF_ERROR(trained_tensor(file, p, &view, name, sizeof(name)));
  if (view.dtype == TF_F32) {
    *values = view.data;
    return NULL;
  }
  const int64_t count = p->bytes / tf_dtype_size(p->dtype);
  *owned = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
  if (!*owned)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "widening '%s': out of memory", name);
  tf_f32_from_half_array(view.data, (uint32_t *)*owned, count, view.dtype == TF_BF16);
  *values = *owned;
  return NULL;
}

/* merge_one's sum over W's [in, out] or [out, in] layout. */
static tf_status merge_values(const tf_plan_buffer *W, const tf_plan_buffer *A, const tf_plan_buffer *B,
                              const tf_plan *plan, int32_t w, const float *wv, const float *av, const float *bv,
                              double scale, float *out) {
  const int64_t rank = A->shape[0], in = A->shape[1], outs = B->shape[0];
  bool found;
  bool transposed = transposed_by_steps(plan, w, &found);
  if (!found) { /* the shapes decide, unless W is square */
    if (in == outs)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "'%s': no matmul step of the plan reads it, and [%" PRId64 ", %" PRId64
                           "] does not say which side is its input",
                           W->name, W->shape[0], W->shape[1]);
    transposed = W->shape[0] == outs;
  }
  if ((transposed && (W->shape[0] != outs || W->shape[1] != in)) ||
      (!transposed && (W->shape[0] != in || W->shape[1] != outs)))
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "'%s' [%" PRId64 ", %" PRId64 "] does not match its adapters [%" PRId64 ", %" PRId64
                         "] and [%" PRId64 ", %" PRId64 "]",
                         W->name, W->shape[0], W->shape[1], A->shape[0], A->shape[1], B->shape[0], B->shape[1]);
  for (int64_t o = 0; o < outs; o++)
    for (int64_t i = 0; i < in; i++) {
      double sum = 0;
      for (int64_t r = 0; r < rank; r++)
        sum += (double)bv[o * rank + r] * (double)av[r * in + i];
      const int64_t at = transposed ? o * in + i : i * outs + o;
      float base;
      memcpy(&base, (const char *)wv + 4 * at, 4);
      out[at] = (float)((double)base + scale * sum);
    }
  return NULL;
}

/* One adapted weight: out[W's shape] = W + scale * B A, in f32 (products summed in double), from the
 * f32 values of W, A and B (a bf16 plan's widened, its adapters' masters). */
static tf_status merge_one(const tf_plan *plan, const tf_safetensors *file, int32_t w, int32_t a, int32_t b,
                           double scale, float *out) {
  const tf_plan_buffer *W = &plan->buffers[w], *A = &plan->buffers[a], *B = &plan->buffers[b];
  const float *wv = NULL, *av = NULL, *bv = NULL;
  float *owned[3] = {NULL, NULL, NULL};
  tf_status status = f32_values(file, W, &wv, &owned[0]);
  if (!status)
    status = f32_values(file, A, &av, &owned[1]);
  if (!status)
    status = f32_values(file, B, &bv, &owned[2]);
  if (!status)
    status = merge_values(W, A, B, plan, w, wv, av, bv, scale, out);
  for (int32_t k = 0; k < 3; k++)
    free(owned[k]);
  return status;
}

/* The scale the plan's LoRA steps multiply by (the constant lora_scale). */
static tf_status plan_scale(const tf_plan *plan, double *scale) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->role == TF_ROLE_CONSTANT && strncmp(b->name, "lora_scale", 10) == 0 && b->init.kind == TF_INIT_FILL) {
      *scale = b->init.a;
      return NULL;
    }
  }
  return tf_status_new(TF_ERR_INVALID_INPUT, "plan '%s' has no LoRA adapters (it was compiled without --lora)",
                       plan->graph_name);
}

tf_status tf_lora_merge(const tf_plan *plan, const char *checkpoint, const char *out_path, int32_t *merged) {
  if (merged)
    *merged = 0;
  double scale = 0;
  TF_RETURN_IF_ERROR(plan_scale(plan, &scale));
  tf_safetensors *file;
  TF_RETURN_IF_ERROR(tf_safetensors_open(checkpoint, &file));
  tf_safetensors_writer *writer = NULL;
  tf_status status = tf_safetensors_writer_create(&writer);
  float **owned = calloc((size_t)plan->n_buffers + 1, sizeof(float *));
  bool *adapter = calloc((size_t)plan->n_buffers + 1, sizeof(bool));
  if (!status && (!owned || !adapter))
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "merging %s: out of memory", checkpoint);
  if (!status)
    tf_safetensors_writer_add_checksums(writer);
  int32_t count = 0;
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    char base[1024], b_name[1024];
    if (plan->buffers[i].role != TF_ROLE_PARAMETER || !pair_names(plan->buffers[i].name, base, b_name, sizeof(base)))
      continue;
    int32_t w = find_buffer(plan, base, TF_ROLE_PARAMETER), b = find_buffer(plan, b_name, TF_ROLE_PARAMETER);
    if (w < 0 || b < 0) {
      status = tf_status_new(TF_ERR_INVALID_INPUT, "plan '%s': adapter '%s' without %s '%s'", plan->graph_name,
                             plan->buffers[i].name, w < 0 ? "its weight" : "its B", w < 0 ? base : b_name);
      break;
    }
    adapter[i] = adapter[b] = true;
    owned[w] = malloc(sizeof(float) * (size_t)(plan->buffers[w].bytes / tf_dtype_size(plan->buffers[w].dtype)));
    status = owned[w] ? merge_one(plan, file, w, i, b, scale, owned[w])
                      : tf_status_new(TF_ERR_OUT_OF_MEMORY, "merging '%s': out of memory", base);
    count++;
  }
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *p = &plan->buffers[i];
    if ((p->role != TF_ROLE_PARAMETER && p->role != TF_ROLE_STATE) || adapter[i])
      continue;
    /* a merged weight in f32; any other as trained (a bf16 plan's trained one: its f32 master) */
    const void *data = owned[i];
    tf_dtype dtype = TF_F32;
    tf_safetensors_tensor view;
    char name[1100];
    if (!data) {
      status = p->role == TF_ROLE_PARAMETER ? trained_tensor(file, p, &view, name, sizeof(name))
                                            : tf_safetensors_expect(file, p->name, p->dtype, p->rank, p->shape, &view);
      data = view.data;
      dtype = view.dtype;
    }
    if (!status)
      status = tf_safetensors_writer_add(writer, p->name, dtype, p->rank, p->shape, data);
  }
  if (!status)
    status = tf_safetensors_writer_set_metadata(writer, "merged_from", checkpoint);
  if (!status)
    status = tf_safetensors_writer_write(writer, out_path);
  for (int32_t i = 0; owned && i < plan->n_buffers; i++)
    free(owned[i]);
  free(owned);
  free(adapter);
  tf_safetensors_writer_destroy(writer);
  tf_safetensors_close(file);
  if (!status && merged)
    *merged = count;
  return status ? tf_status_prefix(status, "merging the LoRA adapters of %s", checkpoint) : NULL;
}
