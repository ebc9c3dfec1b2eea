/* The conformance suite (tests/conformance) on the Vulkan backend: every case of the op table,
 * every step of its plans against the f64 CPU reference kernels and the f32 ones, end to end against
 * the CPU, and every op of the op table run on Vulkan at least once (the backend has no query for
 * the ops it lowers, so it claims them all: a refused op fails). Cases needing what the shaders do
 * not take (attention heads wider than 128) must be refused at session
 * creation. The rows on f16 and bf16 data run the half kernels (the f16/bf16 shader variants of
 * matmul, the convolutions, the elementwise ops, softmax, the reductions, ..., each checked step by
 * step: every one of the Vulkan target's half kernels must run) and the casts (bit for bit the
 * CPU's). Attention runs in tiles (shaders/attention_tiled.comp) where it applies, and its rows
 * run again, f32 and f16, with TIGHTFIT_VULKAN_TILED_ATTENTION=0 (shaders/attention.comp).
 * Then what only Vulkan has: its refusals, lavapipe's loop limit, a missing loader. Runs under
 * the validation layer (both shader variants: test_vulkan_ops_no_subgroups runs it with
 * TIGHTFIT_VULKAN_SUBGROUPS=0); prints SKIP and exits 77 without a Vulkan device. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/vulkan/vulkan.h"
#include "conformance.h"
#include "core/linear_loss.h"
#include "core/workspace.h"
#include "op_graphs.h"
#include "parity.h"

static tf_test_counts counts;
static conf_coverage coverage;
/* .shared: one device for every case (main opens it): a shader's pipeline is compiled once, not once
 * a case (lavapipe spends most of this test compiling otherwise). */
static conf_backend backend = {
    .name = "vulkan", .target = TF_TARGET_VULKAN, .claims = NULL, .refuses = CONF_NEEDS_WIDE_HEADS};
static const conf_settings FLOATS = {{1, 0, 0, false, false}, CONF_SGD, CONF_SUMS, false, 0, TF_F32, TF_F32, false};

/* What the device and the environment give the shaders: lavapipe, whose shader loops end silently
 * after 65,535 iterations per invocation (steps that could need more are refused, vk_check_loops,
 * not run wrong); attention in tiles (shaders/attention_tiled.comp, unless
 * TIGHTFIT_VULKAN_TILED_ATTENTION=0); subgroup variants (unless TIGHTFIT_VULKAN_SUBGROUPS=0); which
 * products take 128 x 128 tiles (TIGHTFIT_VULKAN_BIG_MATMUL). */
typedef struct device_facts {
  bool lavapipe, tiled_attention, subgroups;
  unsigned subgroup_size; /* 0: subgroup variants off */
  int big_matmul;         /* tf_vulkan_big_matmul, -1 without a session */
} device_facts;

static device_facts device_facts_now(void) {
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  tf_backend_options options = {.device = 0, .threads = 1};
  void *state = NULL;
  tf_status status = vulkan->create(&options, &state);
  device_facts facts = {false, false, false, 0, -1};
  if (!status) {
    facts.lavapipe = strstr(tf_vulkan_device_name(state), "llvmpipe") != NULL;
    facts.tiled_attention = tf_vulkan_tiled_attention(state);
    facts.subgroup_size = tf_vulkan_subgroup_size(state);
    facts.subgroups = facts.subgroup_size != 0;
    facts.big_matmul = tf_vulkan_big_matmul(state);
  }
  tf_status_free(status);
  if (state)
    vulkan->destroy(state);
  return facts;
}

/* The session-creation status of `graph`'s training plan on Vulkan (NULL: created). */
static tf_status create_training(tf_graph *g) {
  tf_compile_options options = tf_compile_options_default(TF_TARGET_VULKAN);
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &options, &plan);
  tf_session_options session_options = tf_session_options_default();
  session_options.backend = "vulkan";
  tf_session *session = NULL;
  if (!status)
    status = tf_session_create(plan, &session_options, &session);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status;
}

/* A plan larger than the device's memory fails at session creation (the only place it can), naming
 * the region and the heap. */
