#define _DEFAULT_SOURCE /* realpath */
#include "tools/compile_args.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tf_compile_args_init(tf_compile_args *args) {
  memset(args, 0, sizeof(*args));
  args->options = tf_compile_options_default(TF_TARGET_CPU);
  args->budget = -1;
  args->global_batch = -1;
  args->smallest = true;
}

void tf_compile_args_help(void) {
  fprintf(tf_cli_out(),
          "  --set NAME=V[,NAME=V]  bind symbols, e.g. --set N=32,T=256 (repeatable)\n"
          "  --target T             cpu (default), vulkan or cuda: the device overhead model and cost model\n"
          "  --gpu NAME             a named card (t4, a100-80gb, ...; docs/gpus.md): its target, and its\n"
          "                         memory as the budget\n"
          "  --device D             cuda:N or vulkan:N on this machine: its free memory as the budget (unless\n"
          "                         --budget) and its measured context, library and rounding overhead\n"
          "  --device-profile F     a card measured by `tightfit devices --calibrate D -o F` (on any\n"
          "                         machine): its target, its measured overhead, and its memory as the\n"
          "                         budget (unless --budget)\n"
          "  --threads N            CPU threads the kernel workspaces are sized for (default 2)\n"
          "  --optimizer O          sgd, adamw or adamw8bit (AdamW, 8-bit moments) (default: the graph's);\n"
          "                         another than the graph's starts\n"
          "                         from its own defaults, not the graph's settings for its optimizer:\n"
          "                         adamw lr 3e-4, betas 0.9/0.999, eps 1e-8; sgd lr 0.01, no momentum\n"
          "  --lr X                 learning rate (default: the graph's, for the graph's optimizer)\n"
          "  --weight-decay X       weight decay (default: the graph's)\n"
          "  --clip X               global gradient-norm clipping, 0 = off (default: the graph's)\n"
          "  --accumulate K         micro-batches per optimizer step (default 1)\n"
          "  --inference            a forward-only plan (no gradients, no optimizer)\n"
          "  --update-in-backward   update each parameter in the backward pass, as soon as its gradient\n"
          "                         is complete: the gradients then live in the arena for a few steps\n"
          "                         instead of all in their own region (same weights; needs\n"
          "                         --accumulate 1, no --clip, no fp16)\n"
          "  --no-smallest          the default takes each rewrite that trains the same weights bit\n"
          "                         for bit where it makes the plan smaller: updates in the backward\n"
          "                         pass (where legal) and fused loss heads (report's notes say what\n"
          "                         each saved); this leaves both off unless given (a gradient is\n"
          "                         then readable after a step, and an unfused head is faster)\n"
          "  --no-update-in-backward\n"
          "                         every update after the backward pass (gradients kept whole)\n"
          "  --remat M              activation recompute: none (default), checkpoints (keep only layer\n"
          "                         boundaries), auto (recompute the least that fits --budget)\n"
          "  --precision P          fp32 (default: the graph's), bf16 or fp16: the activations kept for\n"
          "                         the backward pass stored in half precision; weights, gradients,\n"
          "                         optimizer state and all arithmetic stay f32 (every target)\n"
          "  --matmul-math M        fp32 (default), bf16 or fp16: the matrix products (matmul, conv, fused\n"
          "                         loss heads) round their operands to M and accumulate in f32 where\n"
          "                         the device has the units (CUDA tensor cores); cpu and vulkan\n"
          "                         compute them in f32 whatever this says\n"
          "  --autocast P           bf16 or fp16: the forward pass computes on half activations, as\n"
          "                         torch.autocast: matmul, convolutions and attention on half operands\n"
          "                         (tensor cores on CUDA), layer/RMS norms, softmax, exp/log and sums in\n"
          "                         f32, f32 and half meeting promote to f32 (a bias meets its product in\n"
          "                         half); master weights, their gradients, optimizer state and the loss\n"
          "                         stay f32; the products' math follows (--matmul-math P) (default:\n"
          "                         off)\n"
          "  --param-dtype P        fp32 (default), bf16 or fp16: parameters stored in P, as a model\n"
          "                         converted with .to(torch.bfloat16); each trained one keeps an f32\n"
          "                         master copy in the optimizer state, updated from the widened\n"
          "                         gradient, which then writes the parameter (DeepSpeed's bf16)\n"
          "  --no-half-kernels      ops on f16/bf16 data (a bf16 model) all compute on f32 copies between\n"
          "                         casts; by default each target runs most ops on half data itself,\n"
          "                         computing in f32 without the f32 copies: vulkan (matmul, convolutions,\n"
          "                         elementwise, softmax, reductions, norms, attention: f16/bf16 shader\n"
          "                         variants; needs storageBuffer16BitAccess, tightfit devices says), cuda\n"
          "                         (16-bit cuBLAS matmuls with f32 accumulation, elementwise, softmax,\n"
          "                         reductions, norms, attention, embedding, pools), cpu (f32 kernels\n"
          "                         over half slices)\n"
          "  --loss-scale S         fp16: the initial dynamic loss scale, a power of two from 1 to 2^24\n"
          "                         (default: the graph's, else 65536); train halves it and skips the\n"
          "                         update when a gradient overflows, and doubles it after a run of\n"
          "                         good steps (train --loss-scale-window)\n"
          "  --precision-override NODE=P\n"
          "                         store the activations node NODE saves for the backward pass in P\n"
          "                         (f32, bf16, fp16, or inherit), whatever --precision says; the\n"
          "                         graph's own overrides otherwise (repeatable; tightfit dump names\n"
          "                         the nodes)\n"
          "  --freeze PATTERN       freeze the parameters PATTERN names (a name or an fnmatch glob such as\n"
          "                         'encoder.*'; quote it): no gradient, no optimizer state, no update,\n"
          "                         and no backward pass toward what only frozen parameters feed\n"
          "                         (repeatable; a pattern naming no parameter, or freezing them all,\n"
          "                         is an error)\n"
          "  --train-only PATTERN   train only the parameters PATTERN names, freeze the rest (repeatable;\n"
          "                         --freeze then freezes within them)\n"
          "  --lora R[:ALPHA]       LoRA: each linear weight --lora-targets names gets a trainable rank-R\n"
          "                         pair added as ALPHA/R x (x A^T) B^T (ALPHA default R; B starts at\n"
          "                         zero), and every other parameter is frozen but those --train-only\n"
          "                         names, as PEFT does (docs/finetune.md)\n"
          "  --lora-targets PATTERN the weights LoRA adapts: names or fnmatch globs of 2-D matmul weights\n"
          "                         (repeatable), e.g. '*.attn.c_attn.weight'\n"
          "  --fuse-loss F          smallest (default: fused where that makes the plan smaller), auto\n"
          "                         (8192 classes or more and 128 MiB of logits or more), on or off:\n"
          "                         compute each matmul [-> add bias] -> cross_entropy loss\n"
          "                         head (every term of a summed loss) in row chunks, so the [rows, V]\n"
          "                         logits and their gradient never exist; the gradient recomputes them,\n"
          "                         except with --accumulate 1 for the head that gives the loss, whose\n"
          "                         loss and gradients come from one pass (training plans)\n"
          "  --gelu-pair G          auto (default: on the cpu target), on or off: each gelu whose gradient\n"
          "                         reads the same f32 x keeps its derivative from the forward pass, and\n"
          "                         the gradient multiplies by it (one GELU evaluation less; the same\n"
          "                         weights bit for bit; training plans)\n"
          "  --loss-chunk R         rows of logits a fused loss head computes at a time (default: 1/32\n"
          "                         of the rows, at least 256, at most 64 MiB of logits; the\n"
          "                         --global-batch search may take it down to 64 rows to fit, never\n"
          "                         one given here)\n"
          "  --budget SIZE          device memory the device total (regions + overhead) must fit:\n"
          "                         512MiB, 14.7GiB, 16GB (GB = 1e9, GiB = 2^30)\n"
          "  --global-batch G       with --budget: search micro-batch N (dividing G), accumulation G/N,\n"
          "                         recompute and the fused loss head (its chunk; fusing where auto\n"
          "                         did not) for the fastest plan that fits\n"
          "  --allow-lora R         with --global-batch: when nothing fits training every parameter, search\n"
          "                         again with LoRA rank R on the --lora-targets weights (default: every\n"
          "                         linear weight), and say what it saved\n"
          "  --allow-precision P    with --global-batch: the search may also store the saved\n"
          "                         activations in P (bf16 or fp16), tried before recompute\n"
          "  --offload optimizer    the optimizer state in host memory and the updates on the host's cores\n"
          "                         (cuda and vulkan targets): the device holds no optimizer state; the\n"
          "                         plan says the host bytes and the bytes moved each step\n"
          "  --offload gradients    the gradients too: each gradient part is added to its gradient in host\n"
          "                         memory as the backward pass makes it, and the whole optimizer block\n"
          "                         runs on the host: the device holds neither\n"
          "  --offload activations  the activations kept for the backward pass (with --remat, its\n"
          "                         checkpoints) wait in host memory between the passes: copied down\n"
          "                         after their producer, back before their first backward reader;\n"
          "                         combine as --offload gradients,activations\n"
          "  --ranks R              the plan of one of R processes training data-parallel (tightfit train\n"
          "                         under mpirun -np R): each its own micro-batches, the gradients summed\n"
          "                         across them before each update (global batch = N x accumulate x R)\n"
          "  --zero S               with --ranks R: the ZeRO stage, 0 (default: every rank holds the\n"
          "                         whole optimizer state), 1 (each rank holds and updates the shard of\n"
          "                         the parameters it owns, and sends them to the others: the state\n"
          "                         region is the largest shard, about 1/R of it) or 2 (the gradients\n"
          "                         sharded too: each reduced to its owners after the backward pass's\n"
          "                         last write to it, from a bucket every rank holds; not with --clip)\n"
          "  --allow-offload        with --global-batch (cuda, vulkan): when nothing fits, search again with\n"
          "                         the optimizer state in host memory (--offload optimizer), then with\n"
          "                         the gradients too, then the activations too, after --allow-optimizer\n"
          "                         and before --allow-lora, and say what it saved\n"
          "  --allow-optimizer adamw8bit\n"
          "                         with --global-batch and AdamW: when nothing fits, search again with\n"
          "                         8-bit AdamW state (before --allow-lora), and say what it saved\n");
}

