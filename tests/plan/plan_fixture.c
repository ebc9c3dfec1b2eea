/* Hand-built plans; see plan_fixture.h. Every offset, interval and report number of the small plan
 * is worked out in the comments, so that the verifier is compared with arithmetic, not with itself. */
#include "plan_fixture.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *copy(const char *text) {
  char *out = malloc(strlen(text) + 1);
  if (!out) {
    fprintf(stderr, "plan_fixture: out of memory\n");
    exit(2);
  }
  strcpy(out, text);
  return out;
}

static void *zeroed(size_t count, size_t size) {
  void *memory = calloc(count ? count : 1, size);
  if (!memory) {
    fprintf(stderr, "plan_fixture: out of memory\n");
    exit(2);
  }
  return memory;
}

/* Buffer `id`: role, dtype, offset, live interval and shape (rank, then the dims). */
static void set_buffer(tf_plan *plan, int32_t id, const char *name, tf_buffer_role role, tf_region region,
                       tf_dtype dtype, int64_t offset, int32_t first, int32_t last, int32_t rank, ...) {
  tf_plan_buffer *b = &plan->buffers[id];
  memset(b, 0, sizeof(*b));
  b->name = copy(name);
  b->role = role;
  b->region = region;
  b->dtype = dtype;
  b->offset = offset;
  b->first_step = first;
  b->last_step = last;
  b->owner = b->io_twin = b->alias_of = -1;
  b->rank = rank;
  int64_t elements = 1;
  va_list dims;
  va_start(dims, rank);
  for (int32_t d = 0; d < rank; d++) {
    b->shape[d] = va_arg(dims, int64_t);
    elements *= b->shape[d];
  }
  va_end(dims);
  b->bytes = elements * tf_dtype_size(dtype);
}

/* Step `s`: op, phase, its inputs (n, then the ids) and one output (or -1 for none). */
static tf_plan_step *set_step(tf_plan *plan, int32_t s, const char *name, tf_op op, tf_phase phase, int32_t output,
                              int32_t n_inputs, ...) {
  tf_plan_step *step = &plan->steps[s];
  memset(step, 0, sizeof(*step));
  step->name = copy(name);
  step->op = op;
  step->phase = phase;
  step->n_inputs = n_inputs;
  step->inputs = zeroed((size_t)n_inputs, sizeof(int32_t));
  va_list inputs;
  va_start(inputs, n_inputs);
  for (int32_t i = 0; i < n_inputs; i++)
    step->inputs[i] = va_arg(inputs, int32_t);
  va_end(inputs);
  step->n_outputs = output >= 0 ? 1 : 0;
  step->outputs[0] = output;
  step->workspace = -1;
  step->flops = 10;
  return step;
}

static tf_plan *new_plan(int32_t n_buffers, int32_t n_steps) {
  tf_plan *plan = zeroed(1, sizeof(tf_plan));
  plan->version = TF_PLAN_VERSION;
  plan->n_buffers = n_buffers;
  plan->buffers = zeroed((size_t)n_buffers, sizeof(tf_plan_buffer));
  plan->n_steps = n_steps;
  plan->steps = zeroed((size_t)n_steps, sizeof(tf_plan_step));
  plan->report.live_bytes = zeroed((size_t)n_steps, sizeof(int64_t));
  plan->loss = plan->loss_scale_seed = plan->overflow_check = -1;
  return plan;
}

