/* The model zoo: every preset builds into a valid graph whose shapes infer at N=2; the two
 * published parameter counts are exact; overrides change the model, and bad ones are refused with
 * a message that lists the valid choices. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "zoo_plans.h"

static tf_test_counts counts;

/* Builds `preset` with up to 8 overrides; NULL (with the failure recorded) on error. */
static tf_graph *build(const char *preset, const char *const *overrides, int32_t n) {
  return tf_test_zoo_graph(&counts, preset, overrides, n);
}

static int64_t count_of(const char *preset, const char *const *overrides, int32_t n) {
  tf_graph *g = build(preset, overrides, n);
  int64_t count = g ? tf_graph_parameter_count(g) : -1;
  tf_graph_destroy(g);
  return count;
}

/* Shape of tensor `name` after inference, as "[2,64,128]". */
static const char *shape_of(const tf_graph *g, const char *name, char *buffer, size_t size) {
  tf_tensor_info info;
  snprintf(buffer, size, "(missing)");
  if (!tf_graph_tensor(g, tf_graph_find_tensor(g, name), &info))
    return buffer;
  size_t used = (size_t)snprintf(buffer, size, "[");
  for (int32_t i = 0; i < info.rank && used < size; i++)
    used += (size_t)snprintf(buffer + used, size - used, "%s%" PRId64, i ? "," : "", info.shape[i]);
  if (used < size)
    snprintf(buffer + used, size - used, "]");
  return buffer;
}

static void test_every_preset_builds_and_infers(void) {
  CHECK(&counts, tf_zoo_preset_count() >= 10, "%d presets", tf_zoo_preset_count());
  CHECK(&counts, tf_zoo_preset_at(-1) == NULL && tf_zoo_preset_at(tf_zoo_preset_count()) == NULL,
        "out-of-range presets");
  for (int32_t i = 0; i < tf_zoo_preset_count(); i++) {
    const tf_zoo_preset *preset = tf_zoo_preset_at(i);
    tf_graph *g = build(preset->name, NULL, 0);
    if (!g)
      continue;
    CHECK(&counts, tf_graph_status(g) == NULL, "%s: %s", preset->name, tf_status_message(tf_graph_status(g)));
    CHECK(&counts, strcmp(tf_graph_name(g), preset->name) == 0, "graph name %s", tf_graph_name(g));
    CHECK(&counts, tf_graph_loss(g) >= 0, "%s has a loss", preset->name);
    CHECK(&counts, tf_graph_output_count(g) >= 1, "%s has outputs", preset->name);
    CHECK(&counts, tf_graph_training(g) && tf_graph_training(g)->optimizer != TF_OPTIMIZER_NONE,
          "%s has a training configuration", preset->name);
    CHECK_OK(&counts, tf_graph_bind_list(g, "N=2"));
    CHECK_OK(&counts, tf_graph_infer_shapes(g));
    tf_tensor_info loss;
    CHECK(&counts, tf_graph_tensor(g, tf_graph_loss(g), &loss) && loss.rank == 0, "%s: loss is a scalar", preset->name);
    /* The graph survives its file format (tf_graph_save writes these bytes). */
    void *bytes = NULL;
    size_t size = 0;
    tf_graph *loaded = NULL;
    CHECK_OK(&counts, tf_graph_serialize(g, &bytes, &size));
    if (bytes) {
      CHECK_OK(&counts, tf_graph_parse(bytes, size, preset->name, &loaded));
      CHECK(&counts,
            loaded && tf_graph_parameter_count(loaded) == tf_graph_parameter_count(g) &&
                tf_graph_tensor_count(loaded) == tf_graph_tensor_count(g),
            "%s: serialized and parsed back", preset->name);
    }
    tf_graph_destroy(loaded);
    free(bytes);
    printf("%-13s %-6s %12" PRId64 " parameters, %5d tensors, %5d nodes, %8zu bytes as .tfg  (%s)\n", preset->name,
           preset->family, tf_graph_parameter_count(g), tf_graph_tensor_count(g), tf_graph_node_count(g), size,
           preset->description);
    tf_graph_destroy(g);
  }
}

static void test_published_counts(void) {
  int64_t gpt2 = count_of("gpt2-small", NULL, 0), vit = count_of("vit-b16", NULL, 0);
  printf("gpt2-small: %" PRId64 " parameters (expected 124439808)\n", gpt2);
  printf("vit-b16: %" PRId64 " parameters (expected 86567656)\n", vit);
  CHECK(&counts, gpt2 == 124439808, "gpt2-small has %" PRId64, gpt2);
  CHECK(&counts, vit == 86567656, "vit-b16 has %" PRId64, vit);
}