/* A finite number, the whole text (NaN, Inf and out-of-range values are refused). */
static bool parse_double(const char *text, double *value) {
  char *end;
  errno = 0;
  *value = strtod(text, &end);
  return end != text && *end == '\0' && errno == 0 && isfinite(*value);
}

/* A decimal integer, the whole text, inside int64 (strtoll's saturation is refused). */
static bool parse_int(const char *text, int64_t *value) {
  char *end;
  errno = 0;
  long long parsed = strtoll(text, &end, 10);
  *value = parsed;
  return end != text && *end == '\0' && errno == 0;
}

/* "fp32"/"f32", "bf16", "fp16"/"f16" -> the precision; false for any other name. */
static bool precision_named(const char *name, tf_precision *precision) {
  if (strcmp(name, "fp32") == 0 || strcmp(name, "f32") == 0)
    *precision = TF_PRECISION_F32;
  else if (strcmp(name, "bf16") == 0)
    *precision = TF_PRECISION_BF16;
  else if (strcmp(name, "fp16") == 0 || strcmp(name, "f16") == 0)
    *precision = TF_PRECISION_F16;
  else
    return false;
  return true;
}

/* "NODE=P" -> the node's name (into node) and P; false when malformed or P is unknown. */
static bool split_override(const char *text, char *node, size_t size, tf_precision *precision) {
  const char *equals = strrchr(text, '=');
  if (!equals || equals == text || (size_t)(equals - text) >= size)
    return false;
  memcpy(node, text, (size_t)(equals - text));
  node[equals - text] = '\0';
  const char *value = equals + 1;
  if (strcmp(value, "inherit") == 0) {
    *precision = TF_PRECISION_INHERIT;
    return true;
  }
  return precision_named(value, precision);
}