tf_plan *plan_fixture_small(void) {
  tf_plan *plan = new_plan(SMALL_BUFFERS, SMALL_STEPS);
  plan->graph_name = copy("tiny-mlp");
  plan->target = copy("cpu");
  plan->alignment = 64;
  /* io: x [4,3] 48 B at 0, its twin at 64; t [4,5] 80 B at 128, its twin at 256 (ends at 336). */
  set_buffer(plan, SMALL_X, "x", TF_ROLE_INPUT, TF_REGION_IO, TF_F32, 0, -1, -1, 2, (int64_t)4, (int64_t)3);
  set_buffer(plan, SMALL_X_TWIN, "x", TF_ROLE_INPUT, TF_REGION_IO, TF_F32, 64, -1, -1, 2, (int64_t)4, (int64_t)3);
  set_buffer(plan, SMALL_T, "t", TF_ROLE_LABEL, TF_REGION_IO, TF_F32, 128, -1, -1, 2, (int64_t)4, (int64_t)5);
  set_buffer(plan, SMALL_T_TWIN, "t", TF_ROLE_LABEL, TF_REGION_IO, TF_F32, 256, -1, -1, 2, (int64_t)4, (int64_t)5);
  plan->buffers[SMALL_X].io_twin = SMALL_X_TWIN;
  plan->buffers[SMALL_X_TWIN].io_twin = SMALL_X;
  plan->buffers[SMALL_T].io_twin = SMALL_T_TWIN;
  plan->buffers[SMALL_T_TWIN].io_twin = SMALL_T;
  /* parameters: w [5,3] 60 B at 0; the loss seed dloss (f32 scalar, 4 B) at 64 (ends at 68). */
  set_buffer(plan, SMALL_W, "w", TF_ROLE_PARAMETER, TF_REGION_PARAMETERS, TF_F32, 0, -1, -1, 2, (int64_t)5, (int64_t)3);
  plan->buffers[SMALL_W].init = (tf_init){TF_INIT_NORMAL, 0.0, 0.1, NULL, NULL};
  set_buffer(plan, SMALL_DLOSS, "dloss", TF_ROLE_CONSTANT, TF_REGION_PARAMETERS, TF_F32, 64, -1, -1, 0);
  plan->buffers[SMALL_DLOSS].init = (tf_init){TF_INIT_EXTERNAL, 0, 0, copy("seed.safetensors"), copy("dloss")};
  /* arena, 128-byte slots; intervals from the steps below:
   *   h    80 B at   0, [0,4]     y  80 B at 128, [1,3]    loss 4 B at 256, [2,8] (read after the step)
   *   dy   80 B at 384, [3,4]     dh 80 B at 128, [4,5] (y's slot)    dw 60 B at 384, [5,6] (dy's slot)
   *   ws   64 B at   0, [5,5] (h's slot); the arena ends at dy's 384 + 80 = 464. */
  set_buffer(plan, SMALL_H, "h", TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, 0, 0, 4, 2, (int64_t)4, (int64_t)5);
  set_buffer(plan, SMALL_Y, "y", TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, 128, 1, 3, 2, (int64_t)4, (int64_t)5);
  set_buffer(plan, SMALL_LOSS, "loss", TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, 256, 2, 8, 0);
  set_buffer(plan, SMALL_DY, "dy", TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, 384, 3, 4, 2, (int64_t)4, (int64_t)5);
  set_buffer(plan, SMALL_DH, "dh", TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, 128, 4, 5, 2, (int64_t)4, (int64_t)5);
  set_buffer(plan, SMALL_DW, "dw", TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, 384, 5, 6, 2, (int64_t)5, (int64_t)3);
  set_buffer(plan, SMALL_WS, "workspace/dw", TF_ROLE_WORKSPACE, TF_REGION_ARENA, TF_U8, 0, 5, 5, 1, (int64_t)64);
  /* gradients and optimizer state: 60 B each at 0. */
  set_buffer(plan, SMALL_GW, "grad/w", TF_ROLE_GRADIENT, TF_REGION_GRADIENTS, TF_F32, 0, -1, -1, 2, (int64_t)5,
             (int64_t)3);
  set_buffer(plan, SMALL_MW, "momentum/w", TF_ROLE_OPTIMIZER_STATE, TF_REGION_OPTIMIZER_STATE, TF_F32, 0, -1, -1, 2,
             (int64_t)5, (int64_t)3);
  plan->buffers[SMALL_GW].owner = SMALL_W;
  plan->buffers[SMALL_MW].owner = SMALL_W;
  plan->region_bytes[TF_REGION_PARAMETERS] = 68;
  plan->region_bytes[TF_REGION_GRADIENTS] = 60;
  plan->region_bytes[TF_REGION_OPTIMIZER_STATE] = 60;
  plan->region_bytes[TF_REGION_ARENA] = 464;
  plan->region_bytes[TF_REGION_IO] = 336;

  tf_plan_step *s;
  s = set_step(plan, STEP_MATMUL, "fc", TF_OP_MATMUL, TF_PHASE_FORWARD, SMALL_H, 2, SMALL_X, SMALL_W);
  s->attrs.kind = TF_ATTR_MATMUL;
  s->attrs.u.matmul.transpose_b = true;
  s->flops = 120;
  set_step(plan, STEP_RELU, "relu", TF_OP_RELU, TF_PHASE_FORWARD, SMALL_Y, 1, SMALL_H);
  set_step(plan, STEP_MSE, "mse", TF_OP_MSE, TF_PHASE_FORWARD, SMALL_LOSS, 2, SMALL_Y, SMALL_T);
  set_step(plan, STEP_MSE_GRAD, "mse/grad", TF_OP_MSE_GRAD, TF_PHASE_BACKWARD, SMALL_DY, 3, SMALL_Y, SMALL_T,
           SMALL_DLOSS);
  set_step(plan, STEP_RELU_GRAD, "relu/grad", TF_OP_RELU_GRAD, TF_PHASE_BACKWARD, SMALL_DH, 2, SMALL_H, SMALL_DY);
  s = set_step(plan, STEP_MATMUL_GRAD, "fc/grad_w", TF_OP_MATMUL, TF_PHASE_BACKWARD, SMALL_DW, 2, SMALL_DH, SMALL_X);
  s->attrs.kind = TF_ATTR_MATMUL;
  s->attrs.u.matmul.transpose_a = true;
  s->workspace = SMALL_WS;
  s->flops = 120;
  set_step(plan, STEP_ACCUMULATE, "accumulate/w", TF_OP_ACCUMULATE, TF_PHASE_ACCUMULATE, -1, 2, SMALL_GW, SMALL_DW);
  s = set_step(plan, STEP_SGD, "sgd/w", TF_OP_SGD, TF_PHASE_OPTIMIZER, -1, 3, SMALL_W, SMALL_GW, SMALL_MW);
  s->attrs.kind = TF_ATTR_OPTIMIZER;
  s->attrs.u.optimizer = (tf_optimizer_attrs){.learning_rate = 0.1f, .momentum = 0.9f, .grad_scale = 0.5f};
  set_step(plan, STEP_ZERO, "zero/w", TF_OP_ZERO, TF_PHASE_OPTIMIZER, -1, 1, SMALL_GW);
  plan->micro_steps = STEP_SGD;

  plan->accumulate = 2;
  plan->micro_batch = 4;
  plan->global_batch = 8;
  plan->n_symbols = 1;
  plan->symbol_names = zeroed(1, sizeof(char *));
  plan->symbol_values = zeroed(1, sizeof(int64_t));
  plan->symbol_names[0] = copy("N");
  plan->symbol_values[0] = 4;
  plan->training = true;
  plan->training_config = (tf_training_config){
      .optimizer = TF_OPTIMIZER_SGD, .learning_rate = 0.1, .momentum = 0.9, .global_batch = 8, .accumulate_steps = 2};
  plan->loss = SMALL_LOSS;
  plan->n_outputs = 1;
  plan->outputs = zeroed(1, sizeof(int32_t));
  plan->outputs[0] = SMALL_Y;

  /* The report. Live arena bytes per step (see the intervals above), each buffer counted at its size
   * rounded up to the alignment (h, y, dy, dh 128; loss, dw, ws 64):
   *   0: h 128                      1: h y 256             2: h y loss 320     3: h y loss dy 448
   *   4: h loss dy dh 448           5: loss dh dw ws 320   6: loss dw 128      7, 8: loss 64 */
  static const int64_t live[SMALL_STEPS] = {128, 256, 320, 448, 448, 320, 128, 64, 64};
  memcpy(plan->report.live_bytes, live, sizeof(live));
  plan->report.arena_lower_bound = 448;
  plan->report.peak_step = 3;
  /* Without reuse, each arena buffer in its own 64-byte-aligned slot: h, y, dy, dh 128 each, loss
   * 64, dw 64, ws 64. */
  plan->report.arena_naive = 4 * 128 + 3 * 64;
  static const int64_t roles[TF_ROLE_COUNT] = {60, 4, 60, 60, 96, 160, 384, 64};
  memcpy(plan->report.role_bytes, roles, sizeof(roles));
  plan->report.flops[TF_PHASE_FORWARD] = 140;
  plan->report.flops[TF_PHASE_BACKWARD] = 140;
  plan->report.flops[TF_PHASE_ACCUMULATE] = 10;
  plan->report.flops[TF_PHASE_OPTIMIZER] = 20;
  plan->report.notes = copy("hand-built test plan\nrecompute: none\n");
  return plan;
}

