/* Plans built by hand for the plan tests: a small training plan whose every number is worked out
 * in plan_fixture.c, and a large synthetic one for timing the verifier. */
#ifndef TIGHTFIT_TESTS_PLAN_FIXTURE_H
#define TIGHTFIT_TESTS_PLAN_FIXTURE_H

#include "tightfit/plan.h"

/* Buffer ids of the small plan. */
enum {
  SMALL_X = 0,
  SMALL_X_TWIN,
  SMALL_T,
  SMALL_T_TWIN, /* io: input x [4,3], label t [4,5], double-buffered */
  SMALL_W,
  SMALL_DLOSS, /* parameters: w [5,3]; constant dloss = 1 (scalar) */
  SMALL_H,
  SMALL_Y,
  SMALL_LOSS,
  SMALL_DY,
  SMALL_DH,
  SMALL_DW,
  SMALL_WS, /* arena */
  SMALL_GW, /* gradients: gw [5,3] */
  SMALL_MW, /* optimizer state: momentum of w [5,3] */
  SMALL_BUFFERS
};

/* Step numbers of the small plan. */
enum {
  STEP_MATMUL = 0,
  STEP_RELU,
  STEP_MSE, /* forward */
  STEP_MSE_GRAD,
  STEP_RELU_GRAD,
  STEP_MATMUL_GRAD, /* backward (matmul_grad has workspace ws) */
  STEP_ACCUMULATE,  /* gw += dw */
  STEP_SGD,
  STEP_ZERO, /* the optimizer block */
  SMALL_STEPS
};

#define SMALL_TOTAL_BYTES 988 /* 68 parameters + 60 gradients + 60 optimizer state + 464 arena + 336 io */

/* The small plan: x [4,3] -> matmul(x, w, transpose_b) -> h [4,5] -> relu -> y -> mse(y, t) -> loss;
 * backward mse_grad, relu_grad, matmul (dh^T x) -> dw; accumulate into gw; sgd with momentum mw;
 * zero gw. Two micro-batches of 4. The arena reuses memory: 464 bytes for 704 without reuse. */
tf_plan *plan_fixture_small(void);

/* An inference plan of `steps` steps and 2 x `steps` arena buffers (one activation and one
 * workspace per step): a chain of relus whose outputs the second half adds back in mirror order,
 * so that up to steps/2 buffers are live at once. */
tf_plan *plan_fixture_big(int32_t steps);

/* Recomputes the report's memory numbers (role bytes, naive arena, live bytes, lower bound, peak)
 * from the buffers, for tests that change a plan's buffers and want only their change refused. */
void plan_fixture_fill_report(tf_plan *plan);

#endif