/* "R" or "R:ALPHA" -> the LoRA rank (1..65536) and alpha (> 0; 0 when not given: the rank). */
/* --offload's comma list of optimizer, gradients and activations into the options; false on any other
 * word or an empty entry. */
static bool parse_offload(const char *text, tf_compile_options *o) {
  bool optimizer = false, gradients = false, activations = false;
  for (const char *word = text;;) {
    const size_t length = strcspn(word, ",");
    if (length == 9 && strncmp(word, "optimizer", length) == 0)
      optimizer = true;
    else if (length == 9 && strncmp(word, "gradients", length) == 0)
      gradients = true;
    else if (length == 11 && strncmp(word, "activations", length) == 0)
      activations = true;
    else
      return false;
    if (word[length] == '\0')
      break;
    word += length + 1;
  }
  o->offload_optimizer = optimizer || gradients;
  o->offload_gradients = gradients;
  o->offload_activations = activations;
  return true;
}

static bool parse_lora(const char *text, int32_t *rank, double *alpha) {
  char *end;
  errno = 0;
  long r = strtol(text, &end, 10);
  if (end == text || errno || r < 1 || r > 65536 || (*end != '\0' && *end != ':'))
    return false;
  *rank = (int32_t)r;
  *alpha = 0;
  if (*end == '\0')
    return true;
  const char *a = end + 1;
  *alpha = strtod(a, &end);
  return end != a && *end == '\0' && errno == 0 && isfinite(*alpha) && *alpha > 0;
}

/* Applies every --precision-override to the loaded graph; an unknown node is an error naming it. */
static tf_status apply_overrides(const tf_compile_args *args, tf_graph *g) {
  for (int32_t i = 0; i < args->n_precision_overrides; i++) {
    char node[512];
    tf_precision precision;
    if (!split_override(args->precision_overrides[i], node, sizeof(node), &precision))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--precision-override '%s' is not NODE=P",
                           args->precision_overrides[i]);
    int32_t id = tf_graph_find_node(g, node);
    if (id < 0)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "--precision-override: the graph has no node named '%s' (tightfit dump lists the nodes)",
                           node);
    TF_RETURN_IF_ERROR(tf_graph_set_node_precision(g, id, precision));
  }
  return NULL;
}