static void test_inferred_shapes(void) {
  char shape[128];
  tf_graph *g = build("gpt", NULL, 0);
  if (g) {
    CHECK_OK(&counts, tf_graph_bind_list(g, "N=2,T=32"));
    CHECK_OK(&counts, tf_graph_infer_shapes(g));
    shape_of(g, "logits", shape, sizeof(shape));
    printf("gpt logits at N=2,T=32: %s\n", shape);
    CHECK(&counts, strcmp(shape, "[2,32,128]") == 0, "gpt logits %s", shape);
    tf_graph_destroy(g);
  }
  g = build("vit-b16", NULL, 0);
  if (g) {
    CHECK_OK(&counts, tf_graph_bind_list(g, "N=2"));
    CHECK_OK(&counts, tf_graph_infer_shapes(g));
    CHECK(&counts, strcmp(shape_of(g, "logits", shape, sizeof(shape)), "[2,1000]") == 0, "vit logits %s", shape);
    tf_graph_destroy(g);
  }
  g = build("asr-128-6-3", NULL, 0);
  if (g) {
    CHECK_OK(&counts, tf_graph_bind_list(g, "N=2,T=50,U=20"));
    CHECK_OK(&counts, tf_graph_infer_shapes(g));
    CHECK(&counts, strcmp(shape_of(g, "mel", shape, sizeof(shape)), "[2,80,200]") == 0, "asr mel %s", shape);
    CHECK(&counts, strcmp(shape_of(g, "logits", shape, sizeof(shape)), "[2,20,5000]") == 0, "asr logits %s", shape);
    tf_graph_destroy(g);
  }
  g = build("xtts-gpt", (const char *const[]){"layers=2"}, 1);
  if (g) {
    CHECK_OK(&counts, tf_graph_bind_list(g, "N=2,Ta=100"));
    CHECK_OK(&counts, tf_graph_infer_shapes(g));
    CHECK(&counts, strcmp(shape_of(g, "text_logits", shape, sizeof(shape)), "[2,64,6681]") == 0, "xtts text %s", shape);
    CHECK(&counts, strcmp(shape_of(g, "audio_logits", shape, sizeof(shape)), "[2,100,1026]") == 0, "xtts audio %s",
          shape);
    tf_graph_destroy(g);
  }
  g = build("dcgan", NULL, 0);
  if (g) {
    CHECK_OK(&counts, tf_graph_bind_list(g, "N=2"));
    CHECK_OK(&counts, tf_graph_infer_shapes(g));
    CHECK(&counts, strcmp(shape_of(g, "generated", shape, sizeof(shape)), "[2,1,128,64]") == 0, "dcgan G(z) %s", shape);
    tf_graph_destroy(g);
  }
}

static void test_overrides_change_the_model(void) {
  /* A GPT block has 12 d^2 + 13 d parameters: qkv 3d^2+3d, proj d^2+d, mlp 8d^2+5d, two norms 4d. */
  int64_t d = 128, block = 12 * d * d + 13 * d;
  int64_t four = count_of("gpt", NULL, 0), two = count_of("gpt", (const char *const[]){"layers=2"}, 1);
  printf("gpt: %" PRId64 " parameters; layers=2: %" PRId64 "\n", four, two);
  CHECK(&counts, four - two == 2 * block, "gpt minus two blocks: %" PRId64 " vs %" PRId64, four - two, 2 * block);

  /* The last override wins. */
  int64_t again = count_of("gpt", (const char *const[]){"layers=7", "layers=2"}, 2);
  CHECK(&counts, again == two, "last override wins: %" PRId64 " vs %" PRId64, again, two);

  /* Derived knobs follow d_model unless set: asr-256-12-6 at d_model=192 is asr-192-8-4 with 12+6 layers. */
  int64_t narrowed = count_of("asr-256-12-6", (const char *const[]){"d_model=192"}, 1);
  int64_t deepened = count_of("asr-192-8-4", (const char *const[]){"enc_layers=12", "dec_layers=6"}, 2);
  CHECK(&counts, narrowed == deepened, "asr d_model=192: %" PRId64 " vs %" PRId64, narrowed, deepened);

  int64_t vocab = count_of("asr-128-6-3", (const char *const[]){"vocab=300"}, 1);
  int64_t full = count_of("asr-128-6-3", NULL, 0);
  CHECK(&counts, full - vocab == (5000 - 300) * 128, "asr vocab=300: %" PRId64 " vs %" PRId64, vocab, full);

  int64_t small_vit = count_of("vit-b16", (const char *const[]){"layers=2"}, 1);
  CHECK(&counts, small_vit == 86567656 - 10 * 7087872, "vit-b16 layers=2: %" PRId64, small_vit);
}

