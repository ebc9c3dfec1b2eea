/* Writes the family's kernel results for compare_with_torch.py: for every call of op_calls.c (small
 * sizes) the inputs and the f64 kernel's outputs as .npy files; optimizer sequences (several steps
 * of zero + accumulate over micro-batches + global_norm_sq + sgd/adamw); and casts on raw storage
 * (f32 build, and f64 build for double -> f16). DIR/manifest.json lists them all.
 *
 * usage: dump_torch_cases DIR */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "kernels/cpu/list.h"
#include "op_calls.h"

static const char *directory;
static FILE *manifest;
static int n_files;

/* ---- .npy (format 1.0) ---- */

/* Writes `data` as DIR/<stem><n>.npy and returns the file name (static storage, overwritten). */
static const char *write_npy(const char *stem, const char *descr, int32_t rank, const int64_t *shape, const void *data,
                             size_t element_size) {
  static char name[64];
  char path[4096], header[256];
  snprintf(name, sizeof(name), "%s%d.npy", stem, n_files++);
  snprintf(path, sizeof(path), "%s/%s", directory, name);
  int used = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  size_t count = 1;
  for (int32_t i = 0; i < rank; i++) {
    used += snprintf(header + used, sizeof(header) - (size_t)used, "%" PRId64 "%s", shape[i],
                     rank == 1 ? "," : (i + 1 < rank ? ", " : ""));
    count *= (size_t)shape[i];
  }
  used += snprintf(header + used, sizeof(header) - (size_t)used, "), }");
  // magic (6) + version (2) + length (2) + header + '\n', padded with spaces to a multiple of 64.
  size_t total = 10 + (size_t)used + 1, padded = (total + 63) / 64 * 64;
  while ((size_t)used < padded - 11)
    header[used++] = ' ';
  header[used++] = '\n';
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(2);
  }
  const unsigned char preamble[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(used & 0xff), (unsigned char)(used >> 8)};
  fwrite(preamble, 1, sizeof(preamble), f);
  fwrite(header, 1, (size_t)used, f);
  fwrite(data, element_size, count, f);
  fclose(f);
  return name;
}

/* A test tensor as f8 (floating) or i8 (labels). */
static const char *write_tensor(const th_tensor *t) {
  if (t->dtype == TF_F32)
    return write_npy("t", "<f8", t->rank, t->shape, t->values, sizeof(double));
  int64_t *integers = th_alloc(sizeof(int64_t) * (size_t)(t->count ? t->count : 1));
  for (int64_t i = 0; i < t->count; i++)
    integers[i] = (int64_t)t->values[i];
  return write_npy("t", "<i8", t->rank, t->shape, integers, sizeof(int64_t));
}

/* ---- the manifest ---- */

static void write_list(const char *key, const th_tensor *tensors, int n) {
  fprintf(manifest, ", \"%s\": [", key);
  for (int i = 0; i < n; i++)
    fprintf(manifest, "%s\"%s\"", i ? ", " : "", write_tensor(&tensors[i]));
  fprintf(manifest, "]");
}

static void write_ints(const char *key, const int64_t *values, int n) {
  fprintf(manifest, "\"%s\": [", key);
  for (int i = 0; i < n; i++)
    fprintf(manifest, "%s%" PRId64, i ? ", " : "", values[i]);
  fprintf(manifest, "]");
}

/* value as JSON that Python's json reads: %.9g, or Infinity / -Infinity; in `text` (32 bytes). */
static const char *json_number(float value, char *text) {
  if (isinf(value))
    return value > 0 ? "Infinity" : "-Infinity";
  snprintf(text, 32, "%.9g", (double)value);
  return text;
}

