/* The lowering driver: a table from op to the function that lowers it (the vk_lower*.c files, as
 * the op table names them), the dtype policy, and the helpers every family uses. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/ops.h"
#include "core/workspace.h"

/* The op table's vulkan column (core/op_table.h): vk_lower_<vulkan>. */
#define LOWERING(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias, workspace,     \
                 vjp, cpu, cuda, vulkan, ...)                                                                          \
  [TF_OP_##ID] = vk_lower_##vulkan,
static const vk_lower_fn lowerings[TF_OP_COUNT] = {TF_OP_TABLE(LOWERING)};
#undef LOWERING

/* Bindings each shader may write. One SPIR-V module serves several passes (norm.comp's statistics,
 * parameter and input passes), and a write in any pass counts for every dispatch of the module, as
 * synchronization validation sees it: the recorder places its barriers by these masks. */
static const uint32_t writable_bindings[VK_SHADER_COUNT] = {
    [VK_SHADER_binary] = 0x4,
    [VK_SHADER_unary] = 0x4,
    [VK_SHADER_layout] = 0x2,
    [VK_SHADER_reduce] = 0x8,
    [VK_SHADER_reduce_split] = 0x18, /* the output; the partials */
    [VK_SHADER_softmax] = 0x4,
    [VK_SHADER_norm] = 0x38,
    [VK_SHADER_norm_split] = 0x70, /* dgamma, dbeta; the partials */
    [VK_SHADER_embedding] = 0x4,
    [VK_SHADER_matmul] = 0x4,
    [VK_SHADER_conv_forward] = 0x4,
    [VK_SHADER_conv_grad_weight] = 0x4,
    [VK_SHADER_conv_grad_input] = 0x4,
    [VK_SHADER_attention] = 0x70,
    [VK_SHADER_attention_tiled] = 0x70,
    [VK_SHADER_attention_tiled_d64] = 0x70,
    [VK_SHADER_attention_tiled_d32] = 0x70,
    [VK_SHADER_pool] = 0x4,
    [VK_SHADER_loss] = 0x8,
    [VK_SHADER_optimizer] = 0xd,
    [VK_SHADER_adamw8bit] = 0x3d,
    [VK_SHADER_dropout] = 0x2,
    [VK_SHADER_linear_loss] = 0xb0,
    [VK_SHADER_linear_loss_half_f16] = 0x34,
    [VK_SHADER_linear_loss_half_bf16] = 0x34,
    [VK_SHADER_loss_half_f16] = 0x8,
    [VK_SHADER_loss_half_bf16] = 0x8,
    [VK_SHADER_loss_sg_half_f16] = 0x8,
    [VK_SHADER_loss_sg_half_bf16] = 0x8,
    [VK_SHADER_layout16] = 0x2,
    [VK_SHADER_layout8] = 0x2,
    [VK_SHADER_batch_norm] = 0x38,        /* y (forward); dx, dgamma, dbeta (gradient) */
    [VK_SHADER_batch_norm_running] = 0x6, /* running_mean, running_var, in place */
    [VK_SHADER_ctc] = 0x30,               /* the workspace, the loss or dlogits */
};

/* Each shader with a subgroup variant (shaders/README.md, "Subgroup variants"), and that variant: the
 * same bindings, push constants and writes, another SPIR-V module. */
static const struct {
  vk_shader plain, subgroup;
} subgroup_variants[] = {
    {.plain = VK_SHADER_matmul, .subgroup = VK_SHADER_matmul_sg},
    {.plain = VK_SHADER_conv_forward, .subgroup = VK_SHADER_conv_forward_sg},
    {.plain = VK_SHADER_conv_grad_weight, .subgroup = VK_SHADER_conv_grad_weight_sg},
    {.plain = VK_SHADER_conv_grad_input, .subgroup = VK_SHADER_conv_grad_input_sg},
    {.plain = VK_SHADER_softmax, .subgroup = VK_SHADER_softmax_sg},
    {.plain = VK_SHADER_loss, .subgroup = VK_SHADER_loss_sg},
    {.plain = VK_SHADER_norm, .subgroup = VK_SHADER_norm_sg},
    {.plain = VK_SHADER_reduce, .subgroup = VK_SHADER_reduce_sg},
    {.plain = VK_SHADER_attention, .subgroup = VK_SHADER_attention_sg},
    {.plain = VK_SHADER_batch_norm, .subgroup = VK_SHADER_batch_norm_sg},
    {.plain = VK_SHADER_batch_norm_running, .subgroup = VK_SHADER_batch_norm_running_sg},
};

vk_shader vk_variant(const vk_lower *l, vk_shader plain) {
  for (size_t i = 0; l->limits->subgroup_size && i < sizeof(subgroup_variants) / sizeof(subgroup_variants[0]); i++)
    if (subgroup_variants[i].plain == plain)
      return subgroup_variants[i].subgroup;
  return plain;
}

/* Each shader with f16 and bf16 storage variants (shaders/common.glsl: ELEMENT_F16, ELEMENT_BF16;
 * backends/vulkan/CMakeLists.txt, TF_HALF_SHADERS): the same bindings, push constants and writes,
 * every floating operand 16-bit. A step whose floating data is all one half type runs them
 * (half_variant); the Vulkan target's half-kernel ops (targets/target.c) are the ops whose
 * lowerings emit only these, layout moves and copies, and whose shaders write each output element
 * once or keep what they read back as exact f32 bits (the row statistics of the norms' and
 * attention's gradients); embedding's gradient, whose f32 shader keeps sums in its output, sums in
 * f32 registers on half data (vk_lower_model.c). */
static const struct {
  vk_shader f32, f16, bf16;
} half_variants[] = {
    {VK_SHADER_binary, VK_SHADER_binary_f16, VK_SHADER_binary_bf16},
    {VK_SHADER_unary, VK_SHADER_unary_f16, VK_SHADER_unary_bf16},
    {VK_SHADER_softmax, VK_SHADER_softmax_f16, VK_SHADER_softmax_bf16},
    {VK_SHADER_softmax_sg, VK_SHADER_softmax_sg_f16, VK_SHADER_softmax_sg_bf16},
    {VK_SHADER_matmul, VK_SHADER_matmul_f16, VK_SHADER_matmul_bf16},
    {VK_SHADER_matmul_sg, VK_SHADER_matmul_sg_f16, VK_SHADER_matmul_sg_bf16},
    {VK_SHADER_matmul_big, VK_SHADER_matmul_big_f16, VK_SHADER_matmul_big_bf16},
    {VK_SHADER_reduce_split, VK_SHADER_reduce_split_f16, VK_SHADER_reduce_split_bf16},
    {VK_SHADER_norm_split, VK_SHADER_norm_split_f16, VK_SHADER_norm_split_bf16},
    {VK_SHADER_dropout, VK_SHADER_dropout_f16, VK_SHADER_dropout_bf16},
    {VK_SHADER_reduce, VK_SHADER_reduce_f16, VK_SHADER_reduce_bf16},
    {VK_SHADER_reduce_sg, VK_SHADER_reduce_sg_f16, VK_SHADER_reduce_sg_bf16},
    {VK_SHADER_norm, VK_SHADER_norm_f16, VK_SHADER_norm_bf16},
    {VK_SHADER_norm_sg, VK_SHADER_norm_sg_f16, VK_SHADER_norm_sg_bf16},
    {VK_SHADER_attention, VK_SHADER_attention_f16, VK_SHADER_attention_bf16},
    {VK_SHADER_attention_sg, VK_SHADER_attention_sg_f16, VK_SHADER_attention_sg_bf16},
    {VK_SHADER_attention_tiled, VK_SHADER_attention_tiled_f16, VK_SHADER_attention_tiled_bf16},
    {VK_SHADER_attention_tiled_d64, VK_SHADER_attention_tiled_d64_f16, VK_SHADER_attention_tiled_d64_bf16},
    {VK_SHADER_attention_tiled_d32, VK_SHADER_attention_tiled_d32_f16, VK_SHADER_attention_tiled_d32_bf16},
    {VK_SHADER_embedding, VK_SHADER_embedding_f16, VK_SHADER_embedding_bf16},
    {VK_SHADER_conv_forward, VK_SHADER_conv_forward_f16, VK_SHADER_conv_forward_bf16},
    {VK_SHADER_conv_forward_sg, VK_SHADER_conv_forward_sg_f16, VK_SHADER_conv_forward_sg_bf16},
    {VK_SHADER_conv_grad_weight, VK_SHADER_conv_grad_weight_f16, VK_SHADER_conv_grad_weight_bf16},
    {VK_SHADER_conv_grad_weight_sg, VK_SHADER_conv_grad_weight_sg_f16, VK_SHADER_conv_grad_weight_sg_bf16},
    {VK_SHADER_conv_grad_input, VK_SHADER_conv_grad_input_f16, VK_SHADER_conv_grad_input_bf16},
    {VK_SHADER_batch_norm, VK_SHADER_batch_norm_f16, VK_SHADER_batch_norm_bf16},
    {VK_SHADER_batch_norm_sg, VK_SHADER_batch_norm_sg_f16, VK_SHADER_batch_norm_sg_bf16},
    {VK_SHADER_batch_norm_running, VK_SHADER_batch_norm_running_f16, VK_SHADER_batch_norm_running_bf16},
    {VK_SHADER_batch_norm_running_sg, VK_SHADER_batch_norm_running_sg_f16, VK_SHADER_batch_norm_running_sg_bf16},
    {VK_SHADER_conv_grad_input_sg, VK_SHADER_conv_grad_input_sg_f16, VK_SHADER_conv_grad_input_sg_bf16},
    {VK_SHADER_pool, VK_SHADER_pool_f16, VK_SHADER_pool_bf16},
};

/* Each shader with variants whose q, k and v inputs are f16 or bf16 and every other operand f32
 * (shaders/common.glsl: INPUT_F16, INPUT_BF16): attention's gradient reading the half q, k, v a
 * --precision plan stored (half_qkv). The same bindings, push constants and writes. */
static const struct {
  vk_shader f32, f16, bf16;
} input_variants[] = {
    {VK_SHADER_attention, VK_SHADER_attention_in_f16, VK_SHADER_attention_in_bf16},
    {VK_SHADER_attention_sg, VK_SHADER_attention_sg_in_f16, VK_SHADER_attention_sg_in_bf16},
    {VK_SHADER_attention_tiled, VK_SHADER_attention_tiled_in_f16, VK_SHADER_attention_tiled_in_bf16},
    {VK_SHADER_attention_tiled_d64, VK_SHADER_attention_tiled_d64_in_f16, VK_SHADER_attention_tiled_d64_in_bf16},
    {VK_SHADER_attention_tiled_d32, VK_SHADER_attention_tiled_d32_in_f16, VK_SHADER_attention_tiled_d32_in_bf16},
};

/* The shader a subgroup, big-tile, half or half-input variant was compiled from (itself for a plain
 * shader). */
static vk_shader plain_of(vk_shader shader) {
  for (size_t i = 0; i < sizeof(half_variants) / sizeof(half_variants[0]); i++)
    if (half_variants[i].f16 == shader || half_variants[i].bf16 == shader)
      shader = half_variants[i].f32;
  for (size_t i = 0; i < sizeof(input_variants) / sizeof(input_variants[0]); i++)
    if (input_variants[i].f16 == shader || input_variants[i].bf16 == shader)
      shader = input_variants[i].f32;
  for (size_t i = 0; i < sizeof(subgroup_variants) / sizeof(subgroup_variants[0]); i++)
    if (subgroup_variants[i].subgroup == shader)
      return subgroup_variants[i].plain;
  if (shader == VK_SHADER_matmul_big)
    return VK_SHADER_matmul;
  return shader == VK_SHADER_layout16 || shader == VK_SHADER_layout8 ? VK_SHADER_layout : shader;
}

/* The `half` (f16 or bf16) storage variant of an f32 shader, or VK_SHADER_COUNT when it has none. */
static vk_shader half_variant(vk_shader shader, tf_dtype half) {
  for (size_t i = 0; i < sizeof(half_variants) / sizeof(half_variants[0]); i++)
    if (half_variants[i].f32 == shader)
      return half == TF_F16 ? half_variants[i].f16 : half_variants[i].bf16;
  return VK_SHADER_COUNT;
}

static bool moves_bytes_only(tf_op op) {
  return op == TF_OP_RESHAPE || op == TF_OP_TRANSPOSE || op == TF_OP_CONCAT || op == TF_OP_SLICE ||
         op == TF_OP_EXPAND || op == TF_OP_SLICE_GRAD;
}

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

/* The buffer of operand k (inputs first, then outputs) of the step. */
static const tf_plan_buffer *operand(const vk_lower *l, int32_t k) {
  return vk_buffer(l, k < l->step->n_inputs ? vk_in(l, k) : vk_out(l, k - l->step->n_inputs));
}

static bool read_for_shape_only(const vk_lower *l, int32_t k) {
  return k < l->step->n_inputs && tf_op_input_shape_only(l->step->op, k);
}

/* Operands kept in f32 whatever the data's type, which a half variant binds as f32 too:
 * batch_norm_running's running statistics (shaders/batch_norm_running.comp; its lowering checks
 * that they are f32). */
static bool f32_in_every_variant(const vk_lower *l, int32_t k) {
  return l->step->op == TF_OP_BATCH_NORM_RUNNING && (k == 1 || k == 2);
}

/* The half type (f16, bf16) of a step whose every floating operand has it (a half-kernel step of
 * the compiler, targets/target.c; the operands f32_in_every_variant aside), else TF_F32. Casts
 * and the layout moves are not such steps: they take their dtypes one by one (check_dtypes). */
static tf_dtype half_data(const vk_lower *l) {
  if (l->step->op == TF_OP_CAST || l->step->op == TF_OP_CAST_INTO || moves_bytes_only(l->step->op))
    return TF_F32;
  tf_dtype half = TF_F32;
  for (int32_t k = 0; k < l->step->n_inputs + l->step->n_outputs; k++) {
    const tf_dtype dtype = operand(l, k)->dtype;
    if (read_for_shape_only(l, k) || f32_in_every_variant(l, k) || !(dtype == TF_F32 || is_half(dtype)))
      continue;
    if (dtype == TF_F32 || (half != TF_F32 && half != dtype))
      return TF_F32;
    half = dtype;
  }
  return half;
}

/* The half type of the q, k and v of an attention gradient that reads them beside an f32 dy and
 * writes f32 gradients (a --precision plan reading what it stored in half: compiler/precision.c),
 * else TF_F32. */
static tf_dtype half_qkv(const vk_lower *l) {
  if (l->step->op != TF_OP_ATTENTION_GRAD || l->step->n_inputs != 4)
    return TF_F32;
  const tf_dtype half = operand(l, 0)->dtype;
  if (!is_half(half) || operand(l, 1)->dtype != half || operand(l, 2)->dtype != half)
    return TF_F32;
  for (int32_t k = 3; k < l->step->n_inputs + l->step->n_outputs; k++)
    if (operand(l, k)->dtype != TF_F32)
      return TF_F32;
  return half;
}

/* Ops that read ids or labels, which may be i32 or i64 (an i64 read as its two words: one that does
 * not fit in 32 bits is out of range, as on the CPU). */
static bool takes_indices(tf_op op) {
  return lowerings[op] == vk_lower_embedding || lowerings[op] == vk_lower_linear_cross_entropy ||
         op == TF_OP_CROSS_ENTROPY || op == TF_OP_CROSS_ENTROPY_GRAD || lowerings[op] == vk_lower_ctc;
}

/* Ops whose shaders read back sums they wrote to an output (partial sums, in-place sums; the row
 * statistics of the norms' and attention's gradients are kept as exact f32 bits instead): their
 * half variants would round those, so a plan on half data runs them between casts
 * (the Vulkan target's half kernels leave them out, targets/target.c); a plan file that does not is
 * refused. */
static bool keeps_partials(tf_op op) {
  switch (op) {
  case TF_OP_EMBEDDING_GRAD_ACCUMULATE:
  case TF_OP_MATMUL_ACCUMULATE:
  case TF_OP_ACCUMULATE:
  case TF_OP_GLOBAL_NORM_SQ: return true;
  default: return false;
  }
}

/* Steps on half data read and write 16-bit elements: the device must allow 16-bit storage access. */
static tf_status check_storage16(const vk_lower *l, tf_dtype dtype) {
  if (l->limits->storage16)
    return NULL;
  return vk_refuse(l,
                   "it reads or writes %s elements directly, and this device has no storageBuffer16BitAccess "
                   "(or TIGHTFIT_VULKAN_16BIT=0); compile the plan with --no-half-kernels (its half-precision "
                   "data then moves through f32 casts)",
                   tf_dtype_name(dtype));
}

/* Layout ops on u8 data (a bool mask) move bytes: the device must allow 8-bit storage access. */
static tf_status check_storage8(const vk_lower *l, const tf_plan_buffer *b) {
  if (l->limits->storage8)
    return NULL;
  return vk_refuse(l,
                   "it moves the u8 elements of '%s', and this device has no VK_KHR_8bit_storage "
                   "storageBuffer8BitAccess (or TIGHTFIT_VULKAN_8BIT=0)",
                   b->name);
}

/* The shaders compute in f32 and read i32 or i64 ids and labels; layout ops move 1-, 2-, 4- and 8-byte
 * elements of any dtype; cast also reads and writes f16 and bf16 (which pairs: vk_lower_cast), the
 * storage of half-precision plans; a step whose floating data is all f16 or all bf16 runs its
 * shaders' half variants (half_variants, after lowering). */
static tf_status check_dtypes(const vk_lower *l) {
  const tf_dtype half = half_data(l);
  const tf_dtype x = l->step->n_inputs > 0 ? operand(l, 0)->dtype : TF_F32;
  if ((lowerings[l->step->op] == vk_lower_linear_cross_entropy || lowerings[l->step->op] == vk_lower_loss) &&
      is_half(x)) /* half data beside an f32 loss or dloss: the lowering checks the rest */
    return check_storage16(l, x);
  if (half != TF_F32 && keeps_partials(l->step->op))
    return vk_refuse(l,
                     "its data is %s, and its shader keeps statistics or sums in its outputs, which %s storage "
                     "would round; compile the plan for the vulkan target (which runs it on f32 copies between casts)",
                     tf_dtype_name(half), tf_dtype_name(half));
  if (half != TF_F32)
    return check_storage16(l, half);
  const tf_dtype qkv = half_qkv(l);
  if (qkv != TF_F32)
    return check_storage16(l, qkv);
  for (int32_t k = 0; k < l->step->n_inputs + l->step->n_outputs; k++) {
    if (read_for_shape_only(l, k))
      continue;
    const tf_plan_buffer *b = operand(l, k);
    if (moves_bytes_only(l->step->op)) {
      if (l->step->op == TF_OP_RESHAPE || tf_dtype_size(b->dtype) == 4 || tf_dtype_size(b->dtype) == 8)
        continue;
      if (tf_dtype_size(b->dtype) == 2) {
        TF_RETURN_IF_ERROR(check_storage16(l, b->dtype));
        continue;
      }
      if (b->dtype == TF_U8) {
        TF_RETURN_IF_ERROR(check_storage8(l, b));
        continue;
      }
    } else if (b->dtype == TF_F32 || b->dtype == TF_I32 ||
               (b->dtype == TF_I64 && k < l->step->n_inputs && takes_indices(l->step->op))) {
      continue;
    } else if ((l->step->op == TF_OP_CAST || l->step->op == TF_OP_CAST_INTO) &&
               (is_half(b->dtype) || b->dtype == TF_U8 || b->dtype == TF_I64)) {
      continue; /* vk_lower_cast says which pairs */
    } else if (l->step->op == TF_OP_ADAMW8BIT && b->dtype == TF_U8) {
      continue; /* the moments' codes, which adamw8bit.comp reads four to a uint */
    }
    return vk_refuse(l,
                     "buffer '%s' is %s; the Vulkan shaders take f32 (and f16/bf16) data and i32 or i64 ids and labels",
                     b->name, tf_dtype_name(b->dtype));
  }
  return NULL;
}

/* A step on half data: each dispatch it lowered to [first, end) runs its shader's half variant;
 * refused when a shader has none (the op computes in f32 between casts, which the compiler inserts
 * for ops outside the target's half-kernel set). */
static tf_status use_half_variants(const vk_lower *l, int32_t first, tf_dtype half) {
  for (int32_t c = first; c < l->program->n_commands; c++) {
    vk_command *command = &l->program->commands[c];
    if (command->kind != VK_COMMAND_DISPATCH)
      continue;
    const vk_shader variant = half_variant(command->shader, half);
    if (variant == VK_SHADER_COUNT)
      return vk_refuse(l,
                       "its data is %s and shader '%s' has no %s variant; compile the plan for the vulkan target "
                       "(which puts this op between f32 casts) or with --no-half-kernels",
                       tf_dtype_name(half), vk_shader_name(command->shader), tf_dtype_name(half));
    command->shader = variant;
  }
  return NULL;
}

/* An attention gradient on half q, k, v (half_qkv): each dispatch it lowered to [first, end) runs
 * its shader's half-input variant. */
static void use_input_variants(const vk_lower *l, int32_t first, tf_dtype half) {
  for (int32_t c = first; c < l->program->n_commands; c++) {
    vk_command *command = &l->program->commands[c];
    for (size_t i = 0; command->kind == VK_COMMAND_DISPATCH && i < sizeof(input_variants) / sizeof(input_variants[0]);
         i++)
      if (input_variants[i].f32 == command->shader) {
        command->shader = half == TF_F16 ? input_variants[i].f16 : input_variants[i].bf16;
        break;
      }
  }
}

tf_status vk_refuse(const vk_lower *l, const char *fmt, ...) {
  char why[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(why, sizeof(why), fmt, args);
  va_end(args);
  return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: step %d '%s' (%s): %s", l->index, l->step->name,
                       tf_op_name(l->step->op), why);
}

/* A new, cleared command at the end of the program; NULL when host memory runs out. */
static vk_command *append(vk_lower *l) {
  vk_program *p = l->program;
  if (p->n_commands == p->capacity) {
    int32_t capacity = p->capacity ? 2 * p->capacity : 256;
    vk_command *grown = realloc(p->commands, sizeof(vk_command) * (size_t)capacity);
    if (!grown)
      return NULL;
    p->commands = grown;
    p->capacity = capacity;
  }
  vk_command *c = &p->commands[p->n_commands++];
  memset(c, 0, sizeof(*c));
  for (int i = 0; i < VK_OPERANDS; i++)
    c->buffers[i] = -1;
  return c;
}

static tf_status out_of_memory(const vk_lower *l) {
  return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot hold the commands of step %d", l->index);
}

tf_status vk_emit_dispatch(vk_lower *l, vk_shader shader, int32_t n, const int32_t *buffers, uint32_t writes,
                           const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  uint32_t writable = writable_bindings[plain_of(shader)];
  if (writable == 0)
    return tf_status_new(TF_ERR_INTERNAL, "vulkan: shader '%s' has no entry in writable_bindings (vk_lower.c)",
                         vk_shader_name(shader));
  if (n > VK_OPERANDS || push_bytes > sizeof(((vk_command *)0)->push))
    return tf_status_new(TF_ERR_INTERNAL, "vulkan: a dispatch of %d bindings and %zu push bytes", n, push_bytes);
  if (gx == 0 || gy == 0 || gz == 0)
    return NULL;
  vk_command *c = append(l);
  if (!c)
    return out_of_memory(l);
  c->kind = VK_COMMAND_DISPATCH;
  c->shader = shader;
  c->n_bindings = n;
  for (int32_t i = 0; i < n; i++)
    c->buffers[i] = buffers[i];
  c->writes = writes | (writable & ((1u << n) - 1u));
  memcpy(c->push, push, push_bytes);
  c->groups[0] = gx;
  c->groups[1] = gy;
  c->groups[2] = gz;
  return NULL;
}

tf_status vk_emit_fill(vk_lower *l, int32_t buffer) {
  if (vk_buffer(l, buffer)->bytes == 0)
    return NULL;
  vk_command *c = append(l);
  if (!c)
    return out_of_memory(l);
  c->kind = VK_COMMAND_FILL;
  c->buffers[0] = buffer;
  return NULL;
}

tf_status vk_emit_copy(vk_lower *l, int32_t from, int32_t to, int64_t bytes) {
  const tf_plan_buffer *a = vk_buffer(l, from), *b = vk_buffer(l, to);
  if (bytes == 0 || (a->region == b->region && a->offset == b->offset))
    return NULL;
  vk_command *c = append(l);
  if (!c)
    return out_of_memory(l);
  c->kind = VK_COMMAND_COPY;
  c->buffers[0] = from;
  c->buffers[1] = to;
  c->bytes = bytes;
  return NULL;
}

int64_t vk_count(const tf_plan_buffer *b) {
  int64_t count = 1;
  for (int32_t d = 0; d < b->rank; d++)
    count *= b->shape[d];
  return count;
}

uint32_t vk_groups(int64_t items, int64_t per_group) {
  int64_t groups = (items + per_group - 1) / per_group;
  if (groups < 1)
    return 1;
  return groups > VK_GROUP_LIMIT ? VK_GROUP_LIMIT : (uint32_t)groups;
}

tf_status vk_check_loops(const vk_lower *l, int64_t iterations) {
  if (l->limits->loop_limit > 0 && iterations > l->limits->loop_limit)
    return vk_refuse(l,
                     "its shader may run about %lld loop iterations per invocation, and this device (lavapipe) ends "
                     "every loop after %lld in all, silently; run this plan on a GPU or the CPU backend",
                     (long long)iterations, (long long)l->limits->loop_limit);
  return NULL;
}

bool vk_split_columns_on(const vk_lower *l, int64_t outputs, int64_t workspace_bytes) {
  return l->limits->split_columns && workspace_bytes > 0 && vk_workspace_bytes(l) >= workspace_bytes &&
         (outputs + TF_VULKAN_SPLIT_COLUMNS - 1) / TF_VULKAN_SPLIT_COLUMNS <= VK_GROUP_LIMIT;
}

int64_t vk_grid_rounds(int64_t items, int64_t per_group) {
  int64_t groups = vk_groups(items, per_group);
  return (items + groups * per_group - 1) / (groups * per_group);
}

tf_status vk_check_count(const vk_lower *l, int64_t count, const char *what) {
  if (count < 0 || count >= ((int64_t)1 << 31))
    return vk_refuse(l, "%s has %lld elements; the shaders index with 31 bits", what, (long long)count);
  return NULL;
}

int64_t vk_workspace_bytes(const vk_lower *l) {
  return l->step->workspace >= 0 ? vk_buffer(l, l->step->workspace)->bytes : 0;
}

tf_status vk_check_workspace(const vk_lower *l, int64_t needed) {
  const int64_t given = vk_workspace_bytes(l);
  if (given < needed)
    return vk_refuse(l,
                     "its Vulkan shaders need %lld workspace bytes and the plan gives it %lld: this plan was compiled "
                     "for the '%s' target; compile it for 'vulkan'",
                     (long long)needed, (long long)given, l->plan->target ? l->plan->target : "?");
  return NULL;
}

void vk_collapse(int32_t *rank, int64_t *shape, int n, int64_t (*strides)[TF_MAX_RANK]) {
  int32_t kept = 0;
  for (int32_t i = 0; i < *rank; i++) {
    if (shape[i] == 1)
      continue;
    bool merge = kept > 0;
    for (int k = 0; merge && k < n; k++)
      merge = strides[k][kept - 1] == strides[k][i] * shape[i];
    if (merge) {
      shape[kept - 1] *= shape[i];
      for (int k = 0; k < n; k++)
        strides[k][kept - 1] = strides[k][i];
      continue;
    }
    shape[kept] = shape[i];
    for (int k = 0; k < n; k++)
      strides[k][kept] = strides[k][i];
    kept++;
  }
  if (kept == 0) {
    shape[0] = 1;
    for (int k = 0; k < n; k++)
      strides[k][0] = 0;
    kept = 1;
  }
  *rank = kept;
}

void vk_contiguous_strides(const tf_plan_buffer *b, int64_t *strides) {
  int64_t stride = 1;
  for (int32_t i = b->rank - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= b->shape[i];
  }
}

void vk_broadcast_strides(const tf_plan_buffer *b, int32_t rank, const int64_t *shape, int64_t *strides) {
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    int32_t axis = i - (rank - b->rank);
    int64_t dim = axis >= 0 ? b->shape[axis] : 1;
    strides[i] = dim == 1 && shape[i] != 1 ? 0 : stride;
    stride *= dim;
  }
}