static void test_params(void) {
  tf_zoo_param params[16];
  int32_t n = 0;
  CHECK_OK(&counts, tf_zoo_params("gpt2-small", NULL, 0, params, 16, &n));
  bool found = false;
  for (int32_t i = 0; i < n && i < 16; i++) {
    printf("gpt2-small knob %s = %" PRId64 "  (%s)\n", params[i].name, params[i].value, params[i].help);
    found |= strcmp(params[i].name, "d_model") == 0 && params[i].value == 768;
  }
  CHECK(&counts, n >= 5 && found, "gpt2-small knobs: %d, d_model=768 found: %d", n, found);

  /* Derived values are reported resolved. */
  CHECK_OK(&counts, tf_zoo_params("asr-128-6-3", NULL, 0, params, 16, &n));
  for (int32_t i = 0; i < n && i < 16; i++) {
    if (strcmp(params[i].name, "heads") == 0)
      CHECK(&counts, params[i].value == 2, "asr-128-6-3 heads %" PRId64, params[i].value);
    if (strcmp(params[i].name, "ffn") == 0)
      CHECK(&counts, params[i].value == 512, "asr-128-6-3 ffn %" PRId64, params[i].value);
  }
  /* A short array gets a prefix; the count is still the total. */
  int32_t total = 0;
  CHECK_OK(&counts, tf_zoo_params("vit-b16", NULL, 0, params, 2, &total));
  CHECK(&counts, total == 7, "vit-b16 has %d knobs", total);

  /* Overrides are applied, and derived knobs follow them: asr heads = d_model / 64. */
  const char *wider[] = {"d_model=256", "layers=1"};
  tf_status refused = tf_zoo_params("asr-128-6-3", wider, 2, params, 16, &n);
  CHECK(&counts, tf_status_code(refused) == TF_ERR_INVALID_ARGUMENT, "unknown knob 'layers' for asr is refused");
  tf_status_free(refused);
  CHECK_OK(&counts, tf_zoo_params("asr-128-6-3", wider, 1, params, 16, &n));
  for (int32_t i = 0; i < n && i < 16; i++) {
    if (strcmp(params[i].name, "d_model") == 0)
      CHECK(&counts, params[i].value == 256, "asr d_model override %" PRId64, params[i].value);
    if (strcmp(params[i].name, "heads") == 0)
      CHECK(&counts, params[i].value == 4, "asr heads derived from d_model=256: %" PRId64, params[i].value);
  }

  tf_status status = tf_zoo_params("nope", NULL, 0, params, 16, &n);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "params of an unknown preset");
  tf_status_free(status);
}

/* Expects building `preset` with `override` to fail with TF_ERR_INVALID_ARGUMENT and a message
 * containing `expected`. */
static void expect_refused(const char *preset, const char *override, const char *expected) {
  tf_graph *g = NULL;
  const char *overrides[1] = {override};
  tf_status status = tf_zoo_build(preset, overrides, override ? 1 : 0, &g);
  const char *message = tf_status_message(status);
  printf("%s %s -> %s\n", preset, override ? override : "", message);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "%s %s: code %s", preset, override ? override : "",
        tf_code_name(tf_status_code(status)));
  CHECK(&counts, strstr(message, expected) != NULL, "'%s' lacks '%s'", message, expected);
  CHECK(&counts, g == NULL, "no graph on error");
  tf_graph_destroy(g);
  tf_status_free(status);
}

static void test_bad_overrides(void) {
  expect_refused("gpt3", NULL, "valid presets: mlp, cnn, gpt, gpt2-small, vit-b16");
  expect_refused("gpt", "depth=3", "valid knobs: vocab, ctx, d_model, layers, heads, seq");
  expect_refused("gpt", "layers", "is not knob=value");
  expect_refused("gpt", "layers=abc", "needs an integer");
  expect_refused("gpt", "layers=", "needs an integer");
  expect_refused("gpt", "layers=2x", "needs an integer");
  expect_refused("gpt", "layers=0", "needs an integer in [1,");
  expect_refused("gpt", "layers=-3", "needs an integer in [1,");
  expect_refused("gpt", "vocab=99999999999999999999", "needs an integer");
  expect_refused("gpt", "heads=5", "heads (5) must divide d_model (128)");
  expect_refused("gpt", "seq=300", "seq (300) must be <= ctx (256)");
  expect_refused("vit-b16", "image=100", "patch (16) must divide image (100)");
  expect_refused("vit-b16", "heads=7", "heads (7) must divide d_model (768)");
  expect_refused("asr-128-6-3", "d_model=200", "heads (3) must divide d_model (200)");
  expect_refused("xtts-gpt", "text_length=500", "text_length (500) must be <= text_positions (404)");
  expect_refused("dcgan", "mels=100", "multiples of 16");
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build("gpt", NULL, 0, NULL);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "NULL out is refused");
  tf_status_free(status);
  status = tf_zoo_build("gpt", NULL, 2, &g);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && g == NULL, "overrides NULL with n=2");
  tf_status_free(status);
}

int main(void) {
  test_every_preset_builds_and_infers();
  test_published_counts();
  test_inferred_shapes();
  test_overrides_change_the_model();
  test_params();
  test_bad_overrides();
  return tf_test_finish("test_zoo", &counts);
}