static bool append_binding(tf_compile_args *args, const char *list) {
  size_t used = strlen(args->bindings);
  size_t needed = strlen(list) + (used ? 1 : 0);
  if (used + needed + 1 > sizeof(args->bindings))
    return false;
  if (used)
    args->bindings[used++] = ',';
  memcpy(args->bindings + used, list, strlen(list) + 1);
  return true;
}

/* Every compile option: its name and whether a value follows it. */
typedef struct compile_option {
  const char *name;
  bool takes_value;
} compile_option;

static const compile_option compile_options[] = {
    {"--json", false},
    {"--inference", false},
    {"--update-in-backward", false},
    {"--smallest", false},
    {"--no-smallest", false},
    {"--no-update-in-backward", false},
    {"--no-half-kernels", false},
    {"--remat", true},
    {"--precision", true},
    {"--matmul-math", true},
    {"--autocast", true},
    {"--param-dtype", true},
    {"--loss-scale", true},
    {"--precision-override", true},
    {"--freeze", true},
    {"--lora-targets", true},
    {"--lora", true},
    {"--train-only", true},
    {"--fuse-loss", true},
    {"--gelu-pair", true},
    {"--loss-chunk", true},
    {"--allow-lora", true},
    {"--allow-precision", true},
    {"--allow-optimizer", true},
    {"--offload", true},
    {"--zero", true},
    {"--ranks", true},
    {"--allow-offload", false},
    {"--budget", true},
    {"--gpu", true},
    {"--device", true},
    {"--device-profile", true},
    {"--global-batch", true},
    {"--set", true},
    {"--target", true},
    {"--threads", true},
    {"--optimizer", true},
    {"--lr", true},
    {"--weight-decay", true},
    {"--clip", true},
    {"--accumulate", true},
};

int tf_compile_args_arity(const char *name) {
  for (size_t k = 0; k < sizeof(compile_options) / sizeof(compile_options[0]); k++)
    if (strcmp(name, compile_options[k].name) == 0)
      return compile_options[k].takes_value ? 1 : 0;
  return -1;
}

#define BAD_VALUE(...) tf_status_new(TF_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* The index of `value` among names[0..count), or -1. */
static int index_of(const char *value, const char *const *names, int count) {
  for (int k = 0; k < count; k++)
    if (strcmp(value, names[k]) == 0)
      return k;
  return -1;
}

/* Appends `value` to one of the repeatable pattern lists, at most TF_COMPILE_ARGS_MAX_OVERRIDES. */
static tf_status append_pattern(const char **list, int32_t *count, const char *name, const char *value) {
  if (*count >= TF_COMPILE_ARGS_MAX_OVERRIDES)
    return BAD_VALUE("at most %d %s options", TF_COMPILE_ARGS_MAX_OVERRIDES, name);
  list[(*count)++] = value;
  return NULL;
}

/* The switches and the options about precision. */
static tf_status set_precision_option(tf_compile_args *args, const char *name, const char *value, bool *known) {
  tf_compile_options *o = &args->options;
  tf_precision precision = TF_PRECISION_F32;
  if (strcmp(name, "--precision") == 0) {
    o->set_precision = true;
    if (!precision_named(value, &o->precision))
      return BAD_VALUE("unknown precision '%s' (fp32, bf16, fp16)", value);
  } else if (strcmp(name, "--matmul-math") == 0) {
    if (!precision_named(value, &precision))
      return BAD_VALUE("unknown matmul math '%s' (fp32, bf16, fp16)", value);
    o->matmul_math = precision == TF_PRECISION_BF16 ? TF_BF16 : precision == TF_PRECISION_F16 ? TF_F16 : TF_F32;
  } else if (strcmp(name, "--autocast") == 0) {
    if (!precision_named(value, &precision) || precision == TF_PRECISION_F32)
      return BAD_VALUE("unknown autocast type '%s' (bf16, fp16)", value);
    o->autocast = precision == TF_PRECISION_BF16 ? TF_BF16 : TF_F16;
  } else if (strcmp(name, "--param-dtype") == 0) {
    if (!precision_named(value, &precision))
      return BAD_VALUE("unknown parameter dtype '%s' (fp32, bf16, fp16)", value);
    o->param_dtype = precision == TF_PRECISION_BF16 ? TF_BF16 : precision == TF_PRECISION_F16 ? TF_F16 : TF_F32;
  } else if (strcmp(name, "--loss-scale") == 0) {
    double scale = 0;
    int exponent = 0;
    if (!parse_double(value, &scale) || frexp(scale, &exponent) != 0.5 || exponent - 1 < TF_LOSS_SCALE_MIN_LOG2 ||
        exponent - 1 > TF_LOSS_SCALE_MAX_LOG2)
      return BAD_VALUE("--loss-scale takes a power of two from 1 to %d, got '%s'", 1 << TF_LOSS_SCALE_MAX_LOG2, value);
    o->loss_scale = scale;
  } else if (strcmp(name, "--precision-override") == 0) {
    char node[512];
    if (!split_override(value, node, sizeof(node), &precision))
      return BAD_VALUE("--precision-override takes NODE=P (P: f32, bf16, fp16, inherit), got '%s'", value);
    return append_pattern(args->precision_overrides, &args->n_precision_overrides, name, value);
  } else if (strcmp(name, "--allow-precision") == 0) {
    args->allow_precision = true;
    if (!precision_named(value, &args->allowed_precision) || args->allowed_precision == TF_PRECISION_F32)
      return BAD_VALUE("--allow-precision takes bf16 or fp16, got '%s'", value);
  } else {
    *known = false;
  }
  return NULL;
}

