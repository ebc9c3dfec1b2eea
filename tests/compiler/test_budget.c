/* The budget search and the fused loss head (compiler/budget.c, issue 14 item 3). Where a candidate
 * does not fit, the search gives the fused head the largest chunk that fits (steps of 32 rows, down
 * to 64) or fuses a head --fuse-loss auto left unfused; an explicit chunk is kept, --fuse-loss off
 * is never fused, a head without a workspace (Vulkan) is not searched, and recompute, when allowed,
 * competes by the cost model. Every total a budget is set between is the device total of a plan
 * compiled here with that chunk given explicitly, not a number the search reports; the plan the
 * search chose for a small model trains a step to the default chunk's loss. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compiler/training.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

static tf_graph *zoo(const char *const *overrides, int32_t n) {
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build("gpt2-small", overrides, n, &g);
  CHECK(&counts, status == NULL, "gpt2-small: %s", tf_status_message(status));
  tf_status_free(status);
  return g;
}

static tf_compile_options options_for(tf_target_kind target, const char *bindings, tf_fuse_loss fuse, int64_t chunk) {
  tf_compile_options options = tf_compile_options_default(target);
  options.bindings = bindings;
  options.optimizer = TF_OPTIMIZER_ADAMW;
  options.fuse_loss = fuse;
  options.loss_chunk_rows = chunk;
  return options;
}

/* The chunk of the plan's fused loss head, 0 when it has none. */
static int64_t chunk_of(const tf_plan *plan) {
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    if (plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY || plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN ||
        plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN)
      return plan->steps[s].attrs.u.cross_entropy.chunk_rows;
  return 0;
}

/* The device total of the plan compiled with these options; its fused head's chunk in *chunk. */
static int64_t total_of(const tf_graph *g, tf_target_kind target, const char *bindings, tf_fuse_loss fuse,
                        int64_t chunk_rows, int64_t *chunk) {
  tf_compile_options options = options_for(target, bindings, fuse, chunk_rows);
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  int64_t total = plan ? tf_plan_device_total(plan) : -1;
  if (chunk)
    *chunk = chunk_of(plan);
  tf_plan_destroy(plan);
  return total;
}

/* The search at global batch 1 (micro-batch 1 only) with `base`'s options. */
static tf_plan *search(const tf_graph *g, tf_compile_options base, int64_t budget, bool allow_remat,
                       tf_budget_result *result) {
  tf_budget_options options = {.base = base, .budget = budget, .global_batch = 1, .allow_remat = allow_remat};
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile_budget(g, &options, &plan, result));
  return plan;
}

static bool has(const char *text, const char *part) { return text && strstr(text, part) != NULL; }

/* gpt2-small (50257 classes) at 1 x 1024 on the CPU: the default chunk is 256 rows, each 32 rows
 * off it take 6.1 MiB off the plan. A budget between the 160- and 192-row plans gets 160. */
