/* The CUDA backend's fused launches on a GPU (backends/cuda/cuda_fuse.h): a few training steps of
 * each model with everything fused (the GELU epilogue on every type: TIGHTFIT_CUDA_GELU_EPILOGUE=all,
 * where by default only f16 products take it), with TIGHTFIT_CUDA_EPILOGUES=0, and with both switches off.
 *   - Fused vs epilogues off (the multi-tensor optimizer on in both): every loss within the model's
 *     relative tolerance, every weight finite, and at most a small share of them more than half a
 *     learning rate apart. Not bit for bit: the bias epilogue adds the bias in f32 before rounding
 *     once (the plan rounds y, adds, rounds again: one rounding on f32 data, up to a unit of bf16 on
 *     bf16 data), cuBLASLt's GELU uses its own tanh, and BGRADB/BGRADA sum dz in f32 in cuBLASLt's
 *     order where sum_to sums in double. AdamW moves a weight by about lr a step whatever its
 *     gradient's size, so weights differ where a small gradient changed sign; a wrong epilogue (a
 *     missing bias, a transposed bias gradient) moves far more of them.
 *   - Epilogues off, multi-tensor on vs both off: losses, parameters and optimizer state equal bit
 *     for bit (the multi-tensor kernel runs the one-tensor kernels' rounded operations).
 *   - The groups are really used: a fourth session with TIGHTFIT_CUDA_PROFILE writes the backend's
 *     "fused groups: A of B active" lines; every bias and optimizer group must be active (else the
 *     comparison would be vacuous), a refused gelu or bias-gradient group is printed with its reason.
 * Exits 77 without a CUDA device. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_test.h"
#include "half_model.h"
#include "zoo_plans.h"

enum { STEPS = 4 };

static tf_test_counts counts;

typedef struct model {
  const char *label, *preset, *bindings;
  const char *overrides[6];
  int32_t n_overrides, int_high;
  tf_optimizer optimizer;
  double learning_rate;
  int32_t accumulate;
  tf_precision precision;
  tf_dtype matmul_math, autocast;
  double loss_tolerance, far_share; /* relative loss difference; share of weights > lr/2 apart */
} model;

#define GPT_2_LAYERS                                                                                                   \
  { "layers=2", "d_model=64", "heads=4", "vocab=64", "ctx=32", "seq=16" }
static const model MODELS[] = {
    {.label = "gpt 2 layers f32",
     .preset = "gpt",
     .bindings = "N=4,T=16",
     .overrides = GPT_2_LAYERS,
     .n_overrides = 6,
     .int_high = 64,
     .optimizer = TF_OPTIMIZER_ADAMW,
     .learning_rate = 1e-3,
     .accumulate = 1,
     .precision = TF_PRECISION_F32,
     .matmul_math = TF_F32,
     .loss_tolerance = 1e-4,
     .far_share = 0.01},
    {.label = "gpt 2 layers bf16 storage, bf16 math",
     .preset = "gpt",
     .bindings = "N=4,T=16",
     .overrides = GPT_2_LAYERS,
     .n_overrides = 6,
     .int_high = 64,
     .optimizer = TF_OPTIMIZER_ADAMW,
     .learning_rate = 1e-3,
     .accumulate = 1,
     .precision = TF_PRECISION_BF16,
     .matmul_math = TF_BF16,
     .loss_tolerance = 2e-2,
     .far_share = 0.05},
    /* autocast: each bias cast to bf16 between its matmul and its add, the groups launched at the add */
    {.label = "gpt 2 layers autocast bf16",
     .preset = "gpt",
     .bindings = "N=4,T=16",
     .overrides = GPT_2_LAYERS,
     .n_overrides = 6,
     .int_high = 64,
     .optimizer = TF_OPTIMIZER_ADAMW,
     .learning_rate = 1e-3,
     .accumulate = 1,
     .precision = TF_PRECISION_F32,
     .matmul_math = TF_F32,
     .autocast = TF_BF16,
     .loss_tolerance = 2e-2,
     .far_share = 0.05},
    {.label = "mlp sgd",
     .preset = "mlp",
     .bindings = "N=8",
     .int_high = 10,
     .optimizer = TF_OPTIMIZER_SGD,
     .learning_rate = 0.05,
     .accumulate = 1,
     .precision = TF_PRECISION_F32,
     .matmul_math = TF_F32,
     .loss_tolerance = 1e-4,
     .far_share = 0.01},
    /* gradient accumulation: weight gradients through matmul_accumulate, updates zeroing them */
    {.label = "mlp adamw, 2 micro-batches",
     .preset = "mlp",
     .bindings = "N=8",
     .int_high = 10,
     .optimizer = TF_OPTIMIZER_ADAMW,
     .learning_rate = 1e-3,
     .accumulate = 2,
     .precision = TF_PRECISION_F32,
     .matmul_math = TF_F32,
     .loss_tolerance = 1e-4,
     .far_share = 0.01},
};

