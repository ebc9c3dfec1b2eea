/* The CUDA backend's fusion groups (backends/cuda/cuda_fuse.h), found on real compiled plans without a
 * GPU: gpt2-small (1 layer) in f32 and with bf16 storage and bf16 math; the
 * bf16 half-kernel model (tests/half_model.h); the zoo's mlp (relu: bias groups, no gelu) with
 * gradient accumulation (matmul_accumulate); a linear without bias whose product is read twice (no
 * group); one bias shared by two linears (both fuse). Each plan's groups are printed and their
 * counts per kind asserted; the switches turn each kind off; and a plan whose bytes are made to
 * overlap between a bgradb group's steps loses that group (the byte-range check); a group uses its
 * matmul's workspace only where no live buffer or operand of its steps lies on it. What the fused
 * launches compute is test_cuda_fuse_gpu's (on a GPU). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_fuse.h"
#include "check.h"
#include "half_model.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

enum { KINDS = TF_CUDA_FUSION_OPTIMIZER + 1 };

typedef struct expected {
  int32_t kinds[KINDS];      /* bias, bias+gelu, bias+gelu(aux), bgradb or bgrada, optimizer groups */
  int32_t optimizer_tensors; /* in all optimizer groups together; -1: not checked */
} expected;

static const tf_cuda_fusion_options ALL = {
    .epilogues = true, .multi_tensor = true, .gelu_dtypes = 1u << TF_F32 | 1u << TF_BF16 | 1u << TF_F16};

static bool overlap(const tf_plan *plan, int32_t a, int32_t b) {
  const tf_plan_buffer *x = &plan->buffers[a], *y = &plan->buffers[b];
  return x->region == y->region && x->bytes > 0 && y->bytes > 0 && x->offset < y->offset + y->bytes &&
         y->offset < x->offset + x->bytes;
}

/* Whether GEMM group f may use its matmul's workspace, checked apart from cuda_fuse.c: where it
 * says so, the workspace shares no byte with a member step's operand or output, nor with any
 * non-workspace buffer live at the launch step. */
static bool workspace_use_safe(const tf_plan *plan, const tf_cuda_fusion *f) {
  const int32_t ws = f->kind == TF_CUDA_FUSION_OPTIMIZER ? -1 : plan->steps[f->matmul_step].workspace;
  if (ws < 0 || !f->workspace)
    return true;
  for (int32_t m = 0; m < f->n_members; m++) {
    const tf_plan_step *step = &plan->steps[f->members[m]];
    for (int32_t k = 0; k < step->n_inputs; k++)
      if (overlap(plan, ws, step->inputs[k]))
        return false;
    for (int32_t k = 0; k < step->n_outputs; k++)
      if (overlap(plan, ws, step->outputs[k]))
        return false;
  }
  for (int32_t b = 0; b < plan->n_buffers; b++)
    if (b != ws && plan->buffers[b].role != TF_ROLE_WORKSPACE && plan->buffers[b].first_step <= f->launch_step &&
        f->launch_step <= plan->buffers[b].last_step && overlap(plan, ws, b))
      return false;
  return true;
}