/* The options about what is trained and how: frozen parameters, LoRA, the loss head, the optimizer. */
static tf_status set_training_option(tf_compile_args *args, const char *name, const char *value, bool *known) {
  tf_compile_options *o = &args->options;
  double number;
  int64_t integer;
  if (strcmp(name, "--freeze") == 0)
    return append_pattern(args->freeze, &args->n_freeze, name, value);
  if (strcmp(name, "--lora-targets") == 0)
    return append_pattern(args->lora_targets, &args->n_lora_targets, name, value);
  if (strcmp(name, "--train-only") == 0)
    return append_pattern(args->train_only, &args->n_train_only, name, value);
  if (strcmp(name, "--lora") == 0) {
    if (!parse_lora(value, &o->lora_rank, &o->lora_alpha))
      return BAD_VALUE("--lora takes RANK or RANK:ALPHA (a rank in 1..65536, alpha > 0), got '%s'", value);
  } else if (strcmp(name, "--offload") == 0) {
    if (!parse_offload(value, o))
      return BAD_VALUE("--offload takes optimizer (the optimizer state in host memory, the updates on the host), "
                       "gradients (the gradients too) or activations (those kept for the backward pass), or a "
                       "comma list of them, got '%s'",
                       value);
  } else if (strcmp(name, "--zero") == 0) {
    if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0 && strcmp(value, "2") != 0)
      return BAD_VALUE("--zero takes 0, 1 or 2 (the ZeRO stage), got '%s'", value);
    o->zero = value[0] - '0';
  } else if (strcmp(name, "--allow-optimizer") == 0) {
    if (strcmp(value, "adamw8bit") != 0)
      return BAD_VALUE("--allow-optimizer takes adamw8bit (8-bit AdamW state), got '%s'", value);
    args->allow_optimizer_8bit = true;
  } else if (strcmp(name, "--allow-lora") == 0) {
    double unused;
    if (!parse_lora(value, &args->allow_lora_rank, &unused))
      return BAD_VALUE("--allow-lora takes a rank in 1..65536, got '%s'", value);
  } else if (strcmp(name, "--fuse-loss") == 0) {
    args->fuse_loss_given = true;
    static const char *const modes[] = {"auto", "off", "on", "smallest"}; /* tf_fuse_loss's order */
    const int k = index_of(value, modes, 4);
    if (k < 0)
      return BAD_VALUE("--fuse-loss takes smallest, auto, on or off, got '%s'", value);
    o->fuse_loss = (tf_fuse_loss)k;
  } else if (strcmp(name, "--gelu-pair") == 0) {
    static const char *const modes[] = {"auto", "on", "off"}; /* tf_gelu_pair's order */
    const int k = index_of(value, modes, 3);
    if (k < 0)
      return BAD_VALUE("--gelu-pair takes auto, on or off, got '%s'", value);
    o->gelu_pair = (tf_gelu_pair)k;
  } else if (strcmp(name, "--loss-chunk") == 0) {
    if (!parse_int(value, &integer) || integer < 1)
      return BAD_VALUE("--loss-chunk takes a positive row count, got '%s'", value);
    o->loss_chunk_rows = integer;
  } else if (strcmp(name, "--optimizer") == 0) {
    if (strcmp(value, "sgd") == 0)
      o->optimizer = TF_OPTIMIZER_SGD;
    else if (strcmp(value, "adamw") == 0)
      o->optimizer = TF_OPTIMIZER_ADAMW;
    else if (strcmp(value, "adamw8bit") == 0)
      o->optimizer = TF_OPTIMIZER_ADAMW8BIT;
    else
      return BAD_VALUE("unknown optimizer '%s' (sgd, adamw, adamw8bit)", value);
  } else if (strcmp(name, "--lr") == 0) {
    if (!parse_double(value, &number) || !(number > 0))
      return BAD_VALUE("--lr takes a positive number, got '%s'", value);
    o->learning_rate = number;
  } else if (strcmp(name, "--weight-decay") == 0) {
    if (!parse_double(value, &number) || number < 0)
      return BAD_VALUE("--weight-decay takes a number >= 0, got '%s'", value);
    o->weight_decay = number;
  } else if (strcmp(name, "--clip") == 0) {
    if (!parse_double(value, &number) || number < 0)
      return BAD_VALUE("--clip takes a number >= 0, got '%s'", value);
    o->clip_norm = number;
  } else if (strcmp(name, "--accumulate") == 0) {
    if (!parse_int(value, &integer) || integer < 1 || integer > (1 << 20))
      return BAD_VALUE("--accumulate takes 1..%d, got '%s'", 1 << 20, value);
    o->accumulate = (int32_t)integer;
  } else {
    *known = false;
  }
  return NULL;
}