static void test_out_of_memory(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "huge");
  // 2^38 floats: 1 TiB of parameters, beyond any heap.
  tf_test_finish_probe(g, tf_unary(g, TF_OP_RELU, tf_test_param(g, "huge", TF_SHAPE(d((int64_t)1 << 38)))));
  tf_status status = create_training(g);
  tf_graph_destroy(g);
  CHECK(&counts,
        tf_status_code(status) == TF_ERR_OUT_OF_MEMORY && strstr(tf_status_message(status), "parameters region") &&
            strstr(tf_status_message(status), "heap"),
        "1 TiB of parameters: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
}

/* Long rows on lavapipe: 3 walks of 30,000 classes exceed its loop limit one invocation per row
 * (refused without subgroups) but not a cluster of 8 lanes per row (checked against the CPU); so do
 * attention's walks over 1,024 keys of width 64, which its tiles keep within the limit too; 4,096
 * keys exceed it every way. */
static void test_loop_limit(void) {
  const device_facts facts = device_facts_now();
  if (!facts.lavapipe) {
    printf("ok   loop limit: not lavapipe, nothing to refuse\n");
    return;
  }
  const bool subgroups = facts.subgroups;
  tf_graph *g = tf_test_graph_begin(&counts, "softmax");
  tf_test_finish_probe(g, tf_softmax(g, tf_test_param(g, "x", TF_SHAPE(d(2), d(30000))), 1));
  if (subgroups) {
    conf_check_graph(&counts, &backend, &coverage, "softmax [2,30000] (+ grad), within lavapipe's loop limit", g,
                     &FLOATS);
  } else {
    tf_status status = create_training(g);
    tf_graph_destroy(g);
    CHECK(&counts, status && strstr(tf_status_message(status), "65535"), "softmax [2,30000]: %s",
          status ? tf_status_message(status) : "created");
    printf("ok   refused: %s\n", status ? tf_status_message(status) : "-");
    tf_status_free(status);
  }
  for (int64_t keys = 1024; keys <= 16384; keys *= 16) { /* 16,384: about 83,000 iterations in the KV pass */
    g = tf_test_graph_begin(&counts, "attention");
    tf_tensor_id q = tf_test_param(g, "q", TF_SHAPE(d(1), d(keys), d(64)));
    tf_test_finish_probe(g, tf_attention(g, q, tf_test_param(g, "k", TF_SHAPE(d(1), d(keys), d(64))),
                                         tf_test_param(g, "v", TF_SHAPE(d(1), d(keys), d(64))), 1, true));
    if ((subgroups || facts.tiled_attention) && keys == 1024) {
      conf_check_graph(&counts, &backend, &coverage,
                       "attention causal [1,1024,64] (+ grad), within lavapipe's loop limit", g, &FLOATS);
      continue;
    }
    tf_status status = create_training(g);
    tf_graph_destroy(g);
    CHECK(&counts, status && strstr(tf_status_message(status), "65535"), "attention over %lld keys: %s",
          (long long)keys, status ? tf_status_message(status) : "created");
    printf("ok   refused: %s\n", status ? tf_status_message(status) : "-");
    tf_status_free(status);
  }
}

/* Without 8-bit storage (TIGHTFIT_VULKAN_8BIT=0) a layout op on u8 data is refused at session
 * creation, naming the buffer and the feature (the conformance rows run the moves where it is on). */
static void test_no_8bit_storage(void) {
  setenv("TIGHTFIT_VULKAN_8BIT", "0", 1);
  tf_graph *g = tf_test_graph_begin(&counts, "mask");
  const int32_t flip[2] = {1, 0};
  tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(3), d(5)));
  tf_tensor_id moved = tf_cast(g, tf_transpose(g, tf_cast(g, x, TF_U8), flip, 2), TF_F32);
  tf_test_finish_probe(g, tf_mul(g, moved, tf_transpose(g, x, flip, 2)));
  tf_status status = create_training(g);
  tf_graph_destroy(g);
  CHECK(&counts, status && strstr(tf_status_message(status), "storageBuffer8BitAccess"), "u8 transpose: %s",
        status ? tf_status_message(status) : "created");
  printf("ok   refused: %s\n", status ? tf_status_message(status) : "-");
  tf_status_free(status);
  unsetenv("TIGHTFIT_VULKAN_8BIT");
}