/* Finds the groups of `plan` with `options`, prints them under `label`, counts them per kind. */
static int32_t find_groups(const char *label, const tf_plan *plan, tf_cuda_fusion_options options, int32_t *kinds,
                           int32_t *optimizer_tensors, bool print) {
  tf_cuda_fusion *groups = NULL;
  int32_t n = 0;
  tf_status status = tf_cuda_fusion_find(plan, options, &groups, &n);
  CHECK(&counts, status == NULL, "%s: %s", label, tf_status_message(status));
  tf_status_free(status);
  memset(kinds, 0, KINDS * sizeof(int32_t));
  *optimizer_tensors = 0;
  for (int32_t g = 0; g < n; g++) {
    CHECK(&counts, workspace_use_safe(plan, &groups[g]), "%s: group at step %d uses a workspace that is not free there",
          label, groups[g].launch_step);
    kinds[groups[g].kind == TF_CUDA_FUSION_BGRADA ? TF_CUDA_FUSION_BGRADB : groups[g].kind]++; /* bgrad[ab] */
    if (groups[g].kind == TF_CUDA_FUSION_OPTIMIZER)
      *optimizer_tensors += (groups[g].last - groups[g].first + 1) / (groups[g].zero_grads ? 2 : 1);
    if (print) {
      char text[160];
      tf_cuda_fusion_describe(&groups[g], text, sizeof(text));
      const tf_plan_step *at = &plan->steps[groups[g].launch_step];
      printf("       %s: %s ('%s')\n", label, text, at->name);
    }
  }
  free(groups);
  return n;
}

static void check_plan(const char *label, const tf_plan *plan, expected want) {
  if (!plan)
    return;
  int32_t kinds[KINDS], tensors = 0;
  find_groups(label, plan, ALL, kinds, &tensors, true);
  bool ok = want.optimizer_tensors < 0 || tensors == want.optimizer_tensors;
  for (int k = 0; k < KINDS; k++)
    ok = ok && kinds[k] == want.kinds[k];
  CHECK(&counts, ok,
        "%s: groups bias %d, bias+gelu %d, bias+gelu(aux) %d, bgradb %d, optimizer %d (%d tensors); expected %d, %d, "
        "%d, %d, %d (%d)",
        label, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], tensors, want.kinds[0], want.kinds[1], want.kinds[2],
        want.kinds[3], want.kinds[4], want.optimizer_tensors);
  printf("%-4s %s: bias %d, bias+gelu %d, bias+gelu(aux) %d, bgradb %d, optimizer %d (%d tensors)\n",
         ok ? "ok" : "FAIL", label, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], tensors);
  /* the switches: each turns its kinds off, the other's stay */
  int32_t off[KINDS], off_tensors;
  find_groups(label, plan, (tf_cuda_fusion_options){.epilogues = false, .multi_tensor = true, .gelu_dtypes = ~0u}, off,
              &off_tensors, false);
  const bool epilogues_off = off[0] + off[1] + off[2] + off[3] == 0 && off[4] == kinds[4];
  find_groups(label, plan, (tf_cuda_fusion_options){.epilogues = true, .multi_tensor = false, .gelu_dtypes = ~0u}, off,
              &off_tensors, false);
  const bool multi_off = off[4] == 0 && off[0] == kinds[0] && off[3] == kinds[3];
  /* no GELU epilogue: each bias+gelu group becomes a bias group, nothing else changes */
  int32_t no_gelu[KINDS];
  find_groups(label, plan, (tf_cuda_fusion_options){.epilogues = true, .multi_tensor = true, .gelu_dtypes = 0}, no_gelu,
              &off_tensors, false);
  CHECK(&counts,
        no_gelu[1] + no_gelu[2] == 0 && no_gelu[0] == kinds[0] + kinds[1] + kinds[2] && no_gelu[3] == kinds[3] &&
            no_gelu[4] == kinds[4],
        "%s: without the GELU epilogue: bias %d, bias+gelu %d, bias+gelu(aux) %d, bgradb %d, optimizer %d", label,
        no_gelu[0], no_gelu[1], no_gelu[2], no_gelu[3], no_gelu[4]);
  CHECK(&counts, epilogues_off && multi_off,
        "%s: a switch left groups of its kind (epilogues off ok %d, multi off ok %d)", label, epilogues_off, multi_off);
}

static tf_plan *compile_zoo(const char *preset, const char *const *overrides, int32_t n_overrides,
                            tf_compile_options o) {
  tf_graph *g = NULL;
  tf_plan *plan = NULL;
  tf_status status = tf_zoo_build(preset, overrides, n_overrides, &g);
  if (!status)
    status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "%s: %s", preset, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

static tf_compile_options cuda_options(const char *bindings) {
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CUDA);
  o.bindings = bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  return o;
}

