/* The CPU target's half kernels (targets/target.c; backends/cpu/cpu_half.h, core/half_slices.h): a
 * bf16 (and an f16) model whose activations are declared half (a matmul, a bias, an embedding, gelu,
 * a division and a product by a broadcast row statistic and a sqrt, layer norm, causal attention, a
 * matmul to logits and a cross-entropy of the half logits, whose loss is f32) compiled for the cpu target runs those
 * ops and their gradients on half data itself: each step's f32 kernel over slices of the first axis, the half operands
 * of a slice widened into the step's workspace and its half results rounded once from it. The plan compiled with
 * --no-half-kernels runs every one of them on whole f32 copies between casts. Three AdamW steps
 * give the same losses and the same weights bit for bit, on 2 threads, with the activations large
 * enough that the element-wise ops, the norm, the attention and the matmuls run as several slices
 * (counted from the plan). The half-kernel plan has fewer casts and a smaller arena, and its
 * training steps after the first make no heap allocation (the allocation probe, tests/alloc_probe,
 * when built: the slices' f32 copies live in the planned workspace), and moves no half data between
 * casts (a reshape, transpose or slice moves the half bytes themselves). A plan file that updates half
 * data in place (an accumulation) is refused by the CPU backend. */
#define _GNU_SOURCE /* the probe client's dlsym(RTLD_DEFAULT) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_probe/probe_client.h"
#include "backends/backend.h"
#include "check.h"
#include "core/half_slices.h"
#include "core/ops.h"
#include "half_model.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define ROWS 1024 /* 64 sequences of 16 */
#define SEQUENCE 16
#define WIDTH 48
#define HIDDEN 384 /* [1024, 384]: 7 slices of 170 rows; a matmul, 4 of 256 (whole row tiles) */
#define HEADS 4
#define CLASSES 40
#define VOCAB 11
#define STEPS 3
#define N_PARAMS (WIDTH * HIDDEN + 2 * HIDDEN + HIDDEN * CLASSES + VOCAB * HIDDEN)

static tf_test_counts counts;
static tf_probe probe; /* the allocation probe (tests/alloc_probe), or none: mark NULL */

/* x -> cast -> matmul(W1) + b1 + embedding(ids) -> gelu -> h / sqrt(e) * e (e = exp of h's row
 * mean) -> layer_norm -> causal attention -> + h -> matmul(W2) -> cross_entropy of the half logits
 * (an f32 loss). */
static tf_graph *build(tf_dtype half) {
  tf_graph *g = tf_test_graph_begin(&counts, "cpu_half_kernels");
  if (!g)
    return NULL;
  tf_tensor_id labels;
  tf_tensor_id h = tf_half_model_stem(g, half, ROWS, WIDTH, HIDDEN, VOCAB, &labels);
  /* ops whose gradients take several ops (div, sqrt, a product by a broadcast operand): autodiff
   * computes those chains in f32 and rounds each gradient once, as between casts */
  const int32_t last = 1;
  tf_tensor_id e = tf_unary(g, TF_OP_EXP, tf_reduce(g, TF_OP_MEAN, h, &last, 1, true));
  h = tf_mul(g, tf_div(g, h, tf_unary(g, TF_OP_SQRT, e)), e);
  tf_tensor_id gamma = tf_cast(g, tf_test_positive(g, "gamma", TF_SHAPE(d(HIDDEN))), half);
  tf_tensor_id normed = tf_layer_norm(g, h, gamma, TF_NO_TENSOR, 1e-5f);
  tf_tensor_id sequences = tf_reshape(g, normed, TF_SHAPE(d(ROWS / SEQUENCE), d(SEQUENCE), d(HIDDEN)));
  tf_tensor_id attended = tf_attention(g, sequences, sequences, sequences, HEADS, true);
  tf_tensor_id rows = tf_add(g, tf_reshape(g, attended, TF_SHAPE(d(ROWS), d(HIDDEN))), h);
  tf_tensor_id w2 = tf_cast(g, tf_test_param(g, "W2", TF_SHAPE(d(HIDDEN), d(CLASSES))), half);
  tf_graph_set_loss(g, tf_cross_entropy(g, tf_matmul(g, rows, w2, false, false), labels, -1));
  return g;
}

static tf_plan *compile(tf_dtype half, bool half_kernels) {
  return tf_half_model_compile_graph(&counts, build(half), TF_TARGET_CPU, half_kernels);
}

typedef struct plan_counts {
  int32_t casts, half_steps, sliced_steps;
  int32_t widened_moves; /* half data cast up, moved (reshape ...) and cast down again */
} plan_counts;

static tf_tensor_ref ref_of(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  return tf_tensor_ref_make(NULL, b->dtype, b->rank, b->shape);
}

/* Casts, steps on half data, those of them the CPU runs as more than one slice, and moves of half
 * data between casts (cast up, move, cast down: the half bytes could have moved). */