static void largest_chunk_that_fits(const tf_graph *g) {
  const char *at = "N=1,T=1024";
  int64_t chunk = 0, total[8], rows[] = {64, 96, 128, 160, 192};
  int64_t usual = total_of(g, TF_TARGET_CPU, at, TF_FUSE_LOSS_AUTO, 0, &chunk);
  CHECK(&counts, chunk == 256, "gpt2-small 1 x 1024: the default chunk is %" PRId64 " rows, expected 256", chunk);
  for (int i = 0; i < 5; i++)
    total[i] = total_of(g, TF_TARGET_CPU, at, TF_FUSE_LOSS_AUTO, rows[i], NULL);
  for (int i = 1; i < 5; i++)
    CHECK(&counts, total[i - 1] < total[i] && total[4] < usual, "totals do not grow with the chunk");
  printf("gpt2-small 1 x 1024 cpu: device total %" PRId64 " (256 rows, the default), %" PRId64 " (192), %" PRId64
         " (160), %" PRId64 " (64)\n",
         usual, total[4], total[3], total[0]);

  /* Without recompute: 160 rows, the largest that fits; 192 does not. */
  tf_compile_options base = options_for(TF_TARGET_CPU, "T=1024", TF_FUSE_LOSS_AUTO, 0);
  int64_t budget = (total[3] + total[4]) / 2;
  tf_budget_result r;
  tf_plan *plan = search(g, base, budget, false, &r);
  CHECK(&counts,
        plan && r.fits && tf_plan_device_total(plan) == total[3] && chunk_of(plan) == 160 && r.loss_chunk_rows == 160 &&
            r.micro_batch == 1 && r.remat == TF_REMAT_NONE,
        "budget %" PRId64 ": fits %d, chunk %" PRId64 " (expected 160: the 192-row plan needs %" PRId64 ")", budget,
        r.fits, r.loss_chunk_rows, total[4]);
  CHECK(&counts,
        has(r.summary, "  loss chunk 160 rows chosen at N=1 (tried before giving up on this micro-batch): workspace "
                       "18.40 MiB less than the default 256-row chunk, device total 18.40 MiB less; 192 rows does "
                       "not fit\n"),
        "the search's note line:\n%s", r.summary);
  CHECK(&counts,
        plan && has(plan->report.notes,
                    "loss head: 160-row chunks chosen by the budget search (the default 256-row chunk does not fit)\n"),
        "the plan's notes:\n%s", plan ? plan->report.notes : "");
  printf("budget %" PRId64 ": chunk %" PRId64 " chosen in %d compiles; summary:\n%s", budget, r.loss_chunk_rows,
         r.tried, r.summary);
  tf_plan_destroy(plan);

  /* The floor: 64 rows fits exactly; one byte less fits nothing and the smallest plan (64 rows) comes back. */
  plan = search(g, base, total[0], false, &r);
  CHECK(&counts, plan && r.fits && r.loss_chunk_rows == 64, "budget = the 64-row plan: fits %d, chunk %" PRId64, r.fits,
        r.loss_chunk_rows);
  tf_plan_destroy(plan);
  plan = search(g, base, total[0] - 1, false, &r);
  CHECK(&counts, plan && !r.fits && r.loss_chunk_rows == 64 && r.total_bytes == total[0],
        "under the floor: fits %d, chunk %" PRId64 ", smallest %" PRId64 " (the 64-row plan: %" PRId64 ")", r.fits,
        r.loss_chunk_rows, r.total_bytes, total[0]);
  tf_plan_destroy(plan);

  /* An explicit chunk is the user's: never searched. */
  tf_compile_options mine = base;
  mine.loss_chunk_rows = 256;
  plan = search(g, mine, budget, false, &r);
  CHECK(&counts, plan && !r.fits && r.loss_chunk_rows == 256 && r.tried == 1 && !has(r.summary, "loss chunk"),
        "--loss-chunk 256: fits %d, chunk %" PRId64 ", %d compiled:\n%s", r.fits, r.loss_chunk_rows, r.tried,
        r.summary);
  tf_plan_destroy(plan);
  plan = search(g, mine, budget, true, &r);
  CHECK(&counts, plan && r.fits && r.loss_chunk_rows == 256 && r.remat == TF_REMAT_AUTO,
        "--loss-chunk 256 with recompute: fits %d, chunk %" PRId64 ", remat %d", r.fits, r.loss_chunk_rows, r.remat);
  tf_plan_destroy(plan);

  /* With recompute allowed, both are compiled and the cost model keeps the faster: 7 chunks instead
   * of 4 cost 15 more passes over the 147 MiB weight (2.3 GB at the CPU's 10 GB/s), more than
   * recomputing the 45 MiB recompute needs to drop. */
  plan = search(g, base, budget, true, &r);
  CHECK(&counts,
        plan && r.fits && r.remat == TF_REMAT_AUTO && r.loss_chunk_rows == 256 &&
            has(r.summary, "  loss chunk 160 rows chosen at N=1 (tried before recompute)"),
        "with recompute: remat %d, chunk %" PRId64 ":\n%s", r.remat, r.loss_chunk_rows, r.summary);
  tf_plan_destroy(plan);
}

/* --fuse-loss auto leaves gpt2-small with 8192 classes at 1 x 1024 unfused (32 MiB of logits); the
 * search fuses it where the unfused plan does not fit; --fuse-loss off never fuses. */