/* A loader that cannot be opened is named, with what to install. */
static void test_no_loader(void) {
  setenv("TIGHTFIT_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  tf_backend_options options = {.device = 0, .threads = 1};
  void *state = NULL;
  tf_status status = vulkan->create(&options, &state);
  CHECK(&counts,
        tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "no Vulkan loader") &&
            strstr(tf_status_message(status), "/nonexistent/libvulkan.so.1"),
        "missing loader: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
  if (state)
    vulkan->destroy(state);
  unsetenv("TIGHTFIT_VULKAN_LOADER");
}

/* g compiled for the vulkan target (a training plan or not; g destroyed) into *plan, and a session
 * on it; NULL, counted as a failure, when either fails. */
static tf_session *vulkan_session(tf_graph *g, bool training, tf_plan **plan) {
  tf_compile_options options = tf_compile_options_default(TF_TARGET_VULKAN);
  options.training = training;
  CHECK_OK(&counts, tf_compile(g, &options, plan));
  tf_graph_destroy(g);
  tf_session_options session_options = tf_session_options_default();
  session_options.backend = "vulkan";
  tf_session *session = NULL;
  CHECK_OK(&counts, *plan ? tf_session_create(*plan, &session_options, &session) : NULL);
  return session;
}

/* i64 ids run (PyTorch's token ids): each read as its two words, and one that does not fit in 32
 * bits is out of range (a zero row, as on the CPU), not the row its low word names: ids {1, 2^32 + 1,
 * -1, 4} give rows table[1], 0, 0, table[4]. Then what the backend refuses, it refuses at session
 * creation with a message naming the cause. */
/* A state borrowing the shared device (backend.shared) reads its own settings, but not one the
 * shared instance fixed: TIGHTFIT_VULKAN_WIDE_BINDINGS other than the shared device's is refused
 * (its synchronisation checks were chosen for the device's setting), and a setting a state may
 * choose alone (TIGHTFIT_VULKAN_TILED_ATTENTION) is the state's. */
static void test_shared_device(void) {
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  char wide[16] = "";
  const bool set = getenv("TIGHTFIT_VULKAN_WIDE_BINDINGS") != NULL;
  if (set)
    snprintf(wide, sizeof(wide), "%s", getenv("TIGHTFIT_VULKAN_WIDE_BINDINGS"));
  const bool was_wide = strcmp(wide, "1") == 0;
  setenv("TIGHTFIT_VULKAN_WIDE_BINDINGS", was_wide ? "0" : "1", 1);
  const tf_backend_options options = {.device = 0, .threads = 1, .shared = backend.shared};
  void *state = NULL;
  tf_status status = vulkan->create(&options, &state);
  const bool refused = tf_status_code(status) == TF_ERR_INVALID_ARGUMENT &&
                       strstr(tf_status_message(status), "TIGHTFIT_VULKAN_WIDE_BINDINGS") != NULL;
  CHECK(&counts, refused && !state, "a state asking other wide bindings than the shared device's: %s",
        status ? tf_status_message(status) : "created");
  printf("%s shared device: other wide bindings refused (%s)\n", refused ? "ok  " : "FAIL",
         status ? tf_status_message(status) : "created");
  tf_status_free(status);
  if (state)
    vulkan->destroy(state);
  setenv("TIGHTFIT_VULKAN_WIDE_BINDINGS", was_wide ? "1" : "0", 1);
  char tiled[16] = "";
  const bool tiled_set = getenv("TIGHTFIT_VULKAN_TILED_ATTENTION") != NULL;
  if (tiled_set)
    snprintf(tiled, sizeof(tiled), "%s", getenv("TIGHTFIT_VULKAN_TILED_ATTENTION"));
  setenv("TIGHTFIT_VULKAN_TILED_ATTENTION", "0", 1);
  state = NULL;
  CHECK_OK(&counts, vulkan->create(&options, &state));
  const bool own = state && !tf_vulkan_tiled_attention(state);
  CHECK(&counts, own, "a borrowing state with TIGHTFIT_VULKAN_TILED_ATTENTION=0 still takes the tiled shaders");
  printf("%s shared device: a borrowing state reads its own settings (tiled attention %s)\n", own ? "ok  " : "FAIL",
         own ? "off" : "on");
  if (state)
    vulkan->destroy(state);
  if (tiled_set) /* as the caller had them */
    setenv("TIGHTFIT_VULKAN_TILED_ATTENTION", tiled, 1);
  else
    unsetenv("TIGHTFIT_VULKAN_TILED_ATTENTION");
  if (!set)
    unsetenv("TIGHTFIT_VULKAN_WIDE_BINDINGS");
  else
    setenv("TIGHTFIT_VULKAN_WIDE_BINDINGS", wide, 1);
}

static void test_refusals(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "i64 ids");
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I64, TF_SHAPE(d(4)));
  tf_test_finish_probe(g, tf_embedding(g, ids, tf_test_param(g, "table", TF_SHAPE(d(5), d(4)))));
  tf_plan *plan = NULL;
  tf_session *session = vulkan_session(g, true, &plan);
  if (session) {
    const int64_t id_values[4] = {1, ((int64_t)1 << 32) + 1, -1, 4};
    float table[20], rows[16], probe[16];
    for (int k = 0; k < 16; k++)
      probe[k] = 1.0f; /* the probe's product may take the rows' buffer: times 1 it holds them still */
    double loss = 0;
    CHECK_OK(&counts, tf_session_write(session, "ids", id_values, sizeof(id_values)));
    CHECK_OK(&counts, tf_session_write(session, "probe", probe, sizeof(probe)));
    CHECK_OK(&counts, tf_session_read(session, "table", table, sizeof(table)));
    CHECK_OK(&counts, tf_session_forward(session, &loss));
    int32_t embedded = -1;
    for (int32_t k = 0; k < plan->n_steps && embedded < 0; k++)
      embedded = plan->steps[k].op == TF_OP_EMBEDDING ? plan->steps[k].outputs[0] : -1;
    CHECK_OK(&counts, tf_session_read_range(session, embedded, 0, rows, sizeof(rows)));
    int32_t wrong = 0;
    for (int c = 0; c < 4; c++)
      wrong += rows[c] != table[4 + c] || rows[4 + c] != 0.0f || rows[8 + c] != 0.0f || rows[12 + c] != table[16 + c];
    CHECK(&counts, wrong == 0, "i64 ids {1, 2^32 + 1, -1, 4}: %d of 16 values are not table[1], 0, 0, table[4]", wrong);
    printf("%s i64 ids {1, 2^32 + 1, -1, 4} on vulkan: rows table[1], 0, 0, table[4]\n", wrong ? "FAIL" : "ok  ");
    tf_session_destroy(session);
  }
  tf_session_options session_options = tf_session_options_default();
  session_options.backend = "vulkan";
  session_options.device = 99;
  tf_status status = plan ? tf_session_create(plan, &session_options, &session) : NULL;
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && strstr(tf_status_message(status), "no device 99"),
        "device 99: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
  tf_plan_destroy(plan);
  test_out_of_memory();
  test_loop_limit();
  test_no_loader();
  test_no_8bit_storage();
}