static tf_plan *compile_model(const model *m) {
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CUDA);
  o.bindings = m->bindings;
  o.optimizer = m->optimizer;
  o.learning_rate = m->learning_rate;
  o.accumulate = m->accumulate;
  o.clip_norm = 1.0; /* the updates read norm_sq: the fused coefficient kernel must honour it */
  o.set_precision = m->precision != TF_PRECISION_F32;
  o.precision = m->precision;
  o.matmul_math = m->matmul_math;
  o.autocast = m->autocast; /* TF_F32 where not given: off */
  return tf_test_zoo_plan(&counts, m->label, m->preset, m->overrides, m->n_overrides, &o);
}

/* What a run leaves: losses, and every parameter and optimizer-state buffer, concatenated. */
typedef struct outcome {
  double losses[STEPS];
  unsigned char *params, *state;
  int64_t param_bytes, state_bytes;
  bool ran;
} outcome;

static void outcome_free(outcome *o) {
  free(o->params);
  free(o->state);
  memset(o, 0, sizeof(*o));
}

static int64_t role_bytes(const tf_plan *plan, tf_buffer_role role) {
  int64_t bytes = 0;
  for (int32_t b = 0; b < plan->n_buffers; b++)
    bytes += plan->buffers[b].role == role ? plan->buffers[b].bytes : 0;
  return bytes;
}

static tf_status read_role(tf_session *session, const tf_plan *plan, tf_buffer_role role, unsigned char *out) {
  int64_t at = 0;
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    if (plan->buffers[b].role != role)
      continue;
    TF_RETURN_IF_ERROR(tf_session_read(session, plan->buffers[b].name, out + at, plan->buffers[b].bytes));
    at += plan->buffers[b].bytes;
  }
  return NULL;
}

/* Trains STEPS steps with the two switches as given (and the profile written to `profile` when not
 * NULL), the environment read by the session's prepare. */
static void train(const model *m, const tf_plan *plan, const char *epilogues, const char *multi_tensor,
                  const char *profile, outcome *out) {
  memset(out, 0, sizeof(*out));
  setenv("TIGHTFIT_CUDA_EPILOGUES", epilogues, 1);
  setenv("TIGHTFIT_CUDA_MULTI_TENSOR", multi_tensor, 1);
  setenv("TIGHTFIT_CUDA_GELU_EPILOGUE", "all", 1);
  if (profile)
    setenv("TIGHTFIT_CUDA_PROFILE", profile, 1);
  tf_session_options options = tf_session_options_default();
  options.backend = "cuda";
  options.seed = 7;
  tf_session *session = NULL;
  tf_status status = tf_session_create(plan, &options, &session);
  for (int32_t step = 0; !status && step < STEPS; step++)
    status = cuda_test_train_step(session, plan, m->int_high, step * plan->accumulate, &out->losses[step]);
  out->param_bytes = role_bytes(plan, TF_ROLE_PARAMETER);
  out->state_bytes = role_bytes(plan, TF_ROLE_OPTIMIZER_STATE);
  out->params = malloc((size_t)out->param_bytes + 1);
  out->state = malloc((size_t)out->state_bytes + 1);
  if (!status && (!out->params || !out->state))
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "reading back %lld bytes", (long long)out->param_bytes);
  if (!status)
    status = read_role(session, plan, TF_ROLE_PARAMETER, out->params);
  if (!status)
    status = read_role(session, plan, TF_ROLE_OPTIMIZER_STATE, out->state);
  CHECK(&counts, status == NULL, "%s (epilogues %s, multi-tensor %s): %s", m->label, epilogues, multi_tensor,
        tf_status_message(status));
  out->ran = status == NULL;
  tf_status_free(status);
  tf_session_destroy(session); /* writes the profile */
  unsetenv("TIGHTFIT_CUDA_PROFILE");
  unsetenv("TIGHTFIT_CUDA_EPILOGUES");
  unsetenv("TIGHTFIT_CUDA_MULTI_TENSOR");
  unsetenv("TIGHTFIT_CUDA_GELU_EPILOGUE");
}

