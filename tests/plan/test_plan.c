/* Plans: a hand-built training plan verifies; serialise -> parse, save -> load and JSON -> `flatc -b`
 * give it back field by field; each of a table of corruptions is refused with a message naming the
 * problem; hostile bytes (wrong identifier, newer version, every truncation, random byte flips,
 * missing fields) are refused or decoded, never crash (nor does the JSON printer); and the
 * verifier's time on a plan of 10k buffers x 5k steps. Run under ASan/UBSan (TIGHTFIT_SANITIZE)
 * to make "never crash" mean "no report" too. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "plan_fixture.h"
#include "schema/plan_fb.h"
#include "tightfit/plan.h"

static tf_test_counts counts;

/* ---- comparing plans field by field ---- */

static bool same_string(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

#define SAME(cond, ...) CHECK(&counts, cond, __VA_ARGS__)

static void compare_buffers(const tf_plan_buffer *a, const tf_plan_buffer *b, int32_t id) {
  SAME(same_string(a->name, b->name), "buffer %d name", id);
  SAME(a->role == b->role && a->region == b->region && a->dtype == b->dtype, "buffer %d role/region/dtype", id);
  SAME(a->offset == b->offset && a->bytes == b->bytes, "buffer %d offset/bytes", id);
  SAME(a->rank == b->rank && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0, "buffer %d shape", id);
  SAME(a->first_step == b->first_step && a->last_step == b->last_step, "buffer %d interval", id);
  SAME(a->init.kind == b->init.kind && a->init.a == b->init.a && a->init.b == b->init.b &&
           same_string(a->init.file, b->init.file) && same_string(a->init.key, b->init.key),
       "buffer %d init", id);
  SAME(a->owner == b->owner && a->io_twin == b->io_twin, "buffer %d owner/io_twin", id);
}

static void compare_steps(const tf_plan_step *a, const tf_plan_step *b, int32_t s) {
  SAME(same_string(a->name, b->name), "step %d name", s);
  SAME(a->op == b->op && a->phase == b->phase, "step %d op/phase", s);
  SAME(a->attrs.kind == b->attrs.kind && memcmp(&a->attrs.u, &b->attrs.u, sizeof(a->attrs.u)) == 0, "step %d attrs", s);
  SAME(a->n_inputs == b->n_inputs && memcmp(a->inputs, b->inputs, sizeof(int32_t) * (size_t)a->n_inputs) == 0,
       "step %d inputs", s);
  SAME(a->n_outputs == b->n_outputs && memcmp(a->outputs, b->outputs, sizeof(int32_t) * (size_t)a->n_outputs) == 0,
       "step %d outputs", s);
  SAME(a->workspace == b->workspace && a->flops == b->flops, "step %d workspace/flops", s);
}

static void compare_plans(const tf_plan *a, const tf_plan *b, const char *how) {
  int failed = counts.failed;
  SAME(a->version == b->version, "version");
  SAME(same_string(a->graph_name, b->graph_name) && same_string(a->target, b->target), "names");
  SAME(a->alignment == b->alignment, "alignment");
  SAME(memcmp(a->region_bytes, b->region_bytes, sizeof(a->region_bytes)) == 0, "region bytes");
  SAME(a->n_buffers == b->n_buffers, "buffer count %d vs %d", a->n_buffers, b->n_buffers);
  for (int32_t i = 0; i < a->n_buffers && i < b->n_buffers; i++)
    compare_buffers(&a->buffers[i], &b->buffers[i], i);
  SAME(a->n_steps == b->n_steps, "step count %d vs %d", a->n_steps, b->n_steps);
  for (int32_t s = 0; s < a->n_steps && s < b->n_steps; s++)
    compare_steps(&a->steps[s], &b->steps[s], s);
  SAME(a->micro_steps == b->micro_steps && a->accumulate == b->accumulate, "micro_steps/accumulate");
  SAME(a->matmul_math == b->matmul_math, "matmul_math");
  SAME(a->micro_batch == b->micro_batch && a->global_batch == b->global_batch, "batches");
  SAME(a->n_symbols == b->n_symbols, "symbol count");
  for (int32_t i = 0; i < a->n_symbols && i < b->n_symbols; i++)
    SAME(same_string(a->symbol_names[i], b->symbol_names[i]) && a->symbol_values[i] == b->symbol_values[i], "symbol %d",
         i);
  SAME(a->training == b->training, "training");
  SAME(memcmp(&a->training_config, &b->training_config, sizeof(a->training_config)) == 0, "training config");
  SAME(a->loss == b->loss, "loss");
  SAME(a->n_outputs == b->n_outputs && memcmp(a->outputs, b->outputs, sizeof(int32_t) * (size_t)a->n_outputs) == 0,
       "outputs");
  const tf_plan_report *ra = &a->report, *rb = &b->report;
  SAME(memcmp(ra->role_bytes, rb->role_bytes, sizeof(ra->role_bytes)) == 0, "report role bytes");
  SAME(ra->arena_lower_bound == rb->arena_lower_bound && ra->arena_naive == rb->arena_naive &&
           ra->peak_step == rb->peak_step,
       "report bound/naive/peak");
  SAME(memcmp(ra->live_bytes, rb->live_bytes, sizeof(int64_t) * (size_t)a->n_steps) == 0, "report live bytes");
  SAME(memcmp(ra->flops, rb->flops, sizeof(ra->flops)) == 0, "report flops");
  SAME(same_string(ra->notes, rb->notes), "report notes");
  printf("%s: %d buffers, %d steps, report and every field compared: %s\n", how, a->n_buffers, a->n_steps,
         counts.failed == failed ? "equal" : "DIFFERENT");
}

/* ---- the valid plan ---- */

/* The small plan with its accumulate step as matmul_accumulate(gw, t, x) (transpose_a): gw [5,3] +=
 * t^T [5,4] x [4,3], a gradient part added by its own product (compiler/optimizer.c). Valid. */
static void as_matmul_accumulate(tf_plan *p) {
  tf_plan_step *step = &p->steps[STEP_ACCUMULATE];
  int32_t *inputs = realloc(step->inputs, 3 * sizeof(int32_t));
  if (!inputs)
    abort();
  inputs[0] = SMALL_GW;
  inputs[1] = SMALL_T;
  inputs[2] = SMALL_X;
  step->inputs = inputs;
  step->n_inputs = 3;
  step->op = TF_OP_MATMUL_ACCUMULATE;
  step->phase = TF_PHASE_BACKWARD;
  step->attrs.kind = TF_ATTR_MATMUL;
  step->attrs.u.matmul.transpose_a = true;
}

static void test_valid(void) {
  tf_plan *plan = plan_fixture_small();
  CHECK_OK(&counts, tf_plan_verify(plan));
  CHECK(&counts, tf_plan_total_bytes(plan) == SMALL_TOTAL_BYTES, "total %" PRId64, tf_plan_total_bytes(plan));
  printf("small plan verifies; total %" PRId64 " bytes (expected %d)\n", tf_plan_total_bytes(plan), SMALL_TOTAL_BYTES);
  CHECK(&counts, tf_plan_total_bytes(NULL) == -1, "NULL plan");
  plan->region_bytes[TF_REGION_ARENA] = INT64_MAX;
  CHECK(&counts, tf_plan_total_bytes(plan) == INT64_MAX, "overflow saturates");
  tf_plan_destroy(plan);
  tf_plan_destroy(NULL);
  plan = plan_fixture_small();
  as_matmul_accumulate(plan);
  CHECK_OK(&counts, tf_plan_verify(plan));
  printf("small plan with its accumulate step as matmul_accumulate(gw, t, x) verifies\n");
  tf_plan_destroy(plan);
  CHECK(&counts, strcmp(tf_region_name(TF_REGION_OPTIMIZER_STATE), "optimizer_state") == 0, "region name");
  CHECK(&counts, strcmp(tf_role_name(TF_ROLE_WORKSPACE), "workspace") == 0, "role name");
  CHECK(&counts, strcmp(tf_phase_name(TF_PHASE_RECOMPUTE), "recompute") == 0, "phase name");
  CHECK(&counts, strcmp(tf_phase_name((tf_phase)99), "?") == 0 && strcmp(tf_region_name((tf_region)-1), "?") == 0,
        "names out of range");
}

static void test_round_trips(const char *folder) {
  tf_plan *plan = plan_fixture_small();
  plan->matmul_math = TF_BF16; /* a value other than the default, so that losing it shows */
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  tf_plan *parsed = NULL;
  CHECK_OK(&counts, tf_plan_parse(data, size, "small.tfplan", &parsed));
  if (parsed)
    compare_plans(plan, parsed, "serialize -> parse");
  /* The same bytes at an odd address: the decoder copies them to an aligned buffer. */
  unsigned char *shifted = malloc(size + 1);
  memcpy(shifted + 1, data, size);
  tf_plan *from_odd = NULL;
  CHECK_OK(&counts, tf_plan_parse(shifted + 1, size, "odd address", &from_odd));
  CHECK(&counts, from_odd && from_odd->n_steps == SMALL_STEPS, "parse at an odd address");
  tf_plan_destroy(from_odd);
  free(shifted);

  char path[512];
  snprintf(path, sizeof(path), "%s/small.tfplan", folder);
  CHECK_OK(&counts, tf_plan_save(plan, path));
  tf_plan *loaded = NULL;
  CHECK_OK(&counts, tf_plan_load(path, &loaded));
  if (loaded)
    compare_plans(plan, loaded, "save -> load");
  /* A second save replaces the file; the bytes are those of serialize. */
  CHECK_OK(&counts, tf_plan_save(loaded, path));
  FILE *file = fopen(path, "rb");
  unsigned char *again = malloc(size + 16);
  size_t read = file ? fread(again, 1, size + 16, file) : 0;
  if (file)
    fclose(file);
  CHECK(&counts, read == size && memcmp(again, data, size) == 0, "re-saved file equals the serialised bytes");
  free(again);

  /* An inference plan, empty vectors and absent strings survive too. */
  tf_plan_destroy(loaded);
  tf_plan_destroy(parsed);
  free(data);
  tf_plan_destroy(plan);

  tf_status status = tf_plan_load("/nonexistent/folder/x.tfplan", &loaded);
  CHECK(&counts, status && tf_status_code(status) == TF_ERR_IO && strstr(tf_status_message(status), "/nonexistent"),
        "missing file: %s", tf_status_message(status));
  tf_status_free(status);
  plan = plan_fixture_small();
  plan->accumulate = 0;
  snprintf(path, sizeof(path), "%s/refused.tfplan", folder);
  status = tf_plan_save(plan, path);
  CHECK(&counts, status && strstr(tf_status_message(status), "accumulate is 0") && access(path, F_OK) != 0,
        "an invalid plan is not saved: %s", tf_status_message(status));
  tf_status_free(status);
  tf_plan_destroy(plan);
}

/* serialize -> JSON -> `flatc -b` -> parse: the schema and the JSON printer agree. */
static void test_json(const char *folder) {
  tf_plan *plan = plan_fixture_small();
  void *data = NULL;
  size_t size = 0;
  char *json = NULL;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  CHECK_OK(&counts, tf_plan_fb_to_json(data, size, &json));
  CHECK(&counts, json && strstr(json, "\"op\": \"mse_grad\"") && strstr(json, "\"role\": \"workspace\""),
        "JSON names enums");
  char json_path[512], command[2048], plan_path[512];
  snprintf(json_path, sizeof(json_path), "%s/small_json.json", folder);
  snprintf(plan_path, sizeof(plan_path), "%s/small_json.tfplan", folder);
  FILE *file = fopen(json_path, "w");
  if (file && json) {
    fputs(json, file);
    fclose(file);
  }
  snprintf(command, sizeof(command), "'%s' -b -I '%s' -o '%s' '%s/plan.fbs' '%s'", TF_FLATC_PATH, TF_SCHEMA_DIR, folder,
           TF_SCHEMA_DIR, json_path);
  CHECK(&counts, system(command) == 0, "flatc -b refused the JSON: %s", command);
  tf_plan *back = NULL;
  CHECK_OK(&counts, tf_plan_load(plan_path, &back));
  if (back)
    compare_plans(plan, back, "serialize -> JSON -> flatc -b -> load");
  tf_plan_destroy(back);
  remove(json_path);
  remove(plan_path);
  free(json);
  free(data);
  tf_plan_destroy(plan);
}

/* ---- corruptions, each refused by tf_plan_verify with its phrase ---- */

typedef struct corruption {
  const char *what, *phrase;
  void (*apply)(tf_plan *plan);
} corruption;

static void overlap_live(tf_plan *p) { p->buffers[SMALL_DY].offset = 0; } /* h is live at step 3 too */
static void past_region(tf_plan *p) { p->buffers[SMALL_W].offset = 64; }
static void misaligned(tf_plan *p) { p->buffers[SMALL_LOSS].offset = 260; }
static void wrong_bytes(tf_plan *p) { p->buffers[SMALL_H].bytes = 84; }
static void read_before_write(tf_plan *p) { p->steps[STEP_MSE].inputs[0] = SMALL_DY; }
static void read_after_last(tf_plan *p) { p->buffers[SMALL_Y].last_step = 2; }
static void first_step_mismatch(tf_plan *p) { p->buffers[SMALL_Y].first_step = 0; }
static void wrong_region(tf_plan *p) { p->buffers[SMALL_W].region = TF_REGION_GRADIENTS; }
static void in_place_arena(tf_plan *p) {
  p->steps[STEP_ACCUMULATE].inputs[0] = SMALL_DW;
  p->steps[STEP_ACCUMULATE].inputs[1] = SMALL_GW;
}
static void bad_op(tf_plan *p) { p->steps[STEP_RELU].op = (tf_op)999; }
static void wrong_arity(tf_plan *p) { p->steps[STEP_RELU].n_inputs = 2; } /* the array holds 1: never read */
static void wrong_output_count(tf_plan *p) { p->steps[STEP_RELU].n_outputs = 2; }
static void matmul_mismatch(tf_plan *p) { p->steps[STEP_MATMUL].attrs.u.matmul.transpose_b = false; }
static void wrong_output_shape(tf_plan *p) {
  p->buffers[SMALL_Y].shape[0] = 5;
  p->buffers[SMALL_Y].shape[1] = 4;
}
static void wrong_output_dtype(tf_plan *p) { p->buffers[SMALL_Y].dtype = TF_I32; /* same size */ }
static void bad_workspace(tf_plan *p) { p->steps[STEP_MATMUL_GRAD].workspace = SMALL_H; }
static void workspace_out_of_range(tf_plan *p) { p->steps[STEP_MATMUL_GRAD].workspace = 99; }
static void micro_steps_range(tf_plan *p) { p->micro_steps = SMALL_STEPS + 1; }
static void accumulate_zero(tf_plan *p) { p->accumulate = 0; }
static void batch_product(tf_plan *p) { p->global_batch = 9; }
static void ranks_past_limit(tf_plan *p) { p->ranks = TF_PLAN_MAX_RANKS + 1; }
static void ranks_without_their_batch(tf_plan *p) { p->ranks = 2; } /* the global batch counts every rank */
static void alignment_three(tf_plan *p) { p->alignment = 48; }
static void negative_region(tf_plan *p) { p->region_bytes[TF_REGION_IO] = -1; }
static void region_sum_overflow(tf_plan *p) {
  p->region_bytes[TF_REGION_ARENA] = INT64_MAX;
  p->region_bytes[TF_REGION_IO] = INT64_MAX;
}
static void newer_version(tf_plan *p) { p->version = TF_PLAN_VERSION + 1; }
static void owner_not_parameter(tf_plan *p) { p->buffers[SMALL_GW].owner = SMALL_H; }
static void owner_on_activation(tf_plan *p) { p->buffers[SMALL_H].owner = SMALL_W; }
static void twin_mismatch(tf_plan *p) { p->buffers[SMALL_X].io_twin = SMALL_T; }
static void persistent_overlap(tf_plan *p) { p->buffers[SMALL_DLOSS].offset = 0; }
static void never_written(tf_plan *p) { p->steps[STEP_MATMUL_GRAD].workspace = -1; }
static void attrs_family(tf_plan *p) { p->steps[STEP_MATMUL].attrs.kind = TF_ATTR_NONE; }
static void optimizer_in_micro_block(tf_plan *p) { p->micro_steps = STEP_ZERO; }
static void backward_in_optimizer_block(tf_plan *p) { p->micro_steps = STEP_MATMUL_GRAD; }
static void live_bytes_wrong(tf_plan *p) { p->report.live_bytes[3] = 1; }
static void role_bytes_wrong(tf_plan *p) { p->report.role_bytes[TF_ROLE_GRADIENT] = 61; }
static void peak_step_wrong(tf_plan *p) { p->report.peak_step = 0; }
static void lower_bound_wrong(tf_plan *p) { p->report.arena_lower_bound = 200; }
static void naive_wrong(tf_plan *p) { p->report.arena_naive = 1; }
static void report_flops_nan(tf_plan *p) { p->report.flops[TF_PHASE_BACKWARD] = -1; }
static void inference_backward(tf_plan *p) { p->training = false; }
static void rank_nine(tf_plan *p) { p->buffers[SMALL_H].rank = 9; }
static void negative_dim(tf_plan *p) { p->buffers[SMALL_H].shape[0] = -4; }
static void huge_shape(tf_plan *p) {
  p->buffers[SMALL_H].shape[0] = INT64_MAX / 2;
  p->buffers[SMALL_H].shape[1] = 4;
}
static void loss_out_of_range(tf_plan *p) { p->loss = 99; }
static void training_without_loss(tf_plan *p) { p->loss = -1; }
static void output_out_of_range(tf_plan *p) { p->outputs[0] = -7; }
static void last_step_past_end(tf_plan *p) { p->buffers[SMALL_LOSS].last_step = SMALL_STEPS; }
static void persistent_interval(tf_plan *p) { p->buffers[SMALL_W].first_step = 0; }
static void output_to_gradient(tf_plan *p) { p->steps[STEP_RELU].outputs[0] = SMALL_GW; }
static void unknown_dtype(tf_plan *p) { p->buffers[SMALL_H].dtype = (tf_dtype)17; }
static void unknown_role(tf_plan *p) { p->buffers[SMALL_H].role = (tf_buffer_role)TF_ROLE_COUNT; }
static void constant_made_state(tf_plan *p) { p->buffers[SMALL_DLOSS].role = TF_ROLE_STATE; }
static void unknown_phase(tf_plan *p) { p->steps[STEP_RELU].phase = (tf_phase)5; }
static void forward_after_backward(tf_plan *p) { p->steps[STEP_RELU_GRAD].phase = TF_PHASE_FORWARD; }
static void gradient_written_with_accumulation(tf_plan *p) { p->steps[STEP_MATMUL_GRAD].outputs[0] = SMALL_GW; }
static void step_without_name(tf_plan *p) {
  free(p->steps[STEP_RELU].name);
  p->steps[STEP_RELU].name = NULL;
}
static void flops_not_finite(tf_plan *p) { p->steps[STEP_RELU].flops = 1.0 / 0.0; }
static void symbol_zero(tf_plan *p) { p->symbol_values[0] = 0; }
static void in_place_constant(tf_plan *p) { p->steps[STEP_ZERO].inputs[0] = SMALL_DLOSS; }
static void input_out_of_range(tf_plan *p) { p->steps[STEP_RELU].inputs[0] = SMALL_BUFFERS; }
static void symbolic_target(tf_plan *p) {
  tf_plan_step *s = &p->steps[STEP_RELU];
  s->op = TF_OP_RESHAPE;
  s->attrs.kind = TF_ATTR_SHAPE;
  s->attrs.u.shape.shape = (tf_shape){2, {{4, -1}, {1, 0}}};
}
static void external_without_file(tf_plan *p) {
  free((void *)p->buffers[SMALL_DLOSS].init.file);
  p->buffers[SMALL_DLOSS].init.file = NULL;
}
static void version_zero(tf_plan *p) { p->version = 0; }
static void missing_live_bytes(tf_plan *p) {
  free(p->report.live_bytes);
  p->report.live_bytes = NULL;
}
static void sgd_bad_hyperparameter(tf_plan *p) { p->steps[STEP_SGD].attrs.u.optimizer.learning_rate = -1; }
static void seed_in_arena(tf_plan *p) { p->loss_scale_seed = SMALL_LOSS; }
static void seed_out_of_range(tf_plan *p) { p->loss_scale_seed = 99; }
static void overflow_check_not_scalar(tf_plan *p) { p->overflow_check = SMALL_H; }
static void seed_without_overflow_check(tf_plan *p) {
  p->training_config.precision = TF_PRECISION_F16;
  p->training_config.loss_scale = 65536;
  p->loss_scale_seed = SMALL_DLOSS;
}
static void seed_scale_not_power_of_two(tf_plan *p) {
  seed_without_overflow_check(p);
  p->training_config.loss_scale = 1000;
  p->overflow_check = SMALL_LOSS;
}

static void matmul_math_i32(tf_plan *p) { p->matmul_math = TF_I32; }

static void accumulate_into_parameter(tf_plan *p) { p->steps[STEP_ACCUMULATE].inputs[0] = SMALL_W; }
static void accumulate_onto_itself(tf_plan *p) { p->steps[STEP_ACCUMULATE].inputs[1] = SMALL_GW; }
static void matmul_accumulate_into_parameter(tf_plan *p) {
  as_matmul_accumulate(p);
  p->steps[STEP_ACCUMULATE].inputs[0] = SMALL_W;
}
static void matmul_accumulate_into_arena(tf_plan *p) {
  as_matmul_accumulate(p);
  p->steps[STEP_ACCUMULATE].inputs[0] = SMALL_DW;
}
static void matmul_accumulate_wrong_sum(tf_plan *p) {
  as_matmul_accumulate(p);
  p->steps[STEP_ACCUMULATE].inputs[2] = SMALL_T; /* t^T t is [5,5] */
}
static void matmul_accumulate_batched(tf_plan *p) {
  as_matmul_accumulate(p);
  p->buffers[SMALL_GW].rank = 3; /* [5,3,1]: same bytes, a batch axis the op does not take */
  p->buffers[SMALL_GW].shape[2] = 1;
}
static void matmul_accumulate_output(tf_plan *p) {
  as_matmul_accumulate(p);
  p->steps[STEP_ACCUMULATE].n_outputs = 1;
  p->steps[STEP_ACCUMULATE].outputs[0] = SMALL_DW;
}

static const corruption corruptions[] = {
    {"two arena buffers live at step 3 share bytes", "overlapping live arena buffers", overlap_live},
    {"a parameter ends past its region", "ends past its region parameters of 68 bytes", past_region},
    {"an offset that is not a multiple of 64", "misaligned", misaligned},
    {"84 bytes for f32 [4,5]", "bytes must equal dtype x shape", wrong_bytes},
    {"mse reads dy, written later", "read before write", read_before_write},
    {"mse_grad reads y after its last step", "read after last_step", read_after_last},
    {"y's interval starts before relu writes it", "output first_step mismatch", first_step_mismatch},
    {"a parameter in the gradients region", "wrong role/region", wrong_region},
    {"accumulate into an arena buffer", "in-place operands are parameters, gradients or optimizer state",
     in_place_arena},
    {"op 999", "unknown op 999", bad_op},
    {"relu with 2 inputs", "has 2 inputs; relu takes 1 to 1 (wrong arity)", wrong_arity},
    {"relu with 2 outputs", "has 2 outputs; relu has 1", wrong_output_count},
    {"matmul [4,3] x [5,3] without transpose", "inner dimensions differ", matmul_mismatch},
    {"relu writes y as [5,4]", "wrong output shape", wrong_output_shape},
    {"relu writes y as i32", "as i32 [4,5] but the op gives f32 [4,5]", wrong_output_dtype},
    {"an activation as workspace", "bad workspace", bad_workspace},
    {"workspace id 99", "no such buffer", workspace_out_of_range},
    {"micro_steps 10 of 9 steps", "micro_steps is 10", micro_steps_range},
    {"accumulate 0", "accumulate is 0", accumulate_zero},
    {"4 x 2 != 9", "micro_batch 4 x accumulate 2 x ranks 1 must equal global_batch 9", batch_product},
    {"ranks 1025", "ranks 1025: a data-parallel job has 1 to 1024 ranks", ranks_past_limit},
    {"2 ranks, one rank's batch", "micro_batch 4 x accumulate 2 x ranks 2 must equal global_batch 8",
     ranks_without_their_batch},
    {"alignment 48", "alignment 48 is not a power of two", alignment_three},
    {"io region of -1 bytes", "region io has -1 bytes", negative_region},
    {"regions summing past int64", "sum past int64", region_sum_overflow},
    {"version 2", "newer than this build", newer_version},
    {"version 0", "plan version is 0", version_zero},
    {"a gradient owned by an activation", "not a parameter buffer", owner_not_parameter},
    {"an activation with an owner", "only gradients and optimizer state have an owner", owner_on_activation},
    {"x twinned with t", "not two halves of one double buffer", twin_mismatch},
    {"dloss on top of w", "overlap in region parameters", persistent_overlap},
    {"a workspace no step uses", "never written", never_written},
    {"matmul without attributes", "carries none attributes", attrs_family},
    {"sgd inside the micro-batch block", "optimizer step inside the micro-batch block", optimizer_in_micro_block},
    {"a backward step in the optimizer block", "in phase backward lies in the optimizer block",
     backward_in_optimizer_block},
    {"a forward step after a backward one", "is a forward step after step 3 in phase backward", forward_after_backward},
    {"a backward step writing the gradient while accumulating 2",
     "or gradients written by a backward step when the plan accumulates 1 micro-batch",
     gradient_written_with_accumulation},
    {"live_bytes[3] = 1", "live_bytes[3] is 1 but the arena buffers live at step 3 hold 448 bytes", live_bytes_wrong},
    {"role_bytes[gradient] = 61", "role_bytes[gradient] is 61", role_bytes_wrong},
    {"peak at step 0", "peak_step 0 is not a step where the arena's live bytes peak (448)", peak_step_wrong},
    {"lower bound 200", "arena_lower_bound is 200 but the most bytes live at one step is 448", lower_bound_wrong},
    {"arena_naive 1", "arena_naive is 1 but the arena buffers, each rounded up to the alignment 64, sum to 704",
     naive_wrong},
    {"negative flops in the report", "flops[backward] is -1", report_flops_nan},
    {"an inference plan with backward steps", "inference plan", inference_backward},
    {"rank 9", "rank 9", rank_nine},
    {"a negative dim", "dims are >= 0", negative_dim},
    {"more elements than int64", "more bytes than int64 can count", huge_shape},
    {"loss id 99", "loss is buffer id 99", loss_out_of_range},
    {"a training plan without a loss", "no loss buffer", training_without_loss},
    {"output id -7", "output 0 is buffer id -7", output_out_of_range},
    {"last_step 9 of 9 steps", "last_step < 9", last_step_past_end},
    {"a parameter with a live interval", "only arena buffers have them", persistent_interval},
    {"relu writes a gradient", "step outputs are arena activations", output_to_gradient},
    {"dtype 17", "unknown dtype 17", unknown_dtype},
    {"role 9 (one past state)", "unknown role 9", unknown_role},
    {"a constant made running statistics", "only the step that updates them may read them", constant_made_state},
    {"phase 5", "unknown phase 5", unknown_phase},
    {"a step without a name", "step 1 has no name", step_without_name},
    {"infinite flops", "finite and >= 0", flops_not_finite},
    {"N bound to 0", "symbol values are >= 1", symbol_zero},
    {"zero a constant in place", "updates input 0 buffer 5 'dloss' in place", in_place_constant},
    {"input id past the buffers", "input 0 is buffer id 15", input_out_of_range},
    {"a reshape target with a symbol", "plans hold numbers only", symbolic_target},
    {"an external initializer without a file", "names no file or key", external_without_file},
    {"no live_bytes", "live_bytes is missing", missing_live_bytes},
    {"sgd with a negative learning rate", "each must be finite and >= 0", sgd_bad_hyperparameter},
    {"the loss as the loss scale seed", "must be an f32 scalar constant in the parameters region", seed_in_arena},
    {"loss scale seed id 99", "loss_scale_seed is buffer id 99", seed_out_of_range},
    {"an overflow check of [4,5]", "must be an f32 scalar in the arena", overflow_check_not_scalar},
    {"a scaled plan without an overflow check", "a scaled plan must detect overflow", seed_without_overflow_check},
    {"an initial loss scale of 1000", "the initial loss scale is 1000", seed_scale_not_power_of_two},
    {"matmul math i32", "matmul_math is i32 (dtype 3); it must be f32, bf16 or f16", matmul_math_i32},
    {"accumulate into a parameter", "in place inside the micro-batch block [0, 7), which runs 2 times",
     accumulate_into_parameter},
    {"accumulate a gradient onto itself", "updates input 0 buffer 13 'grad/w' in place and also reads it as input 1",
     accumulate_onto_itself},
    {"matmul_accumulate into a parameter", "(role parameter) in place inside the micro-batch block",
     matmul_accumulate_into_parameter},
    {"matmul_accumulate into an arena buffer", "in-place operands are parameters, gradients or optimizer state",
     matmul_accumulate_into_arena},
    {"matmul_accumulate of t^T t into gw [5,3]", "but the product of 't' [4,5] and 't' [4,5] is f32 [5,5]",
     matmul_accumulate_wrong_sum},
    {"matmul_accumulate into a sum of rank 3", "has rank 3; expected rank 2", matmul_accumulate_batched},
    {"matmul_accumulate with an output", "has 1 outputs; matmul_accumulate has 0", matmul_accumulate_output},
};

static void test_corruptions(void) {
  int refused = 0;
  size_t n = sizeof(corruptions) / sizeof(corruptions[0]);
  for (size_t i = 0; i < n; i++) {
    tf_plan *plan = plan_fixture_small();
    corruptions[i].apply(plan);
    tf_status status = tf_plan_verify(plan);
    const char *message = tf_status_message(status);
    bool ok = status && strstr(message, corruptions[i].phrase);
    CHECK(&counts, ok, "%s: expected a refusal containing \"%s\", got: %s", corruptions[i].what, corruptions[i].phrase,
          status ? message : "(accepted)");
    if (ok)
      refused++;
    if (getenv("TF_TEST_VERBOSE"))
      printf("  %-45s -> %s\n", corruptions[i].what, message);
    /* serialize verifies first, so a broken plan never reaches a file */
    void *data = NULL;
    size_t size = 0;
    tf_status serialized = tf_plan_serialize(plan, &data, &size);
    CHECK(&counts, serialized && !data, "%s: serialize refuses it", corruptions[i].what);
    tf_status_free(serialized);
    tf_status_free(status);
    tf_plan_destroy(plan);
  }
  printf("corruptions: %d of %zu refused with the expected message\n", refused, n);
}

/* ---- hostile bytes ---- */

static void expect_refusal(const void *data, size_t size, const char *what, const char *phrase) {
  tf_plan *plan = NULL;
  tf_status status = tf_plan_parse(data, size, "hostile.tfplan", &plan);
  const char *message = tf_status_message(status);
  CHECK(&counts, status && !plan && strncmp(message, "hostile.tfplan: ", 16) == 0 && strstr(message, phrase),
        "%s: expected \"hostile.tfplan: ...%s...\", got: %s", what, phrase, status ? message : "(accepted)");
  if (getenv("TF_TEST_VERBOSE"))
    printf("  %-45s -> %s\n", what, message);
  tf_status_free(status);
  tf_plan_destroy(plan);
}

/* Encodes `plan` without verifying it (tf_plan_fb_encode), to reach the decoder's own checks. */
static void expect_decode_refusal(tf_plan *plan, const char *what, const char *phrase) {
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(&counts, tf_plan_fb_encode(plan, &data, &size));
  if (data)
    expect_refusal(data, size, what, phrase);
  free(data);
  tf_plan_destroy(plan);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void test_hostile_bytes(void) {
  tf_plan *plan = plan_fixture_small();
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  tf_plan_destroy(plan);
  unsigned char *bytes = malloc(size);
  memcpy(bytes, data, size);

  expect_refusal(NULL, 0, "no bytes", "empty input");
  expect_refusal(bytes, 5, "5 bytes", "too short for a FlatBuffer");
  memcpy(bytes + 4, "TFGR", 4);
  expect_refusal(bytes, size, "a graph's identifier", "file identifier is 'TFGR', expected 'TFPL'");
  memcpy(bytes + 4, "TFPL", 4);

  /* Cuts into the FlatBuffer are refused; a cut inside the 16-byte checksum trailer leaves the whole
   * FlatBuffer, which loads as an older tightfit's plan (unchecked, unchanged). */
  const size_t body = size - 16;
  int truncated = 0, trailer_cuts = 0;
  for (size_t n = 0; n < size; n++) {
    char *json = NULL;
    tf_status_free(tf_plan_fb_to_json(bytes, n, &json));
    free(json);
    tf_plan *out = NULL;
    tf_status status = tf_plan_parse(bytes, n, "truncated", &out);
    truncated += n < body && status != NULL;
    trailer_cuts += n >= body && status == NULL;
    tf_status_free(status);
    tf_plan_destroy(out);
  }
  CHECK(&counts, truncated == (int)body, "every cut into the FlatBuffer refused (%d of %zu)", truncated, body);
  CHECK(&counts, trailer_cuts == 16, "cuts inside the trailer load (%d of 16)", trailer_cuts);
  expect_refusal(bytes, body - 8, "the last 8 bytes of the FlatBuffer cut", "corrupt or truncated FlatBuffer");
  printf("truncations: %d of %zu into the FlatBuffer refused, %d inside the trailer loaded\n", truncated, body,
         trailer_cuts);

  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; trial++) {
    memcpy(bytes, data, size);
    int flips = 1 + (int)(next_random() % 4);
    bool outside_marker = false, marker_hit = false; /* the trailer's last 8 bytes name it */
    for (int f = 0; f < flips; f++) {
      size_t at = next_random() % size;
      bytes[at] ^= (unsigned char)(1u << (next_random() % 8));
      outside_marker |= at < size - 8;
      marker_hit |= at >= size - 8;
    }
    char *json = NULL;
    tf_status_free(tf_plan_fb_to_json(bytes, size, &json)); /* shows whatever the Verifier lets through */
    free(json);
    tf_plan *out = NULL;
    tf_status status = tf_plan_parse(bytes, size, "flipped", &out);
    if (status)
      rejected++;
    else
      accepted++;
    /* The checksum trailer (plan/plan_checksum.h): with its marker intact, any flip in the
     * FlatBuffer or the hash is refused, the ones the Verifier and the invariants allow (an
     * initialiser's value) included. A damaged marker makes the file an unchecked older plan. */
    CHECK(&counts, status || !outside_marker || marker_hit || memcmp(bytes, data, size - 8) == 0,
          "trial %d: %d flipped bits outside the trailer's marker were accepted", trial, flips);
    /* Whatever was accepted passed every check: it must serialise again. */
    if (out) {
      void *again = NULL;
      size_t again_size = 0;
      CHECK_OK(&counts, tf_plan_serialize(out, &again, &again_size));
      free(again);
    }
    tf_status_free(status);
    tf_plan_destroy(out);
  }
  CHECK(&counts, rejected > 0, "flips refused");
  printf("random byte flips: 3000 trials, %d refused, %d accepted (each with a flip in the checksum's marker), no "
         "crash\n",
         rejected, accepted);
  free(bytes);
  free(data);

  plan = plan_fixture_small();
  plan->version = TF_PLAN_VERSION + 1;
  expect_decode_refusal(plan, "plan version 2", "written by a newer tightfit: plan version 2");
  plan = plan_fixture_small();
  plan->version = 0;
  expect_decode_refusal(plan, "plan version 0", "missing plan version");
  plan = plan_fixture_small();
  free(plan->buffers[SMALL_Y].name);
  plan->buffers[SMALL_Y].name = NULL;
  expect_decode_refusal(plan, "a buffer without a name", "buffer 7 '': has no name");
  plan = plan_fixture_small();
  free(plan->steps[STEP_SGD].name);
  plan->steps[STEP_SGD].name = NULL;
  expect_decode_refusal(plan, "a step without a name", "step 7 '': has no name");
  plan = plan_fixture_small();
  free(plan->symbol_names[0]);
  plan->symbol_names[0] = NULL;
  expect_decode_refusal(plan, "a symbol without a name", "symbol 0 '': has no name");
  plan = plan_fixture_small();
  plan->buffers[SMALL_H].offset = 64 * 1024;
  expect_decode_refusal(plan, "a buffer past the arena", "hostile.tfplan: buffer 6 'h' at offset 65536");
}

/* ---- timing ---- */

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_big_plan(void) {
  tf_plan *plan = plan_fixture_big(5000);
  double start = seconds_now();
  tf_status status = tf_plan_verify(plan);
  double elapsed = seconds_now() - start;
  CHECK(&counts, status == NULL, "big plan: %s", tf_status_message(status));
  tf_status_free(status);
  printf("verifier: %d buffers, %d steps, arena lower bound %" PRId64 " B (%" PRId64 " buffers live at the peak): "
         "%.3f s\n",
         plan->n_buffers, plan->n_steps, plan->report.arena_lower_bound, plan->report.arena_lower_bound / 64, elapsed);
  CHECK(&counts, elapsed < 2.0, "verifying 10k buffers x 5k steps took %.3f s", elapsed);
  /* One overlap planted late in the program is found. */
  plan->buffers[plan->n_buffers - 2].offset = plan->buffers[2].offset;
  status = tf_plan_verify(plan);
  CHECK(&counts, status && strstr(tf_status_message(status), "overlapping live arena buffers"), "planted overlap: %s",
        tf_status_message(status));
  tf_status_free(status);
  tf_plan_destroy(plan);
}

/* Variadic ops take up to 127 inputs; op table masks have 8 bits (a shift past 31 was undefined). */
static void test_many_inputs(void) {
  tf_plan *plan = plan_fixture_big(100);
  tf_plan_step *last = &plan->steps[99];
  free(last->inputs);
  last->op = TF_OP_GLOBAL_NORM_SQ;
  last->n_inputs = 127;
  last->inputs = malloc(sizeof(int32_t) * 127);
  for (int32_t i = 0; i < 127; i++)
    last->inputs[i] = 1; /* a0, live to the end (the mirror read) */
  tf_plan_buffer *out = &plan->buffers[100];
  out->rank = 0;
  out->bytes = 4;
  plan_fixture_fill_report(plan);
  CHECK_OK(&counts, tf_plan_verify(plan));
  last->n_inputs = 128;
  tf_status status = tf_plan_verify(plan);
  CHECK(&counts, status && strstr(tf_status_message(status), "has 128 inputs; global_norm_sq takes 1 to 127"),
        "128 inputs: %s", tf_status_message(status));
  tf_status_free(status);
  printf("global_norm_sq with 127 inputs verifies; with 128 refused\n");
  tf_plan_destroy(plan);
}

int main(void) {
  char folder[] = "/tmp/tf_test_plan_XXXXXX";
  if (!mkdtemp(folder)) {
    perror("mkdtemp");
    return 2;
  }
  test_valid();
  test_round_trips(folder);
  test_json(folder);
  test_corruptions();
  test_hostile_bytes();
  test_many_inputs();
  test_big_plan();
  char path[600];
  snprintf(path, sizeof(path), "%s/small.tfplan", folder);
  remove(path);
  rmdir(folder);
  return tf_test_finish("test_plan", &counts);
}