/* The attention rows again (those with something to train) with TIGHTFIT_VULKAN_TILED_ATTENTION=0,
 * then =16 (the tiled shaders' 16-row blocks only), through attention.comp's shaders (the subgroup variant unless
 * TIGHTFIT_VULKAN_SUBGROUPS=0), on f32 or `storage` f16 data (f16 and bf16 keep the statistics alike); the table ran
 * attention_tiled.comp's where they apply, which must be every row with heads of 8 to 128 on lavapipe (32 KiB of shared
 * memory). */
static void test_untiled_attention(tf_dtype storage) {
  const char *requested = getenv("TIGHTFIT_VULKAN_TILED_ATTENTION");
  if (requested && strcmp(requested, "0") == 0) {
    printf("ok   attention rows not run again: TIGHTFIT_VULKAN_TILED_ATTENTION=0 ran them untiled above\n");
    return;
  }
  const device_facts facts = device_facts_now();
  if (facts.lavapipe)
    CHECK(&counts, facts.tiled_attention, "lavapipe: the tiled attention shaders should run there");
  printf("%s attention ran in tiles (attention_tiled.comp) above: %s\n",
         facts.lavapipe && !facts.tiled_attention ? "FAIL" : "ok  ", facts.tiled_attention ? "yes" : "no");
  setenv("TIGHTFIT_VULKAN_TILED_ATTENTION", "0", 1);
  if (!device_facts_now().tiled_attention)
    conf_run_rows(&counts, &backend, &coverage, "attention", storage, "attention.comp");
  else
    CHECK(&counts, false, "TIGHTFIT_VULKAN_TILED_ATTENTION=0 left the tiled attention shaders on");
  /* heads of 8 to 32 took the 32-row blocks (attention_tiled_d32 on lavapipe); the 16-row blocks,
   * which wider heads take, once more over them */
  setenv("TIGHTFIT_VULKAN_TILED_ATTENTION", "16", 1);
  conf_run_rows(&counts, &backend, &coverage, "attention", storage, "16-row blocks");
  unsetenv("TIGHTFIT_VULKAN_TILED_ATTENTION");
}

