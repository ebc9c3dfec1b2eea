/* The convolutions on f16/bf16 data (a graph that declares its activations half): each target's
 * half kernels for them (CPU: half slices; Vulkan: the f16/bf16 shader variants; CUDA: conv.cu's
 * f32 kernel on operands widened into its workspace) compute in f32 from the half values and round
 * each result once, so a plan using them must train to the bits of the plan that runs every
 * convolution on f32 copies between casts (compiled with the target's half kernels off).
 *
 * The network, bf16 and f16, every convolution op and its gradients on half data:
 *   x [3, 4, 9, 9] -> conv2d 3x3 pad 1 (+ bias) -> relu -> conv2d 1x1 (a direct convolution on f32)
 *   -> conv2d 3x3 stride 2 pad 1, 2 groups (+ bias) -> conv_transpose2d 2x2 stride 2 (+ bias)
 *   -> [3, 3, 100] -> conv1d 3 pad 1 (+ bias) -> f32 -> mse against a target.
 * On every backend present (cpu always, vulkan when a device opens, cuda on a GPU, else SKIP):
 *   - the plan with half kernels runs the 7 convolution ops (forward, grad_input, grad_weight) on
 *     half data and has fewer casts; the other runs none on half data;
 *   - 3 AdamW steps side by side on the same micro-batches: the same losses, and every weight and
 *     AdamW moment the same, bit for bit.
 * (On CUDA the f32 convolutions' cuBLAS products are the same calls except the 1x1 one, which goes
 * through im2col on half data: cuBLAS may pick another algorithm for its other strides, which
 * this test would show.) */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "check.h"
#include "core/workspace.h"
#include "op_graphs.h"
#include "session_compare.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

static tf_test_counts counts;

#define STEPS 3
#define BATCH 3

static tf_conv_attrs conv_attrs(int32_t stride, int32_t padding, int32_t groups) {
  tf_conv_attrs a;
  memset(&a, 0, sizeof(a));
  for (int i = 0; i < 2; i++)
    a.stride[i] = stride, a.padding[i] = padding, a.dilation[i] = 1;
  a.groups = groups;
  return a;
}

/* An f32 parameter read through a cast to `half`. */
static tf_tensor_id half_param(tf_graph *g, const char *name, tf_shape shape, tf_dtype half) {
  return tf_cast(g, tf_test_param(g, name, shape), half);
}

static tf_graph *build(tf_dtype half) {
  tf_graph *g = tf_test_graph_begin(&counts, "half_convs");
  if (!g)
    return NULL;
  tf_tensor_id x = tf_cast(g, tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(BATCH), d(4), d(9), d(9))), half);
  tf_tensor_id target = tf_graph_input(g, "target", TF_F32, TF_SHAPE(d(BATCH), d(2), d(100)));
  tf_conv_attrs same = conv_attrs(1, 1, 1), pointwise = conv_attrs(1, 0, 1), down = conv_attrs(2, 1, 2),
                up = conv_attrs(2, 0, 1);
  tf_tensor_id h = tf_conv2d(g, x, half_param(g, "w1", TF_SHAPE(d(6), d(4), d(3), d(3)), half),
                             half_param(g, "b1", TF_SHAPE(d(6)), half), &same);
  h = tf_unary(g, TF_OP_RELU, h);
  h = tf_conv2d(g, h, half_param(g, "w2", TF_SHAPE(d(6), d(6), d(1), d(1)), half), TF_NO_TENSOR, &pointwise);
  h = tf_conv2d(g, h, half_param(g, "w3", TF_SHAPE(d(4), d(3), d(3), d(3)), half),
                half_param(g, "b3", TF_SHAPE(d(4)), half), &down);
  h = tf_conv_transpose2d(g, h, half_param(g, "wt", TF_SHAPE(d(4), d(3), d(2), d(2)), half),
                          half_param(g, "bt", TF_SHAPE(d(3)), half), &up);
  h = tf_reshape(g, h, TF_SHAPE(d(BATCH), d(3), d(100)));
  h = tf_conv1d(g, h, half_param(g, "w4", TF_SHAPE(d(2), d(3), d(3)), half), half_param(g, "b4", TF_SHAPE(d(2)), half),
                1, 1, 1, 1);
  tf_test_finish_loss(g, tf_mse(g, tf_cast(g, h, TF_F32), target));
  return g;
}

static tf_target_kind target_of(const char *backend) {
  return strcmp(backend, "vulkan") == 0 ? TF_TARGET_VULKAN
         : strcmp(backend, "cuda") == 0 ? TF_TARGET_CUDA
                                        : TF_TARGET_CPU;
}

static tf_plan *compile(const tf_graph *g, const char *backend, bool half_kernels) {
  tf_compile_options o = tf_compile_options_default(target_of(backend));
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.learning_rate = 0.01;
  o.loss_scale = 1.0;
  if (!half_kernels)
    memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "compiling for %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  return plan;
}

/* The convolution steps on `half` data, the distinct convolution ops among them, and the casts. */
typedef struct plan_counts {
  int32_t half_convolutions, ops_on_half, casts;
} plan_counts;