static plan_counts count_steps(const tf_plan *plan) {
  plan_counts c = {0, 0, 0, 0};
  /* a cast's f32 copy of half data; a move of such a copy */
  bool *widened = calloc((size_t)plan->n_buffers + 1, sizeof(bool)), *moved = calloc((size_t)plan->n_buffers + 1, 1);
  for (int32_t s = 0; widened && moved && s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    tf_tensor_ref in[TF_CPU_HALF_MAX_OPERANDS], out[TF_MAX_OUTPUTS];
    if (step->op == TF_OP_CAST) {
      const tf_dtype from = plan->buffers[step->inputs[0]].dtype, to = plan->buffers[step->outputs[0]].dtype;
      widened[step->outputs[0]] = from == TF_BF16 || from == TF_F16;
      c.widened_moves += moved[step->inputs[0]] && (to == TF_BF16 || to == TF_F16);
      c.casts++;
      continue;
    }
    if (tf_op_moves_elements(step->op) && step->n_inputs > 0 && widened[step->inputs[0]])
      moved[step->outputs[0]] = true;
    if (step->n_inputs > TF_CPU_HALF_MAX_OPERANDS)
      continue;
    for (int32_t k = 0; k < step->n_inputs; k++)
      in[k] = ref_of(plan, step->inputs[k]);
    for (int32_t k = 0; k < step->n_outputs; k++)
      out[k] = ref_of(plan, step->outputs[k]);
    if (!tf_cpu_half_step(step->op, step->n_inputs, in, step->n_outputs, out))
      continue;
    c.half_steps++;
    tf_cpu_half_slices slices;
    if (tf_cpu_half_slices_get(step->op, &step->attrs, step->n_inputs, in, step->n_outputs, out, 2, &slices))
      c.sliced_steps += slices.rows > slices.slice_rows;
  }
  free(widened);
  free(moved);
  return c;
}

/* What STEPS training steps give: each loss, then every parameter's bytes after the last. */
typedef struct outcome {
  double losses[STEPS];
  float params[N_PARAMS];
  int64_t allocations; /* the fewest heap allocations of one step after the first (probe), or -1 */
  bool ran;
} outcome;

static void feed(tf_session *s) {
  static float x[ROWS * WIDTH];
  int32_t labels[ROWS], ids[ROWS];
  for (int i = 0; i < ROWS * WIDTH; i++)
    x[i] = (float)sin(0.37 * i + 0.1);
  for (int i = 0; i < ROWS; i++) {
    labels[i] = (i * 7) % CLASSES;
    ids[i] = (i * 5) % VOCAB;
  }
  CHECK_OK(&counts, tf_session_write(s, "ids", ids, sizeof(ids)));
  CHECK_OK(&counts, tf_session_write(s, "x", x, sizeof(x)));
  CHECK_OK(&counts, tf_session_write(s, "labels", labels, sizeof(labels)));
}

static tf_status train(const tf_plan *plan, outcome *out) {
  memset(out, 0, sizeof(*out));
  tf_session_options so = tf_session_options_default();
  so.seed = 3;
  so.threads = 2;
  tf_session *s = NULL;
  TF_RETURN_IF_ERROR(tf_session_create(plan, &so, &s));
  tf_status status = NULL;
  out->allocations = -1;
  for (int i = 0; i < STEPS && !status; i++) {
    /* every micro-step: the inputs are double-buffered, so a batch written once would be read by the
     * first step only (the second read the other half's zeros until TIGHTFIT_POISON_ARENA showed it) */
    feed(s);
    tf_probe_phase(&probe, "step"); /* the first step is the warm-up: threads started, libraries touched */
    status = tf_session_micro_step(s, &out->losses[i]);
    if (!status)
      status = tf_session_optimizer_step(s);
    const int64_t seen = tf_probe_phase(&probe, "~after step").program.allocations;
    if (probe.mark && i > 0)
      out->allocations = out->allocations < 0 || seen < out->allocations ? seen : out->allocations;
  }
  if (!status)
    status = tf_half_model_read_params(s, WIDTH, HIDDEN, CLASSES, VOCAB, out->params);
  tf_session_destroy(s);
  out->ran = status == NULL;
  return status;
}

static void compare(tf_dtype half, const outcome *kernels, const outcome *casts) {
  if (!kernels->ran || !casts->ran)
    return;
  const bool losses_equal = memcmp(kernels->losses, casts->losses, sizeof(kernels->losses)) == 0;
  CHECK(&counts, losses_equal, "%s: losses %.9g %.9g %.9g with half kernels, %.9g %.9g %.9g between casts",
        tf_dtype_name(half), kernels->losses[0], kernels->losses[1], kernels->losses[2], casts->losses[0],
        casts->losses[1], casts->losses[2]);
  int64_t differ = 0;
  for (int64_t i = 0; i < N_PARAMS; i++)
    differ += memcmp(&kernels->params[i], &casts->params[i], 4) != 0;
  CHECK(&counts, differ == 0, "%s: %lld of %d weights differ after %d steps", tf_dtype_name(half), (long long)differ,
        N_PARAMS, STEPS);
  CHECK(&counts, isfinite(kernels->losses[0]) && kernels->losses[STEPS - 1] < kernels->losses[0],
        "%s: the loss did not fall: %.6f -> %.6f", tf_dtype_name(half), kernels->losses[0], kernels->losses[STEPS - 1]);
  printf("%s   %s: %d steps, losses %.6f %.6f %.6f, %d weights: bit for bit the plan between casts\n",
         differ == 0 && losses_equal ? "ok" : "FAIL", tf_dtype_name(half), STEPS, kernels->losses[0],
         kernels->losses[1], kernels->losses[2], N_PARAMS);
}