/* The split column sums' chunks (core/workspace.h) on known shapes, then the sum_to and norm rows
 * again with TIGHTFIT_VULKAN_SPLIT_COLUMNS=0 (one pass of lanes a column, what a plan compiled
 * before the split runs), on f32 or `storage` f16 data; the table ran them split where it applies. */
static void test_unsplit_columns(tf_dtype storage) {
  const struct {
    tf_op op;
    int64_t outputs, group, rows, workspace;
  } cases[] = {
      {TF_OP_SUM_TO, 768, 8192, 96, 4 * 768 * 86},    /* gpt2-small's bias gradients: 12 x 86 workgroups */
      {TF_OP_SUM_TO, 3072, 8192, 373, 4 * 3072 * 22}, /* c_fc's: 48 x 22 */
      {TF_OP_SUM_TO, 37, 300, 75, 4 * 37 * 4},        /* the table's bias gradient [300, 37] */
      {TF_OP_SUM, 1, 377, 76, 4 * 1 * 5},             /* a full sum of 377 (columns: under 1,024) */
      {TF_OP_SUM_TO, 37, 3000, 0, 0},                 /* few outputs, long groups: a tree each */
      {TF_OP_SUM_TO, 4096, 127, 0, 0},                /* groups under two chunks of 64 */
      {TF_OP_MAX, 768, 8192, 0, 0},                   /* sums only */
      {TF_OP_SUM_TO, 64 * 65536, 256, 0, 0},          /* more blocks than a grid dimension holds */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const int64_t in = cases[i].outputs * cases[i].group;
    const int64_t rows = tf_vulkan_reduce_chunk_rows(cases[i].op, in, cases[i].outputs);
    const int64_t bytes = tf_vulkan_reduce_workspace_bytes(cases[i].op, in, cases[i].outputs);
    CHECK(&counts, rows == cases[i].rows && bytes == cases[i].workspace,
          "%s of %lld outputs over %lld: chunk rows %lld (want %lld), workspace %lld (want %lld)",
          tf_op_name(cases[i].op), (long long)cases[i].outputs, (long long)cases[i].group, (long long)rows,
          (long long)cases[i].rows, (long long)bytes, (long long)cases[i].workspace);
  }
  CHECK(&counts,
        tf_vulkan_norm_grad_workspace_bytes(8192, 768) == 8 * 768 * 86 &&
            tf_vulkan_norm_grad_workspace_bytes(6, 300) == 0,
        "the norms' split workspace: %lld for gpt2-small, %lld for 6 rows",
        (long long)tf_vulkan_norm_grad_workspace_bytes(8192, 768),
        (long long)tf_vulkan_norm_grad_workspace_bytes(6, 300));
  printf("ok   split column sums: chunks of 96 rows for gpt2-small's bias gradients, none where a tree suits\n");
  const char *requested = getenv("TIGHTFIT_VULKAN_SPLIT_COLUMNS");
  if (requested && strcmp(requested, "0") == 0) {
    printf("ok   column rows not run again: TIGHTFIT_VULKAN_SPLIT_COLUMNS=0 ran them unsplit above\n");
    return;
  }
  setenv("TIGHTFIT_VULKAN_SPLIT_COLUMNS", "0", 1);
  conf_run_rows(&counts, &backend, &coverage, "sum_to", storage, "columns unsplit");
  conf_run_rows(&counts, &backend, &coverage, "layer_norm", storage, "columns unsplit");
  conf_run_rows(&counts, &backend, &coverage, "rms_norm", storage, "columns unsplit");
  unsetenv("TIGHTFIT_VULKAN_SPLIT_COLUMNS");
}