static plan_counts count(const tf_plan *plan, tf_dtype half) {
  plan_counts c = {0, 0, 0};
  bool seen[TF_OP_COUNT] = {false};
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    c.casts += step->op == TF_OP_CAST;
    if (tf_op_workspace_rule(step->op) != TF_WORKSPACE_CONV || plan->buffers[step->outputs[0]].dtype != half)
      continue;
    c.half_convolutions++;
    c.ops_on_half += !seen[step->op];
    seen[step->op] = true;
  }
  return c;
}

/* A session of `plan` on `backend`, or NULL: a failure on cpu, a SKIP (printed) elsewhere. */
static tf_session *open_session(const tf_plan *plan, const char *backend) {
  tf_session_options so = tf_session_options_default();
  so.backend = backend;
  so.seed = 7;
  tf_session *s = NULL;
  tf_status status = tf_session_create(plan, &so, &s);
  if (status && strcmp(backend, "cpu") != 0)
    printf("SKIP %s: %s\n", backend, tf_status_message(status));
  else
    CHECK(&counts, status == NULL, "session on %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  return s;
}

/* Both plans trained side by side on the same micro-batches: the same losses, and the same
 * parameters and optimizer state byte for byte. */
static void compare(const char *backend, tf_dtype half, tf_plan *plans[2]) {
  const plan_counts kernels = count(plans[0], half), casts = count(plans[1], half);
  CHECK(&counts, kernels.ops_on_half == 7 && casts.half_convolutions == 0 && kernels.casts < casts.casts,
        "%s %s: %d convolution steps (%d ops) on half data with half kernels, %d without; casts %d and %d", backend,
        tf_dtype_name(half), kernels.half_convolutions, kernels.ops_on_half, casts.half_convolutions, kernels.casts,
        casts.casts);
  printf("     %s %s: plan %" PRId64 " bytes with half kernels, %" PRId64 " between casts\n", backend,
         tf_dtype_name(half), tf_plan_total_bytes(plans[0]), tf_plan_total_bytes(plans[1]));
  tf_session *a = open_session(plans[0], backend), *b = a ? open_session(plans[1], backend) : NULL;
  double losses[2][STEPS] = {{0}};
  tf_status status = a && b ? NULL : tf_status_new(TF_ERR_UNSUPPORTED, "no session");
  for (int64_t i = 0; i < STEPS && !status; i++)
    for (int k = 0; k < 2 && !status; k++) {
      tf_session *s = k == 0 ? a : b;
      status = tf_test_feed(s, plans[k], i, false);
      if (!status)
        status = tf_session_micro_step(s, &losses[k][i]);
      if (!status)
        status = tf_session_optimizer_step(s);
    }
  if (a && b) {
    CHECK(&counts, status == NULL, "training on %s: %s", backend, tf_status_message(status));
    const bool same_losses = status == NULL && memcmp(losses[0], losses[1], sizeof(losses[0])) == 0;
    CHECK(&counts, same_losses, "%s %s: losses %.9g %.9g %.9g with half kernels, %.9g %.9g %.9g between casts", backend,
          tf_dtype_name(half), losses[0][0], losses[0][1], losses[0][2], losses[1][0], losses[1][1], losses[1][2]);
    const int64_t differ = tf_test_state_difference(&counts, a, plans[0], b, plans[1]);
    CHECK(&counts, differ == 0, "%s %s: %" PRId64 " bytes of weights and AdamW state differ", backend,
          tf_dtype_name(half), differ);
    printf("%s   %s %s: %d convolution steps of 7 ops on %s data (%d casts; %d between casts); %d steps, losses "
           "%.6f -> %.6f; weights and AdamW state bit for bit the plan between casts\n",
           same_losses && differ == 0 ? "ok" : "FAIL", backend, tf_dtype_name(half), kernels.half_convolutions,
           tf_dtype_name(half), kernels.casts, casts.casts, STEPS, losses[0][0], losses[0][STEPS - 1]);
  }
  tf_status_free(status);
  tf_session_destroy(a);
  tf_session_destroy(b);
}

int main(void) {
  const char *backends[] = {"cpu", "vulkan", "cuda"};
  const tf_dtype halves[] = {TF_BF16, TF_F16};
  for (size_t h = 0; h < sizeof(halves) / sizeof(halves[0]); h++) {
    tf_graph *g = build(halves[h]);
    for (size_t b = 0; g && b < sizeof(backends) / sizeof(backends[0]); b++) {
      if (!tf_backend_find(backends[b])) {
        printf("SKIP %s: not in this build\n", backends[b]);
        continue;
      }
      tf_plan *plans[2] = {compile(g, backends[b], true), compile(g, backends[b], false)};
      if (plans[0] && plans[1])
        compare(backends[b], halves[h], plans);
      tf_plan_destroy(plans[0]);
      tf_plan_destroy(plans[1]);
    }
    tf_graph_destroy(g);
  }
  return tf_test_finish("half convolutions", &counts);
}