static void write_attrs(const tf_attrs *a) {
  int64_t values[TF_MAX_RANK];
  char text[2][32];
  fprintf(manifest, ", \"attrs\": {");
  switch (a->kind) {
  case TF_ATTR_REDUCE:
    for (int i = 0; i < a->u.reduce.n_axes; i++)
      values[i] = a->u.reduce.axes[i];
    write_ints("axes", values, a->u.reduce.n_axes);
    fprintf(manifest, ", \"keepdims\": %s", a->u.reduce.keepdims ? "true" : "false");
    break;
  case TF_ATTR_AXIS: fprintf(manifest, "\"axis\": %" PRId32, a->u.axis.axis); break;
  case TF_ATTR_NORM: fprintf(manifest, "\"epsilon\": %.17g", (double)a->u.norm.epsilon); break;
  case TF_ATTR_SHAPE:
    for (int i = 0; i < a->u.shape.shape.rank; i++)
      values[i] = a->u.shape.shape.dims[i].size;
    write_ints("shape", values, a->u.shape.shape.rank);
    break;
  case TF_ATTR_TRANSPOSE:
    for (int i = 0; i < a->u.transpose.rank; i++)
      values[i] = a->u.transpose.perm[i];
    write_ints("perm", values, a->u.transpose.rank);
    break;
  case TF_ATTR_SLICE:
    fprintf(manifest, "\"axis\": %" PRId32 ", \"start\": %" PRId64 ", \"end\": %" PRId64 ", \"step\": %" PRId64,
            a->u.slice.axis, a->u.slice.start, a->u.slice.end, a->u.slice.step);
    break;
  case TF_ATTR_DROPOUT:
    fprintf(manifest, "\"rate\": %.17g, \"seed\": %" PRIu64, (double)a->u.dropout.rate, a->u.dropout.seed);
    break;
  case TF_ATTR_GELU: fprintf(manifest, "\"approximate\": %s", a->u.gelu.approximate ? "true" : "false"); break;
  case TF_ATTR_LEAKY_RELU: fprintf(manifest, "\"alpha\": %.9g", (double)a->u.leaky_relu.alpha); break;
  case TF_ATTR_CLIP: /* JSON's spelling of an infinite bound, which Python's json reads */
    fprintf(manifest, "\"lo\": %s, \"hi\": %s", json_number(a->u.clip.lo, text[0]), json_number(a->u.clip.hi, text[1]));
    break;
  case TF_ATTR_CROSS_ENTROPY: fprintf(manifest, "\"ignore_index\": %" PRId64, a->u.cross_entropy.ignore_index); break;
  case TF_ATTR_OPTIMIZER: {
    const tf_optimizer_attrs *o = &a->u.optimizer;
    fprintf(manifest,
            "\"lr\": %.17g, \"momentum\": %.17g, \"beta1\": %.17g, \"beta2\": %.17g, \"epsilon\": %.17g, "
            "\"weight_decay\": %.17g, \"clip_norm\": %.17g, \"grad_scale\": %.17g",
            (double)o->learning_rate, (double)o->momentum, (double)o->beta1, (double)o->beta2, (double)o->epsilon,
            (double)o->weight_decay, (double)o->clip_norm, (double)o->grad_scale);
    break;
  }
  default: break;
  }
  fprintf(manifest,
          "}, \"context\": {\"seed\": %" PRIu64 ", \"micro_step\": %" PRId64 ", \"optimizer_step\": %" PRId64 "}",
          th_context.seed, th_context.micro_step, th_context.optimizer_step);
}

static bool first_entry = true;

static void begin_entry(const char *kind) {
  fprintf(manifest, "%s\n {\"kind\": \"%s\"", first_entry ? "" : ",", kind);
  first_entry = false;
}

/* ---- kernel calls ---- */

static void dump_calls(void) {
  static op_call calls[512];
  const int n = op_calls_build(calls, 512, false);
  for (int k = 0; k < n; k++) {
    const op_call *call = &calls[k];
    th_tensor inputs[OP_CALL_MAX_INPUTS], results[8];
    for (int i = 0; i < call->n_inputs; i++)
      inputs[i] = th_copy(&call->inputs[i]);
    int n_results = th_run(call->op, &call->attrs, inputs, call->n_inputs, results, true);
    if (n_results < 0)
      exit(2);
    const tf_op_info *info = tf_op_info_get(call->op);
    for (int i = 0; i < call->n_inputs; i++)
      if (info->in_place & (1u << i))
        results[n_results++] = inputs[i];
    begin_entry("op");
    fprintf(manifest, ", \"name\": \"%s\", \"op\": \"%s\"", call->name, tf_op_name(call->op));
    write_attrs(&call->attrs);
    write_list("inputs", call->inputs, call->n_inputs);
    write_list("outputs", results, n_results);
    fprintf(manifest, "}");
  }
}

/* ---- optimizer sequences ---- */

#define STEPS 4
#define MICRO 3