static void fused_where_auto_did_not(void) {
  tf_graph *g = zoo((const char *const[]){"vocab=8192"}, 1);
  if (!g)
    return;
  int64_t chunk = 0;
  int64_t unfused = total_of(g, TF_TARGET_CPU, "N=1,T=1024", TF_FUSE_LOSS_AUTO, 0, &chunk);
  CHECK(&counts, chunk == 0, "auto fused 32 MiB of logits");
  int64_t fused = total_of(g, TF_TARGET_CPU, "N=1,T=1024", TF_FUSE_LOSS_ON, 0, &chunk);
  int64_t budget = (fused + unfused) / 2;
  tf_budget_result r;
  tf_plan *plan = search(g, options_for(TF_TARGET_CPU, "T=1024", TF_FUSE_LOSS_AUTO, 0), budget, false, &r);
  CHECK(&counts, plan && r.fits && r.loss_chunk_rows == chunk && tf_plan_device_total(plan) == fused,
        "budget %" PRId64 " between fused %" PRId64 " and unfused %" PRId64 ": fits %d, chunk %" PRId64, budget, fused,
        unfused, r.fits, r.loss_chunk_rows);
  CHECK(&counts, has(r.summary, "  loss head fused at N=1 (tried before giving up on this micro-batch; auto fuses"),
        "the fused note:\n%s", r.summary);
  CHECK(&counts, plan && has(plan->report.notes, "loss head: fused by the budget search"), "the plan's notes:\n%s",
        plan ? plan->report.notes : "");
  printf("gpt2-small vocab 8192, 1 x 1024: unfused %" PRId64 ", fused %" PRId64 " (%" PRId64
         "-row chunks); budget %" PRId64 " fused by the search\n",
         unfused, fused, chunk, budget);
  tf_plan_destroy(plan);
  plan = search(g, options_for(TF_TARGET_CPU, "T=1024", TF_FUSE_LOSS_OFF, 0), budget, false, &r);
  CHECK(&counts, plan && !r.fits && r.loss_chunk_rows == 0 && chunk_of(plan) == 0 && !has(r.summary, "loss"),
        "--fuse-loss off: fits %d, chunk %" PRId64 ":\n%s", r.fits, r.loss_chunk_rows, r.summary);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* Two heads with biases, their losses added (as xtts): over x [N, 4096, 16] and over its first 2048
 * rows, 8192 classes each, so auto fuses the first (128 MiB of logits) and leaves the second (64
 * MiB). Where the plan with one head fused does not fit, the search fuses the other too: every
 * head's, not only "the" head's, fusing is a choice of the search. */
static tf_graph *two_heads(void) {
  enum { ROWS = 4096, D = 16, CLASSES = 8192 };
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create("two_heads", &g));
  int32_t n = tf_graph_symbol(g, "N", 1);
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_sym(n), tf_fixed(ROWS), tf_fixed(D)));
  tf_tensor_id parts[2] = {x, tf_slice(g, x, 1, 0, ROWS / 2, 1)};
  tf_tensor_id loss = TF_NO_TENSOR;
  for (int i = 0; i < 2; i++) {
    char name[32];
    snprintf(name, sizeof(name), "labels%d", i);
    tf_tensor_id labels = tf_graph_label(g, name, TF_I32, TF_SHAPE(tf_sym(n), tf_fixed(ROWS >> i)));
    snprintf(name, sizeof(name), "w%d", i);
    tf_tensor_id w = tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(CLASSES), tf_fixed(D)),
                                        tf_init_make(TF_INIT_NORMAL, 0, 0.02));
    snprintf(name, sizeof(name), "b%d", i);
    tf_tensor_id b =
        tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(CLASSES)), tf_init_make(TF_INIT_ZEROS, 0, 0));
    tf_tensor_id term = tf_cross_entropy(g, tf_add(g, tf_matmul(g, parts[i], w, false, true), b), labels, -100);
    loss = i == 0 ? term : tf_add(g, loss, term);
  }
  tf_graph_set_loss(g, loss);
  CHECK(&counts, tf_graph_status(g) == NULL, "two heads: %s", tf_status_message(tf_graph_status(g)));
  return g;
}

static int32_t fused_heads(const tf_plan *plan) {
  int32_t n = 0;
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    n += plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY;
  return n;
}