void plan_fixture_fill_report(tf_plan *plan) {
  tf_plan_report *r = &plan->report;
  memset(r->role_bytes, 0, sizeof(r->role_bytes));
  r->arena_naive = r->arena_lower_bound = 0;
  r->peak_step = plan->n_steps > 0 ? 0 : -1;
  int64_t *delta = zeroed((size_t)plan->n_steps + 1, sizeof(int64_t));
  int32_t *from = zeroed((size_t)plan->n_buffers + 1, sizeof(int32_t)),
          *to = zeroed((size_t)plan->n_buffers + 1, sizeof(int32_t));
  tf_status status = tf_plan_counted_steps(plan, from, to);
  if (status) {
    fprintf(stderr, "plan_fixture_fill_report: %s\n", tf_status_message(status));
    exit(2);
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    r->role_bytes[b->role] += b->bytes;
    if (b->region != TF_REGION_ARENA)
      continue;
    int64_t slot = (b->bytes + plan->alignment - 1) / plan->alignment * plan->alignment;
    if (from[id] <= to[id]) {
      delta[from[id]] += slot;
      delta[to[id] + 1] -= slot;
    }
    r->arena_naive += slot;
  }
  free(from);
  free(to);
  int64_t live = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    live += delta[s];
    r->live_bytes[s] = live;
    if (live > r->arena_lower_bound) {
      r->arena_lower_bound = live;
      r->peak_step = s;
    }
  }
  free(delta);
}

