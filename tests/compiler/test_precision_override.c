/* Per-node precision overrides (issue 14, item 1) in compiled plans of the 4-layer zoo mlp at N=256,
 * whose arena peaks while every saved activation is live (so storage shows in the arena):
 *   - under bf16, a node overridden to f32 has no stored copy while its neighbours keep their
 *     stored_bf16 buffers, and the arena grows back toward the f32 plan's;
 *   - under f32, a node overridden to bf16 (or f16) gets the only stored buffer, of that dtype and
 *     half the bytes, and the arena shrinks below the f32 plan's; under f16 a bf16 override wins;
 *   - a half override on the logits (the loss op's input) is ignored, and the plan's notes say so;
 *   - a loss summing two heads (xtts-gpt shrunk) keeps both heads' logits f32;
 *   - the vulkan target takes a half override (stores that node in bf16);
 *   - with overrides the mlp learns (AdamW, lr 3e-3, 20 steps on a learnable task: the class is the
 *     largest of the first 10 inputs): finite losses that fall, within 1% of the f32 run's.
 * Buffers, dtypes and arena sizes are read from the plans the compiler returns. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

#define STEPS 20

/* A node's precision override, by node name. */
typedef struct override {
  const char *node;
  tf_precision precision;
} override;

/* The 4-layer mlp with `overrides` applied (through the public builder API). */
static tf_graph *mlp_with(const override *overrides, int32_t n) {
  const char *params[] = {"layers=4"};
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build("mlp", params, 1, &g);
  CHECK(&counts, status == NULL, "zoo mlp: %s", tf_status_message(status));
  tf_status_free(status);
  for (int32_t i = 0; g && i < n; i++) {
    int32_t node = tf_graph_find_node(g, overrides[i].node);
    CHECK(&counts, node >= 0, "the mlp has no node '%s'", overrides[i].node);
    CHECK_OK(&counts, tf_graph_set_node_precision(g, node, overrides[i].precision));
  }
  return g;
}

/* Compiles the mlp at N=256 under `policy` with `overrides`; returns the status (NULL: *plan set). */
static tf_status compile_mlp(tf_precision policy, const override *overrides, int32_t n, tf_target_kind target,
                             tf_plan **plan) {
  *plan = NULL;
  tf_graph *g = mlp_with(overrides, n);
  if (!g)
    return tf_status_new(TF_ERR_INTERNAL, "no graph");
  tf_compile_options options = tf_compile_options_default(target);
  options.bindings = "N=256";
  options.set_precision = true;
  options.precision = policy;
  options.optimizer = TF_OPTIMIZER_ADAMW;
  options.learning_rate = 3e-3;
  tf_status status = tf_compile(g, &options, plan);
  tf_graph_destroy(g);
  return status;
}

static tf_plan *compile_ok(const char *what, tf_precision policy, const override *overrides, int32_t n) {
  tf_plan *plan = NULL;
  tf_status status = compile_mlp(policy, overrides, n, TF_TARGET_CPU, &plan);
  CHECK(&counts, status == NULL, "%s: compile: %s", what, tf_status_message(status));
  tf_status_free(status);
  return plan;
}

/* The buffer named "<tensor>/stored_<dtype>" for any half dtype, or NULL. */
static const tf_plan_buffer *stored_copy(const tf_plan *plan, const char *tensor) {
  size_t length = strlen(tensor);
  for (int32_t i = 0; plan && i < plan->n_buffers; i++) {
    const char *name = plan->buffers[i].name;
    if (strncmp(name, tensor, length) == 0 && strncmp(name + length, "/stored_", 8) == 0)
      return &plan->buffers[i];
  }
  return NULL;
}

static int32_t count_stored(const tf_plan *plan) {
  int32_t n = 0;
  for (int32_t i = 0; plan && i < plan->n_buffers; i++)
    n += strstr(plan->buffers[i].name, "/stored_") != NULL;
  return n;
}

static int64_t arena(const tf_plan *plan) { return plan ? plan->region_bytes[TF_REGION_ARENA] : -1; }

/* Checks that `tensor` has a stored copy of `dtype` in `plan` (or none, with TF_DTYPE_COUNT). */
static void expect_stored(const char *what, const tf_plan *plan, const char *tensor, tf_dtype dtype) {
  const tf_plan_buffer *b = stored_copy(plan, tensor);
  if (dtype == TF_DTYPE_COUNT) {
    CHECK(&counts, b == NULL, "%s: '%s' has a stored copy '%s'; its f32 override should keep it f32", what, tensor,
          b ? b->name : "");
    printf("  %-34s %-16s no stored copy (kept f32)\n", what, tensor);
    return;
  }
  CHECK(&counts, b != NULL && b->dtype == dtype, "%s: '%s' should have a stored %s copy, has %s", what, tensor,
        tf_dtype_name(dtype), b ? tf_dtype_name(b->dtype) : "none");
  if (b)
    printf("  %-34s %-16s %-28s %s, %" PRId64 " bytes\n", what, tensor, b->name, tf_dtype_name(b->dtype), b->bytes);
}