/* A step that updates half data in place is refused when the backend prepares the plan: the
 * half-kernel plan's embedding step relabelled as embedding_grad_accumulate (which adds into its
 * table operand), prepared on the CPU backend directly, as a hand-made plan file would reach it. */
static void refuse_in_place(tf_plan *plan, tf_dtype half) {
  int32_t s = 0;
  while (s < plan->n_steps && plan->steps[s].op != TF_OP_EMBEDDING)
    s++;
  CHECK(&counts, s < plan->n_steps, "%s: no embedding step", tf_dtype_name(half));
  if (s == plan->n_steps)
    return;
  const tf_backend_vtable *cpu = tf_backend_find("cpu");
  void *state = NULL, *regions[TF_REGION_COUNT] = {NULL};
  const tf_backend_options options = {.device = 0, .threads = 2};
  CHECK_OK(&counts, cpu->create(&options, &state));
  for (int r = 0; r < TF_REGION_COUNT && state; r++)
    if (plan->region_bytes[r] > 0)
      CHECK_OK(&counts, cpu->alloc_region(state, plan->region_bytes[r], &regions[r]));
  plan->steps[s].op = TF_OP_EMBEDDING_GRAD_ACCUMULATE;
  tf_status status = state ? cpu->prepare(state, plan, regions) : NULL;
  plan->steps[s].op = TF_OP_EMBEDDING;
  const bool refused = tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "in place");
  CHECK(&counts, refused, "%s: an accumulation on half data: %s", tf_dtype_name(half),
        status ? tf_status_message(status) : "prepared");
  printf("%s   %s accumulation on half data: %s\n", refused ? "ok" : "FAIL", tf_dtype_name(half),
         status ? tf_status_message(status) : "-");
  tf_status_free(status);
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (regions[r])
      cpu->free_region(state, regions[r]);
  if (state)
    cpu->destroy(state);
}

static void run(tf_dtype half) {
  tf_plan *kernels = compile(half, true), *casts = compile(half, false);
  if (!kernels || !casts) {
    tf_plan_destroy(kernels);
    tf_plan_destroy(casts);
    return;
  }
  const plan_counts k = count_steps(kernels), c = count_steps(casts);
  const int64_t arena_k = kernels->region_bytes[TF_REGION_ARENA], arena_c = casts->region_bytes[TF_REGION_ARENA];
  CHECK(&counts, c.half_steps == 0, "%s: %d non-cast steps on half data in the plan between casts", tf_dtype_name(half),
        c.half_steps);
  CHECK(&counts, k.widened_moves == 0 && c.widened_moves > 0,
        "%s: %d moves of half data between casts with half kernels (they move the half bytes), %d between casts",
        tf_dtype_name(half), k.widened_moves, c.widened_moves);
  CHECK(&counts, k.half_steps >= 15 && k.sliced_steps >= 6 && k.casts < c.casts && arena_k < arena_c,
        "%s: half kernels: %d steps on half data (%d in several slices), %d casts, arena %lld B; between casts: %d "
        "casts, arena %lld B",
        tf_dtype_name(half), k.half_steps, k.sliced_steps, k.casts, (long long)arena_k, c.casts, (long long)arena_c);
  printf("ok   %s plans: half kernels %d steps on half data (%d in several slices), %d casts, arena %lld B; between "
         "casts %d casts, arena %lld B\n",
         tf_dtype_name(half), k.half_steps, k.sliced_steps, k.casts, (long long)arena_k, c.casts, (long long)arena_c);
  static outcome with, without;
  CHECK_OK(&counts, train(kernels, &with));
  CHECK_OK(&counts, train(casts, &without));
  compare(half, &with, &without);
  if (probe.mark) { /* the slices' f32 copies live in the planned workspace: a step allocates nothing */
    CHECK(&counts, with.allocations == 0, "%s: a training step on half kernels made %lld heap allocations",
          tf_dtype_name(half), (long long)with.allocations);
    printf("%s   %s: a training step on the half kernels made %lld heap allocations (allocation probe)\n",
           with.allocations == 0 ? "ok" : "FAIL", tf_dtype_name(half), (long long)with.allocations);
  }
  refuse_in_place(kernels, half);
  tf_plan_destroy(kernels);
  tf_plan_destroy(casts);
}

int main(int argc, char **argv) {
  (void)argc;
  probe = tf_probe_attach(argv);
  if (!probe.mark) {
    printf("SKIP allocation checks: %s\n", probe.absent);
  } else {
    char why[256];
    CHECK(&counts, tf_probe_calibrate(&probe, why, sizeof(why)), "%s", why);
  }
  run(TF_BF16);
  run(TF_F16);
  return tf_test_finish("cpu half kernels", &counts);
}