/* Fused vs unfused epilogues: losses within tolerance, few weights more than lr / 2 apart. */
static void compare_close(const model *m, const tf_plan *plan, const outcome *fused, const outcome *plain) {
  if (!fused->ran || !plain->ran)
    return;
  double worst_loss = 0;
  for (int i = 0; i < STEPS; i++) {
    const double relative = fabs(fused->losses[i] - plain->losses[i]) / fmax(fabs(plain->losses[i]), 1e-12);
    if (!isfinite(relative) || relative > worst_loss) /* NaN stays and fails the check below */
      worst_loss = isfinite(worst_loss) ? relative : worst_loss;
  }
  int64_t far = 0, non_finite = 0, n = 0;
  double worst = 0;
  int64_t at = 0;
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    const tf_plan_buffer *buffer = &plan->buffers[b];
    if (buffer->role != TF_ROLE_PARAMETER)
      continue;
    if (buffer->dtype == TF_F32)
      for (int64_t i = 0; i < buffer->bytes / 4; i++) {
        float x, y;
        memcpy(&x, fused->params + at + 4 * i, 4);
        memcpy(&y, plain->params + at + 4 * i, 4);
        const double difference = fabs((double)x - (double)y);
        non_finite += !isfinite(x);
        far += difference > m->learning_rate / 2;
        worst = difference > worst ? difference : worst;
        n++;
      }
    at += buffer->bytes;
  }
  const bool ok = worst_loss <= m->loss_tolerance && non_finite == 0 && far <= m->far_share * (double)n && n > 0;
  CHECK(&counts, ok,
        "%s: fused vs TIGHTFIT_CUDA_EPILOGUES=0: worst relative loss difference %.3g (tolerance %.3g); %lld of %lld "
        "weights more than lr/2 apart (at most %.0f%%), %lld not finite, largest difference %.3g",
        m->label, worst_loss, m->loss_tolerance, (long long)far, (long long)n, 100 * m->far_share,
        (long long)non_finite, worst);
  printf("%-4s %s: fused vs epilogues off: losses %.7f -> %.7f vs %.7f -> %.7f (worst relative %.3g), %lld of %lld "
         "weights > lr/2 apart, largest %.3g\n",
         ok ? "ok" : "FAIL", m->label, fused->losses[0], fused->losses[STEPS - 1], plain->losses[0],
         plain->losses[STEPS - 1], worst_loss, (long long)far, (long long)n, worst);
}

/* The multi-tensor optimizer against the one-tensor launches: bit for bit. */
static void compare_exact(const model *m, const outcome *multi, const outcome *single) {
  if (!multi->ran || !single->ran)
    return;
  const bool ok = memcmp(multi->losses, single->losses, sizeof(multi->losses)) == 0 &&
                  memcmp(multi->params, single->params, (size_t)multi->param_bytes) == 0 &&
                  memcmp(multi->state, single->state, (size_t)multi->state_bytes) == 0;
  CHECK(&counts, ok, "%s: the multi-tensor optimizer differs from the one-tensor launches (losses %.9g vs %.9g)",
        m->label, multi->losses[STEPS - 1], single->losses[STEPS - 1]);
  printf("%-4s %s: multi-tensor vs one-tensor updates: losses, %lld parameter and %lld optimizer-state bytes equal "
         "bit for bit\n",
         ok ? "ok" : "FAIL", m->label, (long long)multi->param_bytes, (long long)multi->state_bytes);
}

/* The groups the backend found, from the profiled session's file: every bias and optimizer group
 * must be active (cuBLASLt has the bias epilogue for every type here; the optimizer needs no
 * library), and at least one group at all. A refused bias+gelu or bias-gradient group is printed
 * with cuBLASLt's reason, not failed: its steps then run as compiled, which is correct, only slower,
 * and the line says what to look at. */
static void check_groups_active(const model *m, const char *profile) {
  FILE *f = fopen(profile, "r");
  char line[512];
  int active = -1, found = -1, refused_required = 0;
  bool printed = false;
  while (f && fgets(line, sizeof(line), f)) {
    if (sscanf(line, "fused groups: %d of %d active", &active, &found) == 2)
      printed = true;
    if (!printed || strncmp(line, "  ", 2) != 0)
      continue;
    const bool off = strstr(line, ": off, ") != NULL;
    const bool required = strncmp(line + 2, "bias steps", 10) == 0 || strncmp(line + 2, "optimizer", 9) == 0;
    refused_required += off && required;
    printf("%s %s: %s", off ? (required ? "FAIL" : "note") : "    ", m->label, line + 2);
  }
  if (f)
    fclose(f);
  const bool ok = printed && active > 0 && refused_required == 0;
  CHECK(&counts, ok, "%s: the profile (%s) says %d of %d fused groups active, %d bias or optimizer groups off",
        m->label, profile, active, found, refused_required);
  printf("%-4s %s: %d of %d fused groups active\n", ok ? "ok" : "FAIL", m->label, active, found);
}