static void dump_sequence(const char *label, tf_op op, tf_attrs attrs, bool clip, int64_t first_step) {
  th_tensor params[2] = {th_random(-1, 1, TH_SHAPE(5, 3)), th_random(-1, 1, TH_SHAPE(7))};
  th_tensor initial[2], sums[2], states[2][2], grads[2];
  const int n_states = op == TF_OP_SGD ? 1 : 2;
  for (int p = 0; p < 2; p++) {
    th_round_to_float(&params[p]);
    initial[p] = th_copy(&params[p]);
    sums[p] = th_zeros(TF_F32, (size_t)params[p].rank, params[p].shape);
    for (int s = 0; s < n_states; s++)
      states[p][s] = th_zeros(TF_F32, (size_t)params[p].rank, params[p].shape);
    int64_t shape[TF_MAX_RANK] = {STEPS, MICRO};
    for (int32_t i = 0; i < params[p].rank; i++)
      shape[i + 2] = params[p].shape[i];
    grads[p] = th_random(-2, 2, (size_t)params[p].rank + 2, shape);
  }
  for (int step = 0; step < STEPS; step++) {
    th_context.optimizer_step = first_step + step;
    for (int p = 0; p < 2; p++) {
      th_call(TF_OP_ZERO, NULL, &sums[p]);
      for (int m = 0; m < MICRO; m++) {
        th_tensor g = params[p];
        g.values = grads[p].values + (step * MICRO + m) * params[p].count;
        th_call(TF_OP_ACCUMULATE, NULL, &sums[p], &g);
      }
    }
    th_tensor norm_sq = th_call(TF_OP_GLOBAL_NORM_SQ, NULL, &sums[0], &sums[1]);
    for (int p = 0; p < 2; p++) {
      th_tensor inputs[5] = {params[p], sums[p], states[p][0], states[p][1 % n_states], norm_sq};
      if (op == TF_OP_SGD)
        inputs[3] = norm_sq;
      th_tensor unused[1];
      const int n_inputs = (op == TF_OP_SGD ? 3 : 4) + (clip ? 1 : 0);
      if (th_run(op, &attrs, inputs, n_inputs, unused, true) < 0)
        exit(2);
    }
  }
  th_context.optimizer_step = 1;
  begin_entry("sequence");
  fprintf(manifest, ", \"name\": \"%s %s, %s, %d steps from step %" PRId64 ", %d micro-batches\", \"op\": \"%s\"",
          tf_op_name(op), label, clip ? "clipped" : "not clipped", STEPS, first_step, MICRO, tf_op_name(op));
  write_attrs(&attrs);
  fprintf(manifest, ", \"clip\": %s, \"first_step\": %" PRId64 ", \"params\": [", clip ? "true" : "false", first_step);
  for (int p = 0; p < 2; p++) {
    fprintf(manifest, "%s{\"init\": \"%s\"", p ? ", " : "", write_tensor(&initial[p]));
    fprintf(manifest, ", \"grads\": \"%s\"", write_tensor(&grads[p]));
    fprintf(manifest, ", \"final\": \"%s\"", write_tensor(&params[p]));
    write_list("states", states[p], n_states);
    fprintf(manifest, "}");
  }
  fprintf(manifest, "]}");
}

/* ---- casts on raw storage ---- */

static void run_cast(bool f64, tf_dtype from, tf_dtype to, const void *in, void *out, int64_t n) {
  tf_cpu_tensor x = {(void *)in, from, 1, {n}, n}, y = {out, to, 1, {n}, n};
  tf_attrs attrs = th_no_attrs();
  attrs.kind = TF_ATTR_CAST;
  attrs.u.cast.to = to;
  tf_cpu_args args = {.op = TF_OP_CAST,
                      .attrs = &attrs,
                      .n_inputs = 1,
                      .inputs = &x,
                      .n_outputs = 1,
                      .outputs = &y,
                      .context = &th_context};
  (f64 ? tf_cpu_cast_f64 : tf_cpu_cast_f32)(&args);
}

static const char *descr_of(tf_dtype dtype, bool f64) {
  switch (dtype) {
  case TF_F16:
  case TF_BF16: return "<u2";
  case TF_I32: return "<i4";
  case TF_I64: return "<i8";
  case TF_U8: return "|u1";
  default: return f64 ? "<f8" : "<f4";
  }
}

static void dump_cast(bool f64, tf_dtype from, tf_dtype to, const void *in, int64_t n) {
  const int64_t size = to == TF_F32 ? (f64 ? 8 : 4) : tf_dtype_size(to);
  const int64_t in_size = from == TF_F32 ? (f64 ? 8 : 4) : tf_dtype_size(from);
  void *out = th_alloc((size_t)(n * size));
  run_cast(f64, from, to, in, out, n);
  begin_entry("cast");
  fprintf(manifest, ", \"name\": \"cast %s -> %s (%s build)\", \"build\": \"%s\", \"from\": \"%s\", \"to\": \"%s\"",
          tf_dtype_name(from), tf_dtype_name(to), f64 ? "f64" : "f32", f64 ? "f64" : "f32", tf_dtype_name(from),
          tf_dtype_name(to));
  fprintf(manifest, ", \"input\": \"%s\"", write_npy("c", descr_of(from, f64), 1, &n, in, (size_t)in_size));
  fprintf(manifest, ", \"output\": \"%s\"}", write_npy("c", descr_of(to, f64), 1, &n, out, (size_t)size));
}