static const char *notes_line(const tf_plan *plan) {
  const char *line = plan && plan->report.notes ? strstr(plan->report.notes, "precision:") : NULL;
  return line ? line : "";
}

static void plan_effects(void) {
  printf("plans of the 4-layer mlp at N=256 (buffers and dtypes as planned):\n");
  tf_plan *f32 = compile_ok("f32", TF_PRECISION_F32, NULL, 0);
  tf_plan *bf16 = compile_ok("bf16", TF_PRECISION_BF16, NULL, 0);
  const override keep = {"hidden.1/relu", TF_PRECISION_F32};
  tf_plan *bf16_keep = compile_ok("bf16, hidden.1/relu=f32", TF_PRECISION_BF16, &keep, 1);
  const override store = {"hidden.1/relu", TF_PRECISION_BF16};
  tf_plan *f32_store = compile_ok("f32, hidden.1/relu=bf16", TF_PRECISION_F32, &store, 1);
  const override mixed[] = {{"hidden.1/relu", TF_PRECISION_F16}, {"hidden.2/relu", TF_PRECISION_BF16}};
  tf_plan *f32_mixed = compile_ok("f32, hidden.1/relu=f16, hidden.2/relu=bf16", TF_PRECISION_F32, mixed, 2);
  tf_plan *f16_other = compile_ok("f16, hidden.1/relu=bf16", TF_PRECISION_F16, &store, 1);

  CHECK(&counts, count_stored(f32) == 0, "the f32 plan stores %d activations", count_stored(f32));
  expect_stored("bf16 policy", bf16, "hidden.1/relu", TF_BF16);
  expect_stored("bf16 policy, hidden.1/relu=f32", bf16_keep, "hidden.1/relu", TF_DTYPE_COUNT);
  expect_stored("bf16 policy, hidden.1/relu=f32", bf16_keep, "hidden.0/relu", TF_BF16);
  expect_stored("bf16 policy, hidden.1/relu=f32", bf16_keep, "hidden.2/relu", TF_BF16);
  CHECK(&counts, count_stored(bf16_keep) == count_stored(bf16) - 1, "bf16 with one f32 override stores %d, bf16 %d",
        count_stored(bf16_keep), count_stored(bf16));
  expect_stored("f32 policy, hidden.1/relu=bf16", f32_store, "hidden.1/relu", TF_BF16);
  CHECK(&counts, count_stored(f32_store) == 1, "f32 with one bf16 override stores %d activations",
        count_stored(f32_store));
  const tf_plan_buffer *half = stored_copy(f32_store, "hidden.1/relu");
  CHECK(&counts, half && half->bytes == 256 * 128 * 2, "the stored copy of hidden.1/relu [256,128] holds %" PRId64,
        half ? half->bytes : -1);
  expect_stored("f32 policy, two relus f16, bf16", f32_mixed, "hidden.1/relu", TF_F16);
  expect_stored("f32 policy, two relus f16, bf16", f32_mixed, "hidden.2/relu", TF_BF16);
  CHECK(&counts, count_stored(f32_mixed) == 2, "f32 with two overrides stores %d activations", count_stored(f32_mixed));
  expect_stored("f16 policy, hidden.1/relu=bf16", f16_other, "hidden.1/relu", TF_BF16);
  expect_stored("f16 policy, hidden.1/relu=bf16", f16_other, "hidden.0/relu", TF_F16);

  /* The arena: keeping one activation f32 under bf16 costs bytes; storing one in bf16 under f32
   * saves some; both stay between the all-bf16 and all-f32 plans. */
  printf("  arena: f32 %" PRId64 ", bf16 %" PRId64 ", bf16 + hidden.1/relu=f32 %" PRId64
         ", f32 + hidden.1/relu=bf16 %" PRId64 " bytes\n",
         arena(f32), arena(bf16), arena(bf16_keep), arena(f32_store));
  CHECK(&counts, arena(bf16) < arena(bf16_keep) && arena(bf16_keep) < arena(f32),
        "arena: bf16 %" PRId64 " < bf16 with an f32 override %" PRId64 " < f32 %" PRId64 " expected", arena(bf16),
        arena(bf16_keep), arena(f32));
  CHECK(&counts, arena(bf16) < arena(f32_store) && arena(f32_store) < arena(f32),
        "arena: bf16 %" PRId64 " < f32 with a bf16 override %" PRId64 " < f32 %" PRId64 " expected", arena(bf16),
        arena(f32_store), arena(f32));

  /* The notes count the nodes whose override applied; without overrides they read as before. */
  printf("  notes: %.*s\n", (int)strcspn(notes_line(f32_mixed), "\n"), notes_line(f32_mixed));
  CHECK(&counts, strstr(notes_line(f32_mixed), "policy f32; node overrides applied on 2 nodes") != NULL,
        "notes of f32 with two overrides: %s", notes_line(f32_mixed));
  CHECK(&counts, strncmp(notes_line(f32), "precision: f32\n", 15) == 0, "notes of the f32 plan: %s", notes_line(f32));
  CHECK(&counts, strstr(notes_line(bf16), "precision: bf16 storage for the 4 activations") != NULL,
        "notes of the bf16 plan: %s", notes_line(bf16));

  tf_plan *plans[] = {f32, bf16, bf16_keep, f32_store, f32_mixed, f16_other};
  for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++)
    tf_plan_destroy(plans[i]);
}