uint32_t vk_float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/* The copies of the host steps marked in `host_copies` that run before device step `at` of the
 * micro-batch block (at == micro_steps: after its last step), in host-step order, appended to the
 * commands of the step being lowered. */
static tf_status emit_host_copies(vk_lower *l, const bool *host_copies, int32_t at) {
  const tf_plan *plan = l->plan;
  for (int32_t h = 0; host_copies && h < plan->n_host_steps; h++) {
    const tf_plan_step *copy = &plan->host_steps[h];
    if (!host_copies[h] || plan->host_at[h] != at)
      continue;
    const int32_t before = l->program->n_commands;
    TF_RETURN_IF_ERROR(vk_emit_copy(l, copy->inputs[0], copy->outputs[0], plan->buffers[copy->inputs[0]].bytes));
    if (l->program->n_commands > before)
      l->program->commands[before].host_copy = true;
  }
  return NULL;
}

tf_status vk_program_build(const tf_plan *plan, const vk_limits *limits, const bool *host_copies, vk_program *program) {
  memset(program, 0, sizeof(*program));
  program->step_first = calloc((size_t)plan->n_steps + 1, sizeof(int32_t));
  if (!program->step_first)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot lower %d steps", plan->n_steps);
  for (int32_t s = 0; s < plan->n_steps; s++) {
    vk_lower l = {.plan = plan, .step = &plan->steps[s], .index = s, .program = program, .limits = limits};
    program->step_first[s] = program->n_commands;
    if (s < plan->micro_steps)
      TF_RETURN_IF_ERROR(emit_host_copies(&l, host_copies, s));
    const int32_t lowered = program->n_commands;
    vk_lower_fn lower = (int)l.step->op >= 0 && l.step->op < TF_OP_COUNT ? lowerings[l.step->op] : NULL;
    if (!lower)
      return vk_refuse(&l, "the Vulkan backend has no shader for this op yet");
    TF_RETURN_IF_ERROR(check_dtypes(&l));
    // cppcheck-suppress returnDanglingLifetime ; a tf_status is a fresh heap object, not a view of l
    TF_RETURN_IF_ERROR(lower(&l));
    const tf_dtype half = half_data(&l), qkv = half_qkv(&l);
    if (half != TF_F32)
      TF_RETURN_IF_ERROR(use_half_variants(&l, lowered, half));
    else if (qkv != TF_F32)
      use_input_variants(&l, lowered, qkv);
    if (s == plan->micro_steps - 1)
      TF_RETURN_IF_ERROR(emit_host_copies(&l, host_copies, plan->micro_steps));
  }
  program->step_first[plan->n_steps] = program->n_commands;
  return NULL;
}

void vk_program_free(vk_program *program) {
  free(program->commands);
  free(program->step_first);
  memset(program, 0, sizeof(*program));
}