static void dump_casts(void) {
  // Floats spanning every f16/bf16 regime, with ties, limits and specials planted.
  static const double specials[] = {0.0,
                                    -0.0,
                                    1.0,
                                    1.0 + 0x1p-11,
                                    1.0 + 3 * 0x1p-11,
                                    1.0 + 0x1p-8,
                                    1.0 + 3 * 0x1p-8,
                                    65504,
                                    65519.99,
                                    65520,
                                    -65520,
                                    0x1p-24,
                                    0x1p-25,
                                    3 * 0x1p-26,
                                    0x1p-14,
                                    0x1p-14 - 0x1p-25,
                                    3.3895313892515355e38,
                                    1e-40,
                                    1e30,
                                    2.5,
                                    -7.75};
  const int64_t n = 4096, n_special = (int64_t)(sizeof(specials) / sizeof(specials[0]));
  float *floats = th_alloc(sizeof(float) * (size_t)n);
  double *doubles = th_alloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    double magnitude = pow(10.0, th_uniform(-9, 6)) * (th_integer(0, 1) ? 1 : -1);
    doubles[i] = i < n_special        ? specials[i]
                 : i == n_special     ? INFINITY
                 : i == n_special + 1 ? -INFINITY
                 : i == n_special + 2 ? NAN
                                      : magnitude;
    floats[i] = (float)doubles[i];
  }
  dump_cast(false, TF_F32, TF_F16, floats, n);
  dump_cast(false, TF_F32, TF_BF16, floats, n);
  dump_cast(true, TF_F32, TF_F16, doubles, n);
  uint16_t *patterns = th_alloc(sizeof(uint16_t) * 65536);
  for (int64_t i = 0; i < 65536; i++)
    patterns[i] = (uint16_t)i;
  dump_cast(false, TF_F16, TF_F32, patterns, 65536);
  dump_cast(false, TF_BF16, TF_F32, patterns, 65536);
  dump_cast(true, TF_F16, TF_F32, patterns, 65536);
  // Float to integer within range (truncation), integers to floats and to narrower integers (wrap).
  float *in_range = th_alloc(sizeof(float) * 1024);
  for (int64_t i = 0; i < 1024; i++)
    in_range[i] = (float)th_uniform(-0.99, 255.99);
  dump_cast(false, TF_F32, TF_U8, in_range, 1024);
  for (int64_t i = 0; i < 1024; i++)
    in_range[i] = (float)th_uniform(-2e9, 2e9);
  dump_cast(false, TF_F32, TF_I32, in_range, 1024);
  dump_cast(false, TF_F32, TF_I64, in_range, 1024);
  int64_t *wide = th_alloc(sizeof(int64_t) * 1024);
  for (int64_t i = 0; i < 1024; i++)
    wide[i] = th_integer(-((int64_t)1 << 40), (int64_t)1 << 40);
  dump_cast(false, TF_I64, TF_I32, wide, 1024);
  dump_cast(false, TF_I64, TF_U8, wide, 1024);
  dump_cast(false, TF_I64, TF_F32, wide, 1024);
  dump_cast(true, TF_I64, TF_F32, wide, 1024);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  directory = argv[1];
  char path[4096];
  snprintf(path, sizeof(path), "%s/manifest.json", directory);
  manifest = fopen(path, "w");
  if (!manifest) {
    perror(path);
    return 2;
  }
  th_seed(99);
  th_context = (tf_cpu_context){.threads = 2, .optimizer_step = 1, .micro_step = 5, .seed = 424242};
  fprintf(manifest, "[");
  dump_calls();
  tf_attrs sgd = th_optimizer(0.1f, 0.9f, 0, 0, 0, 0.01f, 0.5f, 1.0f / MICRO);
  tf_attrs sgd_plain = th_optimizer(0.05f, 0, 0, 0, 0, 0, 0, 1.0f / MICRO);
  tf_attrs adamw = th_optimizer(0.01f, 0, 0.9f, 0.999f, 1e-8f, 0.05f, 0.5f, 1.0f / MICRO);
  tf_attrs adamw_loose = th_optimizer(0.002f, 0, 0.8f, 0.99f, 1e-6f, 0, 100.0f, 1.0f / MICRO);
  dump_sequence("momentum 0.9, decay 0.01", TF_OP_SGD, sgd, true, 1);
  dump_sequence("momentum 0.9, decay 0.01", TF_OP_SGD, sgd, false, 1);
  dump_sequence("no momentum, no decay", TF_OP_SGD, sgd_plain, false, 1);
  dump_sequence("decay 0.05", TF_OP_ADAMW, adamw, true, 1);
  dump_sequence("decay 0.05", TF_OP_ADAMW, adamw, false, 1);
  dump_sequence("betas 0.8/0.99, no decay, clip 100", TF_OP_ADAMW, adamw_loose, true, 1);
  dump_sequence("decay 0.05, from step 1000", TF_OP_ADAMW, adamw, true, 1000);
  dump_casts();
  fprintf(manifest, "\n]\n");
  fclose(manifest);
  printf("wrote %d files and %s\n", n_files, path);
  th_release();
  return 0;
}