static const char *const GPT1[] = {"layers=1"};

/* gpt2-small, one layer: four linears with biases (c_attn, attn.c_proj, c_fc + gelu, mlp.c_proj; the
 * gelu's input is read again by its gradient: aux), their four bias gradients, no bias on lm_head,
 * 16 parameter tensors updated by one launch. */
static void gpt2_plans(void) {
  tf_plan *plan = compile_zoo("gpt2-small", GPT1, 1, cuda_options("N=2,T=64"));
  check_plan("gpt2-small f32", plan, (expected){{3, 0, 1, 4, 1}, 16});
  /* overlap a bgradb group's dz with the output of a step between its sum_to and its matmul: the
   * moved read must see the change and the group go (the bytes check of cuda_fuse.c) */
  tf_cuda_fusion *groups = NULL;
  int32_t n = 0;
  tf_status status = plan ? tf_cuda_fusion_find(plan, ALL, &groups, &n) : NULL;
  tf_status_free(status);
  bool broken = false;
  for (int32_t g = 0; g < n && !broken; g++) {
    const tf_cuda_fusion *f = &groups[g];
    if (f->kind != TF_CUDA_FUSION_BGRADB)
      continue;
    const tf_plan_step *sum_to = &plan->steps[f->members[0] == f->matmul_step ? f->members[1] : f->members[0]];
    for (int32_t s = f->first + 1; s < f->last && !broken; s++) {
      tf_plan_step *between = &plan->steps[s];
      if (between->n_outputs == 0)
        continue;
      tf_plan_buffer *out = &plan->buffers[between->outputs[0]];
      const tf_plan_buffer *dz = &plan->buffers[sum_to->inputs[0]];
      const tf_region region = out->region;
      const int64_t offset = out->offset;
      out->region = dz->region, out->offset = dz->offset;
      int32_t kinds[KINDS], tensors;
      find_groups("gpt2-small f32, dz overwritten", plan, ALL, kinds, &tensors, false);
      CHECK(&counts, kinds[TF_CUDA_FUSION_BGRADB] == 3,
            "step %d '%s' overwrites the bytes of dz between the sum_to and the matmul of a bgradb group, and %d "
            "bgradb groups remain (expected 3)",
            s, between->name, kinds[TF_CUDA_FUSION_BGRADB]);
      printf("%-4s step %d '%s' made to overwrite dz: bgradb groups %d (was 4)\n",
             kinds[TF_CUDA_FUSION_BGRADB] == 3 ? "ok" : "FAIL", s, between->name, kinds[TF_CUDA_FUSION_BGRADB]);
      out->region = region, out->offset = offset;
      broken = true;
    }
  }
  CHECK(&counts, broken || !plan, "no bgradb group with a step between its members to break");
  free(groups);
  tf_plan_destroy(plan);

  tf_compile_options o = cuda_options("N=2,T=64");
  o.set_precision = true;
  o.precision = TF_PRECISION_BF16;
  o.matmul_math = TF_BF16;
  plan = compile_zoo("gpt2-small", GPT1, 1, o);
  /* bf16 storage: the same linears on f32 data, casts beside them. c_fc's gelu runs in place over z,
   * which its bf16 copy's cast reads before it: bias only. The recompute casts the backward pass
   * interleaves put steps that reuse dz's bytes between three of the four sum_to/matmul pairs, or
   * make their spans overlap: one bgradb group */
  check_plan("gpt2-small bf16 storage, bf16 math", plan, (expected){{4, 0, 0, 1, 1}, 16});
  tf_plan_destroy(plan);

  /* autocast: the biases are cast to bf16 between each matmul and its add, so the four bias groups
   * launch at the add. Two bias gradients stay apart: their f32 cast reads db between the sum_to and
   * the matmul, and the product's output shares bytes with a step between the two */
  o = cuda_options("N=2,T=64");
  o.autocast = TF_BF16;
  plan = compile_zoo("gpt2-small", GPT1, 1, o);
  check_plan("gpt2-small autocast bf16", plan, (expected){{3, 0, 1, 2, 1}, 16});
  tf_plan_destroy(plan);
}