/* The options about where the plan runs and how large it may be: target, budget, batch, recompute. */
static tf_status set_target_option(tf_compile_args *args, const char *name, const char *value) {
  tf_compile_options *o = &args->options;
  int64_t integer;
  if (strcmp(name, "--remat") == 0) {
    static const char *const modes[] = {"none", "checkpoints", "auto"}; /* tf_remat_mode's order */
    const int k = index_of(value, modes, 3);
    if (k < 0)
      return BAD_VALUE("unknown recompute mode '%s' (none, checkpoints, auto)", value);
    o->remat = (tf_remat_mode)k;
  } else if (strcmp(name, "--budget") == 0) {
    args->budget_given = true;
    if (!tf_cli_parse_bytes(value, &args->budget) || args->budget <= 0)
      return BAD_VALUE("--budget: '%s' is not a positive size (e.g. 16GiB, 512MiB, 1000000)", value);
  } else if (strcmp(name, "--gpu") == 0) {
    args->gpu = value;
    args->target_given = true;
  } else if (strcmp(name, "--device") == 0) {
    args->device = value;
    args->target_given = true;
  } else if (strcmp(name, "--device-profile") == 0) {
    args->device_profile = value;
    args->target_given = true;
  } else if (strcmp(name, "--global-batch") == 0) {
    if (!parse_int(value, &integer) || integer < 1 || integer > (1 << 20))
      return BAD_VALUE("--global-batch takes 1..%d, got '%s'", 1 << 20, value);
    args->global_batch = integer;
  } else if (strcmp(name, "--set") == 0) {
    if (!append_binding(args, value))
      return BAD_VALUE("--set lists are too long");
  } else if (strcmp(name, "--target") == 0) {
    tf_target_kind kind;
    if (!tf_target_parse(value, &kind))
      return BAD_VALUE("unknown target '%s' (cpu, vulkan, cuda)", value);
    int32_t threads = o->target.threads;
    o->target = tf_target_default(kind);
    if (kind == TF_TARGET_CPU)
      o->target.threads = threads;
    args->target_given = args->target_option = true;
  } else if (strcmp(name, "--ranks") == 0) {
    if (!parse_int(value, &integer) || integer < 1 || integer > TF_PLAN_MAX_RANKS)
      return BAD_VALUE("--ranks takes 1..%d (the processes of a data-parallel job), got '%s'", TF_PLAN_MAX_RANKS,
                       value);
    o->ranks = (int32_t)integer;
  } else if (strcmp(name, "--threads") == 0) {
    if (!parse_int(value, &integer) || integer < 1 || integer > 1024)
      return BAD_VALUE("--threads takes 1..1024, got '%s'", value);
    o->target.threads = (int32_t)integer;
  } else {
    return BAD_VALUE("unknown compile option '%s'", name);
  }
  return NULL;
}

tf_status tf_compile_args_set(tf_compile_args *args, const char *name, const char *value) {
  const int arity = tf_compile_args_arity(name);
  if (arity < 0)
    return BAD_VALUE("unknown compile option '%s' (tightfit compile --help lists them)", name);
  if (arity == 1 && !value)
    return BAD_VALUE("%s needs a value", name);
  if (arity == 0 && value)
    return BAD_VALUE("%s takes no value (got '%s')", name, value);
  if (strcmp(name, "--json") == 0)
    args->json = true;
  else if (strcmp(name, "--allow-offload") == 0)
    args->allow_offload = true;
  else if (strcmp(name, "--inference") == 0)
    args->options.training = false;
  else if (strcmp(name, "--update-in-backward") == 0)
    args->options.update_in_backward = TF_CHOICE_ON;
  else if (strcmp(name, "--smallest") == 0)
    args->smallest = true;
  else if (strcmp(name, "--no-smallest") == 0)
    args->smallest = false;
  else if (strcmp(name, "--no-update-in-backward") == 0)
    args->update_in_backward_off = true;
  else if (strcmp(name, "--no-half-kernels") == 0)
    args->no_half_kernels = true;
  if (arity == 0)
    return NULL;
  bool known = true;
  tf_status status = set_precision_option(args, name, value, &known);
  if (known)
    return status;
  known = true;
  status = set_training_option(args, name, value, &known);
  return known ? status : set_target_option(args, name, value);
}