static void second_head_fused_by_the_search(void) {
  tf_graph *g = two_heads();
  tf_compile_options options = options_for(TF_TARGET_CPU, "N=1", TF_FUSE_LOSS_AUTO, 0);
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  const int32_t auto_heads = fused_heads(plan);
  const int64_t one = plan ? tf_plan_device_total(plan) : -1;
  tf_plan_destroy(plan);
  options.fuse_loss = TF_FUSE_LOSS_ON;
  plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  const int32_t on_heads = fused_heads(plan);
  const int64_t both = plan ? tf_plan_device_total(plan) : -1;
  tf_plan_destroy(plan);
  CHECK(&counts, auto_heads == 1 && on_heads == 2 && both < one,
        "two heads: auto fuses %d (total %" PRId64 "), on fuses %d (total %" PRId64 ")", auto_heads, one, on_heads,
        both);
  const int64_t budget = (one + both) / 2;
  tf_budget_result r;
  plan = search(g, options_for(TF_TARGET_CPU, NULL, TF_FUSE_LOSS_AUTO, 0), budget, false, &r);
  CHECK(&counts, plan && r.fits && fused_heads(plan) == 2 && tf_plan_device_total(plan) == both,
        "two heads, budget %" PRId64 " between one fused %" PRId64 " and both %" PRId64 ": fits %d, %d fused:\n%s",
        budget, one, both, r.fits, fused_heads(plan), r.summary);
  CHECK(&counts, has(r.summary, "  loss heads fused at N=1"), "the fused note:\n%s", r.summary);
  CHECK(&counts, plan && has(plan->report.notes, "loss heads: fused by the budget search"), "the plan's notes:\n%s",
        plan ? plan->report.notes : "");
  printf("two heads of 8192 classes (128 and 64 MiB of logits): auto fuses %d, total %" PRId64 "; both fused %" PRId64
         "; budget %" PRId64 ": the search fused %d\n",
         auto_heads, one, both, budget, fused_heads(plan));
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* The Vulkan fused head keeps one chunk of logits, every row's loss term and the label count in its
 * workspace, then (its dx of 48 tiles over 50,257 classes runs in 8 slices) from the next multiple of 64
 * words the 8 slices' [256, 768] partial products (core/linear_loss.h): the plan gives it exactly that,
 * and, as on the CPU, the search takes the chunk down when the default one does not fit. */
static void vulkan_chunk_searched(const tf_graph *g) {
  int64_t chunk = 0, total = total_of(g, TF_TARGET_VULKAN, "N=1,T=1024", TF_FUSE_LOSS_AUTO, 0, &chunk);
  tf_compile_options options = options_for(TF_TARGET_VULKAN, "N=1,T=1024", TF_FUSE_LOSS_AUTO, 0);
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  int64_t workspace = -1;
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    if (plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN && plan->steps[s].workspace >= 0)
      workspace = plan->buffers[plan->steps[s].workspace].bytes;
  /* a chunk of logits, 1024 row terms, the count; the partial products */
  const int64_t words = (256 * 50257 + 1024 + 1 + 63) / 64 * 64 + 8 * 256 * 768;
  CHECK(&counts, chunk == 256 && workspace == 4 * words,
        "vulkan: chunk %" PRId64 ", workspace %" PRId64 " (expected %" PRId64 ")", chunk, workspace, 4 * words);
  tf_plan_destroy(plan);
  tf_budget_result r;
  plan = search(g, options_for(TF_TARGET_VULKAN, "T=1024", TF_FUSE_LOSS_AUTO, 0), total - 1, false, &r);
  CHECK(&counts, plan && r.fits && r.loss_chunk_rows < 256 && has(r.summary, "loss chunk"),
        "vulkan, one byte under the 256-row plan: fits %d, chunk %" PRId64 ", %d compiled:\n%s", r.fits,
        r.loss_chunk_rows, r.tried, r.summary);
  printf("vulkan gpt2-small 1 x 1024: head workspace %" PRId64 " bytes at 256 rows; one byte under its total the "
         "search takes %" PRId64 " rows\n",
         workspace, r.loss_chunk_rows);
  tf_plan_destroy(plan);
}

static void fill(tf_session *session, const tf_plan *plan) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    int32_t *data = malloc((size_t)b->bytes);
    uint32_t x = 12345u;
    for (int64_t k = 0; data && k < b->bytes / 4; k++) {
      x = x * 1664525u + 1013904223u;
      data[k] = (int32_t)((x >> 8) % 1000);
    }
    CHECK_OK(&counts, tf_session_write(session, b->name, data, b->bytes));
    free(data);
  }
}

/* One training step; its loss. (That a session allocates exactly its plan is measured from outside
 * the runtime by tests/alloc_probe, not restated here from the session's own counters.) */
static double train_step(const tf_plan *plan) {
  tf_session *session = NULL;
  CHECK_OK(&counts, tf_session_create(plan, NULL, &session));
  if (!session)
    return NAN;
  double loss = NAN;
  fill(session, plan);
  CHECK_OK(&counts, tf_session_micro_step(session, &loss));
  CHECK_OK(&counts, tf_session_optimizer_step(session));
  tf_session_destroy(session);
  return loss;
}

