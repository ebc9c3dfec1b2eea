/* auto against the brute-force optimum on small graphs (at most 12 nodes): every subset of the saved
 * activations is compiled (TF_REMAT_LIST, exact plans); for budgets between the smallest and the
 * largest peak, the optimum is the least recompute among subsets that fit, and auto must come within
 * 5% of it. Random layered graphs (matmul, tanh/relu/exp, add, mul), training with SGD. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tightfit/compiler.h"

static uint64_t state = 0x2545F4914F6CDD1Dull;
static uint64_t next_random(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static tf_graph *small_graph(int seed, int nodes) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create("small", &g));
  int64_t width = 8 + (int64_t)(next_random() % 24);
  int32_t batch = tf_graph_symbol(g, "N", 16);
  tf_tensor_id pool[16];
  int n = 0;
  pool[n++] = tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(width)));
  int built = 0;
  while (built < nodes - 2) {
    tf_tensor_id a = pool[n - 1 - (int)(next_random() % (uint64_t)(n < 3 ? n : 3))];
    tf_tensor_id y;
    switch (next_random() % 4) {
    case 0: {
      char name[32];
      snprintf(name, sizeof(name), "w%d_%d", seed, built);
      tf_tensor_id w = tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(width), tf_fixed(width)),
                                          tf_init_make(TF_INIT_NORMAL, 0, 0.2));
      y = tf_matmul(g, a, w, false, true);
      break;
    }
    case 1: y = tf_unary(g, next_random() % 2 ? TF_OP_TANH : TF_OP_EXP, a); break;
    case 2: y = tf_add(g, a, pool[(int)(next_random() % (uint64_t)n)]); break;
    default: y = tf_mul(g, a, pool[(int)(next_random() % (uint64_t)n)]); break;
    }
    pool[n++] = y;
    built++;
    if (n >= 16)
      break;
  }
  char name[32];
  snprintf(name, sizeof(name), "w%d_last", seed);
  tf_tensor_id w = tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(width), tf_fixed(width)),
                                      tf_init_make(TF_INIT_NORMAL, 0, 0.2));
  tf_tensor_id out = tf_matmul(g, pool[n - 1], w, false, true);
  tf_tensor_id target = tf_graph_label(g, "target", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(width)));
  tf_graph_set_loss(g, tf_mse(g, out, target));
  return g;
}

int main(void) {
  int cases = 0, within = 0, exact = 0;
  double worst = 1.0;
  for (int seed = 0; seed < 40; seed++) {
    tf_graph *g = small_graph(seed, 6 + seed % 7);
    if (tf_graph_status(g)) {
      tf_graph_destroy(g);
      continue;
    }
    tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
    o.optimizer = TF_OPTIMIZER_SGD;
    char **names = NULL;
    int32_t k = 0;
    tf_status status = tf_compile_saved_activations(g, &o, &names, &k);
    if (status || k > 12) {
      tf_status_free(status);
      tf_compile_free_names(names, k);
      tf_graph_destroy(g);
      continue;
    }
    int32_t subsets = 1 << k;
    int64_t *peak = malloc(sizeof(int64_t) * (size_t)subsets);
    double *flops = malloc(sizeof(double) * (size_t)subsets);
    const char *list[12];
    int64_t low = INT64_MAX, high = 0;
    for (int32_t m = 0; m < subsets; m++) {
      int32_t c = 0;
      for (int32_t i = 0; i < k; i++)
        if (m & (1 << i))
          list[c++] = names[i];
      o.remat = TF_REMAT_LIST;
      o.remat_list = list;
      o.remat_list_count = c;
      tf_plan *plan = NULL;
      status = tf_compile(g, &o, &plan);
      peak[m] = plan ? tf_plan_total_bytes(plan) : INT64_MAX;
      flops[m] = plan ? plan->report.flops[TF_PHASE_RECOMPUTE] : INFINITY;
      tf_status_free(status);
      tf_plan_destroy(plan);
      low = peak[m] < low ? peak[m] : low;
      high = peak[m] > high ? peak[m] : high;
    }
    for (int b = 0; b < 5; b++) {
      int64_t budget = low + (high - low) * b / 4;
      double optimum = INFINITY;
      for (int32_t m = 0; m < subsets; m++)
        if (peak[m] <= budget && flops[m] < optimum)
          optimum = flops[m];
      o.remat = TF_REMAT_AUTO;
      o.remat_budget = budget;
      o.remat_list = NULL;
      o.remat_list_count = 0;
      tf_plan *plan = NULL;
      status = tf_compile(g, &o, &plan);
      bool fits = plan && tf_plan_total_bytes(plan) <= budget;
      double ours = fits ? plan->report.flops[TF_PHASE_RECOMPUTE] : INFINITY;
      double ratio = (ours + 1.0) / (optimum + 1.0);
      cases++;
      within += ratio <= 1.05;
      exact += ratio <= 1.0 + 1e-12;
      if (ratio > worst)
        worst = ratio;
      if (ratio > 1.05)
        printf("graph %d (%d saved activations), budget %" PRId64 ": auto %s recompute %.0f FLOP, optimum %.0f\n", seed,
               k, budget, fits ? "fits with" : "does not fit;", ours, optimum);
      tf_status_free(status);
      tf_plan_destroy(plan);
    }
    free(peak);
    free(flops);
    tf_compile_free_names(names, k);
    tf_graph_destroy(g);
  }
  printf("auto vs brute force: %d budgets on small graphs, %d optimal, %d within 5%%, worst ratio %.3f\n", cases, exact,
         within, worst);
  return 0;
}