/* The zoo's mlp with two accumulated micro-batches: relu, no gelu; weight gradients through
 * matmul_accumulate fuse with their bias gradients as well. */
static void mlp_plans(void) {
  tf_compile_options o = cuda_options("N=8");
  tf_plan *plan = compile_zoo("mlp", NULL, 0, o);
  check_plan("mlp", plan, (expected){{3, 0, 0, 3, 1}, 6});
  tf_plan_destroy(plan);
  o.accumulate = 2;
  plan = compile_zoo("mlp", NULL, 0, o);
  int32_t accumulating = 0;
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    accumulating += plan->steps[s].op == TF_OP_MATMUL_ACCUMULATE;
  printf("       mlp, 2 micro-batches: %d matmul_accumulate steps\n", accumulating);
  /* every layer's db fuses at its sum_to (an accumulate step reads db between). Since relu_grad reads
   * relu's output, the arena no longer puts the head's and hidden.1's db on the bytes of x, which dies
   * at their matmul (a GEMM must not write what it reads). The updates alternate with the zero steps
   * of their gradients: one group zeroing them */
  check_plan("mlp, 2 micro-batches", plan, (expected){{3, 0, 0, 3, 1}, 6});
  tf_plan_destroy(plan);
}

/* The bf16 half-kernel model: x W1 + b1 on bf16 data, b1 a bf16 cast of the parameter written
 * before the matmul; W2 has no bias; W1's gradient (weights [in, out]) takes b1's: bgrada. */
static void half_model_plan(void) {
  tf_plan *plan = tf_half_model_compile(&counts, TF_BF16, TF_TARGET_CUDA, true);
  check_plan("half model bf16", plan, (expected){{1, 0, 0, 1, 1}, 5});
  tf_plan_destroy(plan);
}

/* x [8, 16] -> two linears -> mse. `shared_bias`: both add one bias b [32]; else the first has no
 * bias and its product y is read twice (y + c, then (y + c) * y). */
static tf_plan *small_plan(bool shared_bias) {
  tf_graph *g = tf_test_graph_begin(&counts, shared_bias ? "shared bias" : "no bias, product read twice");
  if (!g)
    return NULL;
  const tf_dim x_dims[2] = {d(8), d(16)}, w1_dims[2] = {d(16), d(32)}, w2_dims[2] = {d(32), d(32)}, b_dims[1] = {d(32)};
  const tf_dim t_dims[2] = {d(8), d(32)};
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, tf_shape_from(x_dims, 2));
  tf_tensor_id target = tf_graph_label(g, "target", TF_F32, tf_shape_from(t_dims, 2));
  tf_tensor_id w1 = tf_test_param(g, "w1", tf_shape_from(w1_dims, 2));
  tf_tensor_id w2 = tf_test_param(g, "w2", tf_shape_from(w2_dims, 2));
  tf_tensor_id b = tf_test_param(g, "b", tf_shape_from(b_dims, 1));
  tf_tensor_id y = tf_matmul(g, x, w1, false, false), h;
  if (shared_bias) {
    h = tf_unary(g, TF_OP_RELU, tf_add(g, y, b));
    h = tf_add(g, tf_matmul(g, h, w2, false, false), b);
  } else {
    h = tf_mul(g, tf_add(g, y, b), y);
    h = tf_matmul(g, h, w2, false, false);
  }
  tf_test_finish_loss(g, tf_mse(g, h, target));
  tf_compile_options o = cuda_options(NULL);
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "small plan: %s", tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

