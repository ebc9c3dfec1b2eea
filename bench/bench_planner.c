/* Planner quality and compile time for every zoo preset at two batch sizes (training, AdamW, fp32).
 * Quality: the arena against the lower bound (the most bytes live at one step: no assignment can
 * do better) and against no reuse; and the arena with 4 accumulated micro-batches per step (k = 4),
 * where every gradient part is added into the gradients region rather than written there; and the
 * arena + gradients region with each update in the backward pass (update_in_backward), against
 * the same sum in the plain plan (what the move trades: gradients leave their region for a few
 * steps of the arena); and the arena bytes live when the loss is written, which no order of the
 * steps can go below (every activation the backward pass reads is live then). Compile time: the whole tf_compile (copy,
 * shapes, autodiff, optimizer, schedule, liveness, assign, emit, verify) with k = 1, best of 3. Not a test: prints a
 * table. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

/* Arena bytes live when the loss is written (-1 when out of memory): every activation the backward
 * pass reads is live then, in any order of the steps, so no schedule packs the arena below this
 * (without recompute). */
static int64_t live_at_loss(const tf_plan *plan) {
  const int32_t turn = plan->loss >= 0 ? plan->buffers[plan->loss].first_step : -1;
  size_t n_buffers = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int32_t *from = malloc(sizeof(int32_t) * n_buffers), *to = malloc(sizeof(int32_t) * n_buffers);
  tf_status status = from && to ? tf_plan_counted_steps(plan, from, to) : NULL;
  int64_t bytes = from && to && !status ? 0 : -1;
  for (int32_t i = 0; turn >= 0 && bytes >= 0 && i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->region == TF_REGION_ARENA && from[i] <= turn && to[i] >= turn)
      bytes += b->bytes;
  }
  tf_status_free(status);
  free(from);
  free(to);
  return bytes;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
  static const char *const batches[2] = {"N=1", "N=8"};
  printf("%-14s %-5s %7s %7s %12s %12s %12s %8s %9s %10s %12s %8s\n", "preset", "batch", "steps", "buffers",
         "arena MiB", "bound MiB", "no-reuse MiB", "arena/lb", "total GiB", "compile ms", "k=4 arena", "k=4 a/lb");
  printf("%-14s %-5s %12s %12s %8s %12s %8s %12s %9s\n", "", "", "a+g MiB", "uib a+g MiB", "change", "uib total GiB",
         "uib a/lb", "at loss MiB", "lb/atloss");
  double worst = 0, slowest = 0;
  for (int32_t p = 0; p < tf_zoo_preset_count(); p++) {
    const char *name = tf_zoo_preset_at(p)->name;
    tf_graph *g;
    tf_status status = tf_zoo_build(name, NULL, 0, &g);
    if (status) {
      fprintf(stderr, "%s: %s\n", name, tf_status_message(status));
      tf_status_free(status);
      return 1;
    }
    for (int b = 0; b < 2; b++) {
      tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
      options.bindings = batches[b];
      options.optimizer = TF_OPTIMIZER_ADAMW;
      double best = 1e30;
      tf_plan *plan = NULL;
      for (int repeat = 0; repeat < 3; repeat++) {
        tf_plan_destroy(plan);
        double start = now();
        status = tf_compile(g, &options, &plan);
        double elapsed = now() - start;
        if (status) {
          fprintf(stderr, "%s %s: %s\n", name, batches[b], tf_status_message(status));
          tf_status_free(status);
          return 1;
        }
        best = elapsed < best ? elapsed : best;
      }
      tf_compile_options accumulated = options;
      accumulated.accumulate = 4;
      tf_plan *plan4 = NULL;
      status = tf_compile(g, &accumulated, &plan4);
      if (status) {
        fprintf(stderr, "%s %s k=4: %s\n", name, batches[b], tf_status_message(status));
        tf_status_free(status);
        return 1;
      }
      tf_compile_options in_backward = options;
      in_backward.update_in_backward = true;
      tf_plan *plan_u = NULL;
      status = tf_compile(g, &in_backward, &plan_u);
      if (status) {
        fprintf(stderr, "%s %s update in backward: %s\n", name, batches[b], tf_status_message(status));
        tf_status_free(status);
        return 1;
      }
      const tf_plan_report *r = &plan->report;
      double ratio = (double)plan->region_bytes[TF_REGION_ARENA] / (double)r->arena_lower_bound;
      double ratio4 = (double)plan4->region_bytes[TF_REGION_ARENA] / (double)plan4->report.arena_lower_bound;
      printf("%-14s %-5s %7d %7d %12.1f %12.1f %12.1f %8.4f %9.2f %10.1f %12.1f %8.4f\n", name, batches[b],
             plan->n_steps, plan->n_buffers, (double)plan->region_bytes[TF_REGION_ARENA] / 1048576.0,
             (double)r->arena_lower_bound / 1048576.0, (double)r->arena_naive / 1048576.0, ratio,
             (double)tf_plan_total_bytes(plan) / 1073741824.0, best * 1e3,
             (double)plan4->region_bytes[TF_REGION_ARENA] / 1048576.0, ratio4);
      const double sum = (double)(plan->region_bytes[TF_REGION_ARENA] + plan->region_bytes[TF_REGION_GRADIENTS]);
      const double sum_u = (double)(plan_u->region_bytes[TF_REGION_ARENA] + plan_u->region_bytes[TF_REGION_GRADIENTS]);
      const double ratio_u = (double)plan_u->region_bytes[TF_REGION_ARENA] / (double)plan_u->report.arena_lower_bound;
      const int64_t at_loss = live_at_loss(plan);
      printf("%-14s %-5s %12.1f %12.1f %7.1f%% %12.2f %8.4f %12.1f %9.4f\n", "", "", sum / 1048576.0, sum_u / 1048576.0,
             100.0 * (sum_u - sum) / sum, (double)tf_plan_total_bytes(plan_u) / 1073741824.0, ratio_u,
             (double)at_loss / 1048576.0, (double)r->arena_lower_bound / (double)(at_loss > 0 ? at_loss : 1));
      worst = ratio_u > worst ? ratio_u : worst;
      tf_plan_destroy(plan_u);
      worst = ratio > worst ? ratio : worst;
      worst = ratio4 > worst ? ratio4 : worst;
      tf_plan_destroy(plan4);
      slowest = best > slowest ? best : slowest;
      tf_plan_destroy(plan);
    }
    tf_graph_destroy(g);
  }
  printf("\nworst arena / lower bound: %.4f (goal <= 1.05); slowest compile: %.1f ms (goal for xtts-gpt < 2000)\n",
         worst, slowest * 1e3);
  return 0;
}