bool tf_compile_args_take(tf_compile_args *args, tf_cli_args *walk) {
  const char *name = NULL, *value = NULL;
  for (size_t k = 0; k < sizeof(compile_options) / sizeof(compile_options[0]) && !name; k++) {
    const compile_option *option = &compile_options[k];
    if (option->takes_value ? tf_cli_option(walk->argc, walk->argv, &walk->i, option->name, &value, &walk->error)
                            : strcmp(walk->argv[walk->i], option->name) == 0)
      name = option->name;
  }
  if (!name)
    return false;
  if (walk->error) /* a missing value, already reported */
    return true;
  tf_status status = tf_compile_args_set(args, name, value);
  if (status) {
    tf_cli_usage_error(walk->command, "%s", tf_status_message(status));
    tf_status_free(status);
    walk->error = true;
  }
  return true;
}

tf_status tf_compile_args_run(const tf_compile_args *args, tf_plan **plan, tf_budget_result *search) {
  *plan = NULL;
  if (search)
    memset(search, 0, sizeof(*search));
  if (args->global_batch > 0 && args->budget < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--global-batch needs --budget SIZE");
  if (args->allow_lora_rank > 0 && args->global_batch <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--allow-lora lets the --global-batch search choose LoRA; give --global-batch G (or say "
                         "--lora R to compile with it)");
  if (args->allow_lora_rank > 0 && args->options.lora_rank > 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--allow-lora and --lora both set LoRA: give one");
  if (args->allow_offload && args->global_batch <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--allow-offload lets the --global-batch search put the optimizer state in host memory; give "
                         "--global-batch G (or say --offload optimizer to compile with it)");
  if (args->allow_optimizer_8bit && args->global_batch <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--allow-optimizer lets the --global-batch search choose 8-bit AdamW state; give "
                         "--global-batch G (or say --optimizer adamw8bit to compile with it)");
  if (args->allow_precision && args->global_batch <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--allow-precision lets the --global-batch search choose; give --global-batch G (or say "
                         "--precision P to compile in P)");
  tf_graph *g;
  TF_RETURN_IF_ERROR(tf_graph_load(args->graph_path, &g));
  tf_compile_options options = args->options;
  options.bindings = args->bindings[0] ? args->bindings : NULL;
  options.freeze = args->freeze;
  options.freeze_count = args->n_freeze;
  options.train_only = args->train_only;
  options.train_only_count = args->n_train_only;
  options.lora_targets = args->lora_targets;
  options.lora_target_count = args->n_lora_targets;
  if (args->no_half_kernels)
    memset(options.target.half_kernels, 0, sizeof(options.target.half_kernels));
  if (args->smallest && options.update_in_backward == TF_CHOICE_OFF && !args->update_in_backward_off)
    options.update_in_backward = TF_CHOICE_SMALLEST;
  if (args->smallest && !args->fuse_loss_given)
    options.fuse_loss = TF_FUSE_LOSS_SMALLEST;
  tf_status status = apply_overrides(args, g);
  if (!status && args->global_batch > 0) {
    tf_budget_options budget = {.base = options,
                                .budget = args->budget,
                                .global_batch = args->global_batch,
                                .allow_remat = true,
                                .allow_precision = args->allow_precision,
                                .allow_lora_rank = args->allow_lora_rank,
                                .allow_optimizer_8bit = args->allow_optimizer_8bit,
                                .allow_offload = args->allow_offload,
                                .precision = args->allowed_precision};
    tf_budget_result local;
    status = tf_compile_budget(g, &budget, plan, search ? search : &local);
  } else if (!status) {
    if (options.remat == TF_REMAT_AUTO) {
      if (args->budget < 0)
        status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "--remat auto needs --budget SIZE");
      options.remat_budget = args->budget;
    }
    if (!status)
      status = tf_compile(g, &options, plan);
  }
  tf_graph_destroy(g);
  /* The graph's folder, where its external initializers' relative files start: a plan written
   * elsewhere and run from anywhere still finds them (runtime/weights_path.h). */
  char folder[4096], absolute[PATH_MAX];
  if (!status && realpath(tf_cli_folder_of(args->graph_path, folder, sizeof(folder)), absolute)) {
    (*plan)->graph_dir = strdup(absolute);
    if (!(*plan)->graph_dir) {
      tf_plan_destroy(*plan);
      *plan = NULL;
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for the graph's folder");
    }
  }
  return status ? tf_status_prefix(status, "%s", args->graph_path) : NULL;
}

static void print_overhead_json(const tf_plan *plan, tf_json *json) {
  tf_json_begin_array(json, "overhead");
  for (int32_t i = 0; i < plan->overhead.n_parts; i++) {
    const tf_overhead_part *part = &plan->overhead.parts[i];
    tf_json_begin_object(json, NULL);
    tf_json_string(json, "name", part->name);
    tf_json_int(json, "bytes", part->bytes);
    tf_json_string(json, "source", part->source);
    tf_json_end_object(json);
  }
  tf_json_end_array(json);
  tf_json_int(json, "overhead_bytes", tf_plan_overhead_bytes(plan));
  tf_json_int(json, "device_total_bytes", tf_plan_device_total(plan));
}

static void print_line(const char *label, int64_t bytes) {
  char text[32];
  fprintf(tf_cli_out(), "  %-16s %12s  (%" PRId64 " bytes)\n", label, tf_cli_bytes(bytes, text, sizeof(text)), bytes);
}

/* The first word of a part's source: "default", "exact" or "measured" (report prints it whole). */
static const char *kind_of_source(const char *source, char *word, size_t size) {
  size_t n = strcspn(source, ":");
  snprintf(word, size, "%.*s", (int)(n < size ? n : size - 1), source);
  return word;
}

/* "regions + overhead parts = device total", one line each; a target without overhead says so. */
static void print_overhead_text(const tf_plan *plan) {
  if (plan->overhead.n_parts == 0) {
    fprintf(tf_cli_out(), "  device overhead: none on the %s target (device total = total)\n", plan->target);
    return;
  }
  char text[32], word[32];
  for (int32_t i = 0; i < plan->overhead.n_parts; i++) {
    const tf_overhead_part *part = &plan->overhead.parts[i];
    fprintf(tf_cli_out(), "  + %-14s %12s  (%" PRId64 " bytes, %s)\n", part->name,
            tf_cli_bytes(part->bytes, text, sizeof(text)), part->bytes,
            kind_of_source(part->source, word, sizeof(word)));
  }
  print_line("device total", tf_plan_device_total(plan));
}

void tf_compile_args_print_memory(const tf_plan *plan, tf_json *json) {
  int64_t total = tf_plan_total_bytes(plan);
  const tf_plan_report *r = &plan->report;
  double ratio =
      r->arena_lower_bound > 0 ? (double)plan->region_bytes[TF_REGION_ARENA] / (double)r->arena_lower_bound : 1.0;
  if (json) {
    tf_json_string(json, "target", plan->target);
    tf_json_int(json, "total_bytes", total);
    tf_json_begin_object(json, "regions");
    for (int r_index = 0; r_index < TF_REGION_COUNT; r_index++)
      tf_json_int(json, tf_region_name((tf_region)r_index), plan->region_bytes[r_index]);
    tf_json_end_object(json);
    print_overhead_json(plan, json);
    tf_json_int(json, "host_bytes", plan->host_bytes);
    tf_json_int(json, "host_moved_bytes_per_step", tf_plan_host_moved_bytes(plan));
    tf_json_int(json, "arena_lower_bound", r->arena_lower_bound);
    tf_json_int(json, "arena_naive", r->arena_naive);
    tf_json_double(json, "arena_over_lower_bound", ratio);
    return;
  }
  char a[32], b[32], c[32];
  for (int r_index = 0; r_index < TF_REGION_COUNT; r_index++)
    print_line(tf_region_name((tf_region)r_index), plan->region_bytes[r_index]);
  print_line(plan->overhead.n_parts ? "regions total" : "total", total);
  print_overhead_text(plan);
  if (plan->n_host_steps > 0) {
    char host[32], moved[32];
    fprintf(tf_cli_out(),
            "  host memory  %16s  (%" PRId64 " bytes: the offloaded %s; %s moved between device and host per "
            "step)\n",
            tf_cli_bytes(plan->host_bytes, host, sizeof(host)), plan->host_bytes, tf_plan_host_contents(plan),
            tf_cli_bytes(tf_plan_host_moved_bytes(plan), moved, sizeof(moved)));
  }
  fprintf(tf_cli_out(), "  arena %s vs lower bound %s (x%.3f); without reuse %s\n",
          tf_cli_bytes(plan->region_bytes[TF_REGION_ARENA], a, sizeof(a)),
          tf_cli_bytes(r->arena_lower_bound, b, sizeof(b)), ratio, tf_cli_bytes(r->arena_naive, c, sizeof(c)));
}

void tf_compile_args_print_shortfall(const tf_compile_args *args, const tf_plan *plan, tf_json *json) {
  int64_t total = tf_plan_device_total(plan);
  if (json) {
    tf_json_bool(json, "fits", false);
    tf_json_int(json, "budget_bytes", args->budget);
    tf_json_int(json, "shortfall_bytes", total - args->budget);
    return;
  }
  char a[32], b[32], c[32];
  fprintf(tf_cli_out(), "%s: does not fit: %s needs %s (device total), budget %s, short by %s\n", args->graph_path,
          args->global_batch > 0 ? "the smallest plan found" : "the plan", tf_cli_bytes(total, a, sizeof(a)),
          tf_cli_bytes(args->budget, b, sizeof(b)), tf_cli_bytes(total - args->budget, c, sizeof(c)));
}