tf_plan *plan_fixture_big(int32_t steps) {
  int32_t half = steps / 2;
  /* Buffer 0 is the input x [16]; 1 + s is activation a_s, 1 + steps + s the workspace of step s. */
  tf_plan *plan = new_plan(1 + 2 * steps, steps);
  plan->graph_name = copy("big-synthetic");
  plan->target = copy("cpu");
  plan->alignment = 64;
  set_buffer(plan, 0, "x", TF_ROLE_INPUT, TF_REGION_IO, TF_F32, 0, -1, -1, 1, (int64_t)16);
  plan->buffers[0].unbatched = true; /* a static [16], fed whole: the micro-batch is 1 */
  plan->region_bytes[TF_REGION_IO] = 64;
  /* a_s is read by step s + 1 and, in the first half, by the mirror step steps - 1 - s. Every
   * buffer gets its own 64-byte slot: the sweep still sees up to `half` buffers live at once. */
  for (int32_t s = 0; s < steps; s++) {
    char name[32];
    snprintf(name, sizeof(name), "a%d", s);
    int32_t last = s < half ? steps - 1 - s : (s + 1 < steps ? s + 1 : s);
    if (s < half && s + 1 > last)
      last = s + 1;
    set_buffer(plan, 1 + s, name, TF_ROLE_ACTIVATION, TF_REGION_ARENA, TF_F32, (int64_t)s * 128, s, last, 1,
               (int64_t)16);
    snprintf(name, sizeof(name), "workspace/%d", s);
    set_buffer(plan, 1 + steps + s, name, TF_ROLE_WORKSPACE, TF_REGION_ARENA, TF_U8, (int64_t)s * 128 + 64, s, s, 1,
               (int64_t)64);
  }
  plan->region_bytes[TF_REGION_ARENA] = (int64_t)steps * 128;
  for (int32_t s = 0; s < steps; s++) {
    char name[32];
    snprintf(name, sizeof(name), "step%d", s);
    tf_plan_step *step;
    if (s == 0)
      step = set_step(plan, s, name, TF_OP_RELU, TF_PHASE_FORWARD, 1, 1, 0);
    else if (s < half)
      step = set_step(plan, s, name, TF_OP_RELU, TF_PHASE_FORWARD, 1 + s, 1, s);
    else
      step = set_step(plan, s, name, TF_OP_ADD, TF_PHASE_FORWARD, 1 + s, 2, s, 1 + (steps - 1 - s));
    step->workspace = 1 + steps + s;
  }
  plan->micro_steps = steps;
  plan->accumulate = 1;
  plan->micro_batch = 1;
  plan->global_batch = 1;
  plan->n_outputs = 1;
  plan->outputs = zeroed(1, sizeof(int32_t));
  plan->outputs[0] = steps; /* a_{steps-1} */

  plan_fixture_fill_report(plan);
  plan->report.flops[TF_PHASE_FORWARD] = 10.0 * steps;
  return plan;
}