static void test_model(const model *m) {
  tf_plan *plan = compile_model(m);
  if (!plan)
    return;
  char profile[] = "/tmp/tightfit-fuse-profile-XXXXXX";
  const int fd = mkstemp(profile);
  if (fd >= 0)
    close(fd);
  outcome fused, plain, single, profiled;
  train(m, plan, "1", "1", NULL, &fused);
  train(m, plan, "0", "1", NULL, &plain);
  train(m, plan, "0", "0", NULL, &single);
  train(m, plan, "1", "1", fd >= 0 ? profile : NULL, &profiled);
  compare_close(m, plan, &fused, &plain);
  compare_exact(m, &plain, &single);
  /* the profile run launches step by step (no graphs): the same launches, the same bits */
  if (fused.ran && profiled.ran)
    CHECK(&counts, memcmp(fused.params, profiled.params, (size_t)fused.param_bytes) == 0,
          "%s: fused with graphs and fused step by step (profile) differ", m->label);
  if (fd >= 0) {
    check_groups_active(m, profile);
    unlink(profile);
  }
  outcome_free(&fused);
  outcome_free(&plain);
  outcome_free(&single);
  outcome_free(&profiled);
  tf_plan_destroy(plan);
}

/* The bf16 half-kernel model: its GEMMs and bias gradients on bf16 data. */
static void test_half_model(void) {
  tf_plan *plan = tf_half_model_compile(&counts, TF_BF16, TF_TARGET_CUDA, true);
  if (!plan)
    return;
  tf_half_model_outcome runs[2];
  const char *switches[2] = {"1", "0"};
  for (int r = 0; r < 2; r++) {
    setenv("TIGHTFIT_CUDA_EPILOGUES", switches[r], 1);
    tf_status status = tf_half_model_train(&counts, plan, "cuda", &runs[r]);
    CHECK(&counts, status == NULL, "half model (epilogues %s): %s", switches[r], tf_status_message(status));
    tf_status_free(status);
    unsetenv("TIGHTFIT_CUDA_EPILOGUES");
  }
  if (runs[0].ran && runs[1].ran) {
    /* bf16 data: the epilogue rounds once where the plan rounds twice (a unit of bf16, 2^-8 relative) */
    bool ok = true;
    int64_t far = 0;
    for (int i = 0; i < TF_HALF_MODEL_STEPS; i++)
      ok = ok && fabs(runs[0].losses[i] - runs[1].losses[i]) <= 0.02 * fabs(runs[1].losses[i]);
    for (int64_t i = 0; i < TF_HALF_MODEL_PARAMS; i++) {
      ok = ok && isfinite(runs[0].params[i]);
      far += fabs((double)runs[0].params[i] - (double)runs[1].params[i]) > 0.01 / 2; /* lr 0.01 */
    }
    ok = ok && far * 20 <= TF_HALF_MODEL_PARAMS;
    CHECK(&counts, ok, "half model bf16: fused losses %.7g .. %.7g vs %.7g .. %.7g, %lld weights > lr/2 apart",
          runs[0].losses[0], runs[0].losses[TF_HALF_MODEL_STEPS - 1], runs[1].losses[0],
          runs[1].losses[TF_HALF_MODEL_STEPS - 1], (long long)far);
    printf("%-4s half model bf16: fused vs epilogues off: losses %.7g vs %.7g, %lld of %d weights > lr/2 apart\n",
           ok ? "ok" : "FAIL", runs[0].losses[TF_HALF_MODEL_STEPS - 1], runs[1].losses[TF_HALF_MODEL_STEPS - 1],
           (long long)far, TF_HALF_MODEL_PARAMS);
  }
  tf_plan_destroy(plan);
}

int main(void) {
  const int device = cuda_test_device();
  if (device != 0)
    return device;
  for (size_t i = 0; i < sizeof(MODELS) / sizeof(MODELS[0]); i++)
    test_model(&MODELS[i]);
  test_half_model();
  return tf_test_finish("cuda fuse gpu", &counts);
}