/* cast from i64 to f32 (integer data an f32 op reads: an imported padding mask), bit for bit the
 * CPU's rule, through double: twice rounded to nearest even, on values where that matters. */
static void test_i64_cast(void) {
  static const int64_t values[] = {0,
                                   1,
                                   -1,
                                   16777217,                               /* 2^24 + 1: a tie, to even */
                                   16777219,                               /* 2^24 + 3: a tie, up */
                                   -2147483649LL,                          /* -2^31 - 1 */
                                   (1LL << 53) + 1,                        /* a tie in double already */
                                   (1LL << 60) + (1LL << 36) + (1LL << 7), /* once: 2^60 + 2^37; twice: 2^60 */
                                   (1LL << 40) + (1LL << 16) + 1,          /* just above a float tie */
                                   INT64_MAX,
                                   INT64_MIN,
                                   -123456789012345LL};
  enum { N = (int)(sizeof(values) / sizeof(values[0])) };
  tf_graph *g = tf_test_graph_begin(&counts, "i64 cast");
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I64, TF_SHAPE(d(N)));
  tf_test_finish_probe(g, tf_cast(g, ids, TF_F32));
  tf_plan *plan = NULL;
  tf_session *session = vulkan_session(g, false, &plan); /* inference: nothing to train */
  if (session) {
    float probe[N], got[N];
    for (int k = 0; k < N; k++)
      probe[k] = 1.0f;
    double loss = 0;
    CHECK_OK(&counts, tf_session_write(session, "ids", values, sizeof(values)));
    CHECK_OK(&counts, tf_session_write(session, "probe", probe, sizeof(probe)));
    CHECK_OK(&counts, tf_session_forward(session, &loss));
    int32_t cast = -1;
    for (int32_t k = 0; k < plan->n_steps && cast < 0; k++)
      cast = plan->steps[k].op == TF_OP_CAST ? plan->steps[k].outputs[0] : -1;
    CHECK_OK(&counts, tf_session_read_range(session, cast, 0, got, sizeof(got)));
    int32_t wrong = 0;
    for (int k = 0; k < N; k++) {
      const float want = (float)(double)values[k];
      if (memcmp(&want, &got[k], sizeof(want)) != 0 && wrong++ < 3)
        printf("     i64 %lld: vulkan %.9g, the CPU's rule %.9g\n", (long long)values[k], (double)got[k], (double)want);
    }
    CHECK(&counts, wrong == 0, "i64 -> f32 cast: %d of %d values differ from the CPU's rule", wrong, N);
    printf("%s i64 -> f32 cast of %d values (ties, double rounding, the extremes) bit for bit the CPU's\n",
           wrong ? "FAIL" : "ok  ", N);
    tf_session_destroy(session);
  }
  tf_plan_destroy(plan);
}

/* The attention rows alone: f32 (tiled where it applies), f32 through attention.comp, bf16, f16
 * (`test_vulkan_ops attention`: a GPU session's or a shader change's quick check). */
static void attention_rows(void) {
  conf_run_rows(&counts, &backend, &coverage, "attention", TF_F32, "tiled where it applies");
  test_untiled_attention(TF_F32);
  conf_run_rows(&counts, &backend, &coverage, "attention", TF_BF16, "tiled where it applies");
  conf_run_rows(&counts, &backend, &coverage, "attention", TF_F16, "tiled where it applies");
  test_untiled_attention(TF_F16);
}

/* Which heads run dx in slices of the classes (core/linear_loss.h) and the workspace that reserves:
 * gpt2-small's head at 8 x 1024 in 8 slices, the table's 4,500-class rows in 2, none where the
 * classes are few or the output has many tiles, and no partial products for a forward head. */