static void small_plans(void) {
  tf_plan *plan = small_plan(false);
  /* y is read by the add and the mul (and the mul's gradient): no bias group; w2 has no bias; the
   * bias gradient's dz is not what the weight gradient multiplies: no bgradb */
  check_plan("no bias, product read twice", plan, (expected){{0, 0, 0, 0, 1}, 3});
  tf_plan_destroy(plan);
  plan = small_plan(true);
  if (plan && getenv("TEST_CUDA_FUSE_SAVE")) {
    tf_status saved = tf_plan_save(plan, getenv("TEST_CUDA_FUSE_SAVE"));
    tf_status_free(saved);
  }
  check_plan("one bias shared by two linears", plan, (expected){{2, 0, 0, 2, 1}, 3});
  tf_plan_destroy(plan);
}

/* TIGHTFIT_CUDA_GELU_EPILOGUE: its values, its refusals, and the default (f16 only) on an f32 plan,
 * whose c_fc group then stops at the bias. */
static void gelu_switch(void) {
  static const struct {
    const char *value;
    uint32_t dtypes;
    bool ok;
  } cases[] = {
      {NULL, 1u << TF_F16, true},
      {"", 1u << TF_F16, true},
      {"all", 1u << TF_F32 | 1u << TF_BF16 | 1u << TF_F16, true},
      {"off", 0, true},
      {"0", 0, true},
      {"f32,bf16", 1u << TF_F32 | 1u << TF_BF16, true},
      {"f16", 1u << TF_F16, true},
      {"f64", 0, false},
      {"f32,,f16", 0, false},
      {"F32", 0, false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint32_t dtypes = 0;
    tf_status status = tf_cuda_gelu_epilogue_parse(cases[i].value, &dtypes);
    const bool ok = cases[i].ok ? status == NULL && dtypes == cases[i].dtypes
                                : status != NULL && tf_status_code(status) == TF_ERR_INVALID_ARGUMENT &&
                                      strstr(tf_status_message(status), cases[i].value) != NULL;
    CHECK(&counts, ok, "TIGHTFIT_CUDA_GELU_EPILOGUE='%s': types 0x%x, status '%s'",
          cases[i].value ? cases[i].value : "(unset)", dtypes, tf_status_message(status));
    printf("%-4s TIGHTFIT_CUDA_GELU_EPILOGUE='%s': %s\n", ok ? "ok" : "FAIL",
           cases[i].value ? cases[i].value : "(unset)", status ? tf_status_message(status) : "accepted");
    tf_status_free(status);
  }
  unsetenv("TIGHTFIT_CUDA_GELU_EPILOGUE");
  tf_cuda_fusion_options options;
  tf_status status = tf_cuda_fusion_options_from_env(&options);
  CHECK(&counts, status == NULL, "options from the environment: %s", tf_status_message(status));
  tf_status_free(status);
  tf_plan *plan = compile_zoo("gpt2-small", GPT1, 1, cuda_options("N=2,T=64"));
  if (!plan)
    return;
  int32_t kinds[KINDS], tensors = 0;
  find_groups("gpt2-small f32, default options", plan, options, kinds, &tensors, false);
  const bool ok = kinds[0] == 4 && kinds[1] + kinds[2] == 0 && kinds[3] == 4;
  CHECK(&counts, ok,
        "gpt2-small f32 with the default options: bias %d, bias+gelu %d + %d, bgradb %d (expected 4, 0, 4)", kinds[0],
        kinds[1], kinds[2], kinds[3]);
  printf("%-4s gpt2-small f32, default options: bias %d, bias+gelu(aux) %d, bgradb %d\n", ok ? "ok" : "FAIL", kinds[0],
         kinds[2], kinds[3]);
  tf_plan_destroy(plan);
}

int main(void) {
  gelu_switch();
  gpt2_plans();
  mlp_plans();
  half_model_plan();
  small_plans();
  return tf_test_finish("cuda fuse", &counts);
}