/* The logits feed the loss op: a half override there is ignored, with a note. */
static void loss_input_ignored(void) {
  const override logits = {"head/add", TF_PRECISION_F16};
  tf_plan *plan = compile_ok("bf16, head/add=f16", TF_PRECISION_BF16, &logits, 1);
  CHECK(&counts, stored_copy(plan, "head/add") == NULL, "the logits got a stored copy '%s'",
        stored_copy(plan, "head/add") ? stored_copy(plan, "head/add")->name : "");
  CHECK(&counts, strstr(notes_line(plan), "applied on 0 nodes, ignored on 1 (feeds the loss: stays f32)") != NULL,
        "notes: %s", notes_line(plan));
  printf("half override on the logits: no stored copy; notes: %.*s\n", (int)strcspn(notes_line(plan), "\n"),
         notes_line(plan));
  tf_plan_destroy(plan);
}

/* A loss that sums two heads' cross entropies (xtts-gpt, shrunk, heads left unfused): both heads'
 * logits feed the loss expression and stay f32 under bf16, not only the loss node's inputs. */
static void summed_loss_heads_stay_f32(void) {
  const char *knobs[] = {"layers=1", "d_model=64", "heads=2", "text_vocab=40", "audio_vocab=30"};
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build("xtts-gpt", knobs, 5, &g);
  tf_plan *plan = NULL;
  if (!status) {
    tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
    options.bindings = "N=2,Ta=12";
    options.set_precision = true;
    options.precision = TF_PRECISION_BF16;
    options.optimizer = TF_OPTIMIZER_ADAMW;
    options.fuse_loss = TF_FUSE_LOSS_OFF;
    status = tf_compile(g, &options, &plan);
  }
  CHECK(&counts, status == NULL, "xtts-gpt bf16: %s", tf_status_message(status));
  const char *heads[] = {"text_logits", "audio_logits"};
  int32_t stored_elsewhere = 0;
  for (int32_t i = 0; plan && i < plan->n_buffers; i++)
    stored_elsewhere += plan->buffers[i].dtype == TF_BF16;
  for (int h = 0; plan && h < 2; h++)
    CHECK(&counts, stored_copy(plan, heads[h]) == NULL, "xtts-gpt bf16: the %s got a stored copy '%s'", heads[h],
          stored_copy(plan, heads[h]) ? stored_copy(plan, heads[h])->name : "");
  CHECK(&counts, stored_elsewhere > 0, "xtts-gpt bf16 stores nothing in bf16");
  printf("summed loss of two heads under bf16: both logits f32, %d other activations stored bf16\n", stored_elsewhere);
  tf_status_free(status);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* The vulkan target stores half tensors too (its casts are bit for bit the CPU's): a bf16
 * override compiles for it and stores that node's activation in bf16. */
static void vulkan_takes_half(void) {
  const override store = {"hidden.1/relu", TF_PRECISION_BF16};
  tf_plan *plan = NULL;
  tf_status status = compile_mlp(TF_PRECISION_F32, &store, 1, TF_TARGET_VULKAN, &plan);
  int32_t stored = 0;
  for (int32_t i = 0; plan && i < plan->n_buffers; i++)
    stored += plan->buffers[i].dtype == TF_BF16;
  CHECK(&counts, status == NULL && stored == 1, "vulkan with a bf16 override: %s, %d bf16 buffers",
        status ? tf_status_message(status) : "compiled", stored);
  printf("vulkan, f32 policy, hidden.1/relu=bf16: compiled, %d bf16 buffer\n", stored);
  tf_status_free(status);
  tf_plan_destroy(plan);
}

/* The first buffer of `role` (the first half of a double buffer), or NULL. */
static const tf_plan_buffer *io_buffer(const tf_plan *plan, tf_buffer_role role) {
  for (int32_t i = 0; i < plan->n_buffers; i++)
    if (plan->buffers[i].role == role && (plan->buffers[i].io_twin < 0 || plan->buffers[i].io_twin > i))
      return &plan->buffers[i];
  return NULL;
}

/* Trains STEPS optimizer steps on fixed data (the same for every plan): inputs x [N, 64] uniform
 * in [-1, 1), each sample's label the index of its largest of the first 10 inputs. */
static void train(const char *what, const tf_plan *plan, double *losses) {
  const tf_plan_buffer *x = io_buffer(plan, TF_ROLE_INPUT), *y = io_buffer(plan, TF_ROLE_LABEL);
  CHECK(&counts, x && y && x->dtype == TF_F32 && y->dtype == TF_I32 && x->rank == 2 && x->shape[1] >= 10,
        "%s: the mlp's input and labels are not f32 [N, 64] and i32 [N]", what);
  if (!x || !y || x->dtype != TF_F32 || y->dtype != TF_I32 || x->rank != 2 || x->shape[1] < 10)
    return;
  int64_t rows = x->shape[0], columns = x->shape[1];
  float *inputs = malloc((size_t)x->bytes);
  int32_t *labels = malloc((size_t)y->bytes);
  tf_session *session = NULL;
  tf_status status = inputs && labels ? tf_session_create(plan, NULL, &session)
                                      : tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for the data");
  CHECK(&counts, status == NULL, "%s: session: %s", what, tf_status_message(status));
  tf_status_free(status);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int step = 0; session && step < STEPS; step++) {
    for (int64_t r = 0; r < rows; r++) {
      labels[r] = 0;
      for (int64_t c = 0; c < columns; c++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        inputs[r * columns + c] = (float)(state % 2000) / 1000.0f - 1.0f;
        if (c < 10 && inputs[r * columns + c] > inputs[r * columns + labels[r]])
          labels[r] = (int32_t)c;
      }
    }
    CHECK_OK(&counts, tf_session_write(session, x->name, inputs, x->bytes));
    CHECK_OK(&counts, tf_session_write(session, y->name, labels, y->bytes));
    CHECK_OK(&counts, tf_session_micro_step(session, &losses[step]));
    CHECK_OK(&counts, tf_session_optimizer_step(session));
  }
  tf_session_destroy(session);
  free(inputs);
  free(labels);
}

static void training_tracks_f32(void) {
  const override keep = {"hidden.1/relu", TF_PRECISION_F32};
  const override store[] = {{"hidden.1/relu", TF_PRECISION_BF16}, {"hidden.2/relu", TF_PRECISION_F16}};
  tf_plan *plans[3] = {compile_ok("f32", TF_PRECISION_F32, NULL, 0),
                       compile_ok("bf16, hidden.1/relu=f32", TF_PRECISION_BF16, &keep, 1),
                       compile_ok("f32, hidden.1/relu=bf16, hidden.2/relu=f16", TF_PRECISION_F32, store, 2)};
  const char *names[3] = {"f32", "bf16 + hidden.1/relu=f32", "f32 + hidden.1/relu=bf16, hidden.2/relu=f16"};
  double losses[3][STEPS];
  for (int p = 0; p < 3; p++) {
    for (int s = 0; s < STEPS; s++)
      losses[p][s] = NAN;
    if (plans[p])
      train(names[p], plans[p], losses[p]);
  }
  printf("training %d AdamW steps on a learnable task (loss at steps 1, 5, 10, 20):\n", STEPS);
  for (int p = 0; p < 3; p++) {
    double worst = 0;
    bool finite = true;
    for (int s = 0; s < STEPS; s++) {
      finite = finite && isfinite(losses[p][s]);
      double difference = fabs(losses[p][s] - losses[0][s]) / fabs(losses[0][s]);
      worst = difference > worst ? difference : worst;
    }
    printf("  %-44s %.6f %.6f %.6f %.6f   worst difference from f32 %.4f%%\n", names[p], losses[p][0], losses[p][4],
           losses[p][9], losses[p][STEPS - 1], 100 * worst);
    CHECK(&counts, finite && worst <= 0.01, "%s: a loss is not finite or differs from f32 by %.4f%% (limit 1%%)",
          names[p], 100 * worst);
    CHECK(&counts, losses[p][STEPS - 1] < 0.9 * losses[p][0], "%s: the loss fell from %g to %g only", names[p],
          losses[p][0], losses[p][STEPS - 1]);
  }
  for (int p = 0; p < 3; p++)
    tf_plan_destroy(plans[p]);
}

int main(void) {
  plan_effects();
  loss_input_ignored();
  summed_loss_heads_stay_f32();
  vulkan_takes_half();
  training_tracks_f32();
  return tf_test_finish("precision_override", &counts);
}