static void test_dx_slices(void) {
  const struct {
    int64_t rows, features, classes, chunk, slices;
  } cases[] = {{8192, 768, 50257, 256, 8},  {10, 8, 4500, 3, 2},      {21, 8, 6151, 5, 3},  {23, 8, 1031, 5, 1},
               {8192, 768, 50257, 2048, 1}, {512, 128, 5000, 512, 2}, {64, 64, 4095, 64, 1}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const tf_linear_loss_geometry g = {cases[i].rows, cases[i].features, cases[i].classes, cases[i].chunk, true};
    const int64_t slices = tf_linear_loss_vulkan_dx_slices(&g);
    CHECK(&counts, slices == cases[i].slices, "dx slices of [%lld, %lld] x %lld classes, chunk %lld: %lld, want %lld",
          (long long)g.rows, (long long)g.features, (long long)g.classes, (long long)g.chunk_rows, (long long)slices,
          (long long)cases[i].slices);
    const int64_t plain = tf_linear_loss_vulkan_count_at(&g) + 1;
    const int64_t want =
        slices > 1 ? tf_linear_loss_vulkan_partials_at(&g) + slices * g.chunk_rows * g.features : plain;
    CHECK(&counts, tf_linear_loss_vulkan_workspace_words(&g, true) == want && want >= plain,
          "the gradient head's workspace holds its %lld partial products", (long long)slices);
    CHECK(&counts, tf_linear_loss_vulkan_workspace_words(&g, false) == plain,
          "a forward head's workspace has no partial products");
  }
  printf("ok   dx in slices where the head's dx product has few tiles and many classes\n");
}

/* The products' rows (matmul, matmul_accumulate, the fused loss heads' chunks) with every product in
 * 128 x 128 tiles (TIGHTFIT_VULKAN_BIG_MATMUL=all: matmul.comp's big-tile variant, which by default
 * only products of at least 256 such tiles take, none of the table's), on f32, bf16 and f16 data: partial tiles on
 * every edge, K not a multiple of 16, transposes, batches, offsets (`test_vulkan_ops matmul`). */
static void big_matmul_rows(void) {
  setenv("TIGHTFIT_VULKAN_BIG_MATMUL", "all", 1);
  const int mode = device_facts_now().big_matmul;
  CHECK(&counts, mode == 2, "TIGHTFIT_VULKAN_BIG_MATMUL=all gave mode %d, not 2 (every product)", mode);
  printf("%s every product in 128 x 128 tiles (mode %d)\n", mode == 2 ? "ok  " : "FAIL", mode);
  conf_run_rows(&counts, &backend, &coverage, "matmul", TF_F32, "128 x 128 tiles");
  conf_run_rows(&counts, &backend, &coverage, "linear_cross_entropy", TF_F32, "128 x 128 tiles");
  conf_run_rows(&counts, &backend, &coverage, "matmul", TF_BF16, "128 x 128 tiles");
  conf_run_rows(&counts, &backend, &coverage, "matmul", TF_F16, "128 x 128 tiles");
  /* the big tiles loading element by element where they would read aligned vec4 quads */
  setenv("TIGHTFIT_VULKAN_MATMUL_QUADS", "0", 1);
  conf_run_rows(&counts, &backend, &coverage, "matmul", TF_F32, "128 x 128 tiles, element loads");
  setenv("TIGHTFIT_VULKAN_MATMUL_QUADS", "yes", 1); /* neither 0 nor 1: the device is not opened */
  void *state = NULL;
  const tf_backend_options options = {.device = 0, .threads = 1};
  tf_status status = tf_backend_find("vulkan")->create(&options, &state);
  const bool refused = status && strstr(tf_status_message(status), "TIGHTFIT_VULKAN_MATMUL_QUADS='yes'");
  CHECK(&counts, refused, "TIGHTFIT_VULKAN_MATMUL_QUADS=yes: %s", status ? tf_status_message(status) : "accepted");
  printf("%s TIGHTFIT_VULKAN_MATMUL_QUADS=yes refused\n", refused ? "ok  " : "FAIL");
  tf_status_free(status);
  if (state)
    tf_backend_find("vulkan")->destroy(state);
  unsetenv("TIGHTFIT_VULKAN_MATMUL_QUADS");
  unsetenv("TIGHTFIT_VULKAN_BIG_MATMUL");
  /* the products in the plain variant's 64-wide tiles beside the other shaders' subgroup variants
   * (what GPUs take, vk_device.c) and in the subgroup variant (what lavapipe takes), either device */
  for (int s = 0; s < 2; s++) {
    setenv("TIGHTFIT_VULKAN_MATMUL_SUBGROUPS", s ? "1" : "0", 1);
    conf_run_rows(&counts, &backend, &coverage, "matmul", TF_F32, s ? "subgroup products" : "plain products");
  }
  unsetenv("TIGHTFIT_VULKAN_MATMUL_SUBGROUPS");
  test_dx_slices();
  /* the heads' rows again with dx as one product where the plan reserved its slices */
  setenv("TIGHTFIT_VULKAN_SPLIT_DX", "0", 1);
  conf_run_rows(&counts, &backend, &coverage, "linear_cross_entropy", TF_F32, "dx in one product");
  unsetenv("TIGHTFIT_VULKAN_SPLIT_DX");
}