/* A small fused model: 128 rows (the default chunk: all of them), 96 chosen; it trains like 128. */
static void chosen_chunk_trains(void) {
  tf_graph *g = zoo((const char *const[]){"layers=1", "d_model=64", "heads=2", "vocab=8192", "ctx=128", "seq=128"}, 6);
  if (!g)
    return;
  int64_t chunk = 0, usual = total_of(g, TF_TARGET_CPU, "N=1,T=128", TF_FUSE_LOSS_ON, 0, &chunk);
  int64_t smaller = total_of(g, TF_TARGET_CPU, "N=1,T=128", TF_FUSE_LOSS_ON, 96, NULL);
  tf_budget_result r;
  tf_plan *plan = search(g, options_for(TF_TARGET_CPU, "T=128", TF_FUSE_LOSS_ON, 0), smaller, false, &r);
  CHECK(&counts, chunk == 128 && plan && r.fits && r.loss_chunk_rows == 96,
        "small gpt: default %" PRId64 ", chosen %" PRId64 " (totals %" PRId64 " and %" PRId64 ")", chunk,
        r.loss_chunk_rows, usual, smaller);
  tf_compile_options options = options_for(TF_TARGET_CPU, "N=1,T=128", TF_FUSE_LOSS_ON, 0);
  tf_plan *reference = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &reference));
  if (plan && reference) {
    double loss = train_step(plan), expected = train_step(reference);
    CHECK(&counts, isfinite(loss) && fabs(loss - expected) <= 1e-5 * fabs(expected),
          "loss %.9g in 96-row chunks, %.9g in 128", loss, expected);
    printf("small gpt 1 x 128: 96-row chunks chosen under %" PRId64 " bytes (128 rows: %" PRId64
           "); one step, loss %.6f (%.6f in 128-row chunks)\n",
           smaller, usual, loss, expected);
  }
  tf_plan_destroy(reference);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* The default chunk (compiler/fuse_loss.c): the CPU's rule (1/32 of the rows, 256 at least, 64 MiB of
 * logits at most), and on CUDA with f32 products the GPU's (2,048 rows at least, 512 MiB at most);
 * autocast and half products keep the CPU's. */
static void default_chunks(void) {
  tf_compile_options cpu = tf_compile_options_default(TF_TARGET_CPU);
  tf_compile_options cuda = tf_compile_options_default(TF_TARGET_CUDA);
  tf_compile_options autocast = cuda, half_math = cuda;
  autocast.autocast = TF_BF16;
  half_math.matmul_math = TF_BF16;
  const struct {
    const char *what;
    const tf_compile_options *options;
    int64_t rows, classes, chunk;
  } cases[] = {
      {"cpu, gpt2-small 8 x 1024", &cpu, 8192, 50257, 256},
      {"cpu, 64 MiB of logits at most", &cpu, 1 << 20, 50257, (64 << 20) / (4 * 50257)},
      {"cuda, gpt2-small 8 x 1024", &cuda, 8192, 50257, 2048},
      {"cuda, fewer rows than 2,048", &cuda, 1000, 50257, 1000},
      {"cuda, 512 MiB of logits at most", &cuda, 1 << 20, 50257, (512 << 20) / (4 * 50257)},
      {"cuda, a 32nd of the rows above 2,048", &cuda, 1 << 17, 1000, (1 << 17) / 32},
      {"cuda autocast", &autocast, 8192, 50257, 256},
      {"cuda, bf16 products", &half_math, 8192, 50257, 256},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const int64_t got = tf_fuse_loss_chunk_rows(cases[i].options, cases[i].rows, cases[i].classes);
    CHECK(&counts, got == cases[i].chunk, "default chunk, %s: %" PRId64 " rows, wanted %" PRId64, cases[i].what, got,
          cases[i].chunk);
  }
  printf("ok   the default chunks of the cpu and cuda targets (%zu cases)\n", sizeof(cases) / sizeof(cases[0]));
}

int main(void) {
  default_chunks();
  tf_graph *g = zoo(NULL, 0);
  if (g) {
    largest_chunk_that_fits(g);
    vulkan_chunk_searched(g);
  }
  tf_graph_destroy(g);
  fused_where_auto_did_not();
  second_head_fused_by_the_search();
  chosen_chunk_trains();
  return tf_test_finish("budget", &counts);
}