/* TIGHTFIT_TEST_SUBGROUP_SIZE=N: the subgroup variants must run with subgroups of N lanes, or the
 * test fails (test_vulkan_ops_subgroups16 asks lavapipe for 16 with LP_NATIVE_VECTOR_WIDTH=512: two
 * clusters of 8 lanes a subgroup, as NVIDIA's 32 has four; lavapipe's default 8 has one, under which
 * a cluster numbered or read without its subgroup offset passes). */
static void check_subgroup_size(void) {
  const char *want = getenv("TIGHTFIT_TEST_SUBGROUP_SIZE");
  if (!want)
    return;
  const unsigned size = device_facts_now().subgroup_size;
  const bool ok = size == (unsigned)strtoul(want, NULL, 10);
  CHECK(&counts, ok, "TIGHTFIT_TEST_SUBGROUP_SIZE=%s, but the subgroup variants run with subgroups of %u (0: off)",
        want, size);
  if (ok)
    printf("ok   subgroups of %u lanes (TIGHTFIT_TEST_SUBGROUP_SIZE=%s)\n", size, want);
}

/* The tables of cases: f32 with what only Vulkan has (f32), the bf16 and f16 rows (half). */
static void run_tables(bool f32, bool half) {
  if (f32) {
    conf_run_table(&counts, &backend, &coverage);
    test_untiled_attention(TF_F32);
    test_unsplit_columns(TF_F32);
  }
  if (half) {
    conf_run_table_half(&counts, &backend, &coverage, TF_BF16);
    conf_run_table_half(&counts, &backend, &coverage, TF_F16);
    test_untiled_attention(TF_F16);
    test_unsplit_columns(TF_F16);
    conf_check_half_coverage(&counts, &backend, &coverage);
  }
  if (f32) {
    test_shared_device();
    test_refusals();
    test_i64_cast();
    conf_check_coverage(&counts, &backend, &coverage);
  }
}

/* Everything without an argument; "f32": the f32 table, the refusals and what only Vulkan has;
 * "half": the bf16 and f16 rows; "attention": attention_rows; "matmul": big_matmul_rows. ctest runs the first two parts
 * as two tests (test_vulkan_ops and test_vulkan_ops_half), which run in parallel and which CI's sanitizer stage can
 * tell apart. */
int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a run stopped at its time limit shows how far it got */
  const char *part = argc > 1 ? argv[1] : "all";
  if (strcmp(part, "all") != 0 && strcmp(part, "f32") != 0 && strcmp(part, "half") != 0 &&
      strcmp(part, "attention") != 0 && strcmp(part, "matmul") != 0) {
    fprintf(stderr, "usage: test_vulkan_ops [f32|half|attention|matmul] (got '%s')\n", part);
    return 2;
  }
  const bool f32 = strcmp(part, "half") != 0, half = strcmp(part, "f32") != 0;
  int available = parity_vulkan_available();
  if (available != 0)
    return available;
  check_subgroup_size();
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  const tf_backend_options options = {.device = 0, .threads = 1};
  CHECK_OK(&counts, vulkan->open_shared(&options, &backend.shared));
  const char *label = strcmp(part, "attention") == 0 ? "vulkan ops (attention rows)"
                      : strcmp(part, "matmul") == 0  ? "vulkan ops (products in 128 x 128 tiles)"
                      : half && !f32                 ? "vulkan ops (bf16, f16 rows)"
                                                     : "vulkan ops";
  if (strcmp(part, "attention") == 0)
    attention_rows();
  else if (strcmp(part, "matmul") == 0)
    big_matmul_rows();
  else
    run_tables(f32, half);
  /* closed before the check: leaked objects are reported when the device is destroyed */
  vulkan->close_shared(backend.shared);
  backend.shared = NULL;
  parity_check_validation(&counts);
  return tf_test_finish(label, &counts);
}
