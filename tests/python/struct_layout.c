/* Prints, as JSON, the C layout of every struct and the value of every enum constant that the
 * Python package mirrors by hand (python/tightfit/_lib.py): each struct's size and each member's
 * offset and size, by the member names the ctypes classes use. test_struct_layout.py compares. */
#include <stddef.h>
#include <stdio.h>

#include "tightfit/layers.h"
#include "tightfit/onnx.h"
#include "tightfit/plan_types.h"
#include "tightfit/runtime.h"
#include "tightfit/types.h"

static int structs_printed, members_printed;

static void open_struct(const char *python_name, const char *c_name, size_t size) {
  printf("%s\n    \"%s\": {\"c\": \"%s\", \"size\": %zu, \"members\": {", structs_printed++ ? "," : "", python_name,
         c_name, size);
  members_printed = 0;
}

static void member(const char *name, size_t offset, size_t size) {
  printf("%s\"%s\": [%zu, %zu]", members_printed++ ? ", " : "", name, offset, size);
}

static void close_struct(void) { printf("}}"); }

#define STRUCT(py, type) open_struct(#py, #type, sizeof(type))
#define MEMBER(type, field) member(#field, offsetof(type, field), sizeof(((type *)0)->field))

static void print_structs(void) {
  STRUCT(Dim, tf_dim), MEMBER(tf_dim, size), MEMBER(tf_dim, symbol), close_struct();
  STRUCT(Shape, tf_shape), MEMBER(tf_shape, rank), MEMBER(tf_shape, dims), close_struct();
  STRUCT(Init, tf_init), MEMBER(tf_init, kind), MEMBER(tf_init, a), MEMBER(tf_init, b), MEMBER(tf_init, file),
      MEMBER(tf_init, key), close_struct();
  STRUCT(TrainingConfig, tf_training_config);
  MEMBER(tf_training_config, optimizer), MEMBER(tf_training_config, learning_rate);
  MEMBER(tf_training_config, momentum), MEMBER(tf_training_config, beta1), MEMBER(tf_training_config, beta2);
  MEMBER(tf_training_config, epsilon), MEMBER(tf_training_config, weight_decay);
  MEMBER(tf_training_config, clip_norm), MEMBER(tf_training_config, global_batch);
  MEMBER(tf_training_config, accumulate_steps), MEMBER(tf_training_config, precision);
  MEMBER(tf_training_config, loss_scale), close_struct();
  STRUCT(ConvAttrs, tf_conv_attrs), MEMBER(tf_conv_attrs, stride), MEMBER(tf_conv_attrs, padding);
  MEMBER(tf_conv_attrs, dilation), MEMBER(tf_conv_attrs, output_padding), MEMBER(tf_conv_attrs, groups);
  close_struct();
  STRUCT(PoolAttrs, tf_pool_attrs), MEMBER(tf_pool_attrs, kernel), MEMBER(tf_pool_attrs, stride);
  MEMBER(tf_pool_attrs, padding), close_struct();
  STRUCT(BlockNames, tf_block_names), MEMBER(tf_block_names, ln_1), MEMBER(tf_block_names, qkv);
  MEMBER(tf_block_names, attn_out), MEMBER(tf_block_names, ln_2), MEMBER(tf_block_names, fc_in);
  MEMBER(tf_block_names, fc_out), MEMBER(tf_block_names, ln_cross), MEMBER(tf_block_names, cross_q);
  MEMBER(tf_block_names, cross_k), MEMBER(tf_block_names, cross_v), MEMBER(tf_block_names, cross_out);
  close_struct();
  STRUCT(BlockConfig, tf_block_config), MEMBER(tf_block_config, d_model), MEMBER(tf_block_config, heads);
  MEMBER(tf_block_config, ffn), MEMBER(tf_block_config, causal), MEMBER(tf_block_config, gelu_approximate);
  MEMBER(tf_block_config, epsilon), MEMBER(tf_block_config, init_std), MEMBER(tf_block_config, residual_init_std);
  MEMBER(tf_block_config, names), close_struct();
  STRUCT(PlanBuffer, tf_plan_buffer), MEMBER(tf_plan_buffer, name), MEMBER(tf_plan_buffer, role);
  MEMBER(tf_plan_buffer, region), MEMBER(tf_plan_buffer, offset), MEMBER(tf_plan_buffer, bytes);
  MEMBER(tf_plan_buffer, dtype), MEMBER(tf_plan_buffer, rank), MEMBER(tf_plan_buffer, shape);
  MEMBER(tf_plan_buffer, first_step), MEMBER(tf_plan_buffer, last_step), MEMBER(tf_plan_buffer, init);
  MEMBER(tf_plan_buffer, owner), MEMBER(tf_plan_buffer, io_twin), MEMBER(tf_plan_buffer, alias_of);
  MEMBER(tf_plan_buffer, unbatched), MEMBER(tf_plan_buffer, held_by), MEMBER(tf_plan_buffer, view_of);
  MEMBER(tf_plan_buffer, view_at), close_struct();
  /* PlanHead mirrors tf_plan's leading members only: its size is not tf_plan's */
  STRUCT(PlanHead, tf_plan), MEMBER(tf_plan, version), MEMBER(tf_plan, graph_name), MEMBER(tf_plan, target);
  MEMBER(tf_plan, alignment), MEMBER(tf_plan, region_bytes), MEMBER(tf_plan, n_buffers), MEMBER(tf_plan, buffers);
  MEMBER(tf_plan, n_steps), MEMBER(tf_plan, steps), MEMBER(tf_plan, micro_steps), MEMBER(tf_plan, accumulate);
  MEMBER(tf_plan, micro_batch), MEMBER(tf_plan, global_batch), close_struct();
  STRUCT(SessionOptions, tf_session_options), MEMBER(tf_session_options, backend);
  MEMBER(tf_session_options, device), MEMBER(tf_session_options, threads), MEMBER(tf_session_options, seed);
  MEMBER(tf_session_options, weights_dir), MEMBER(tf_session_options, loss_scale_growth_interval);
  MEMBER(tf_session_options, rank);
  close_struct();
  STRUCT(SessionMemory, tf_session_memory), MEMBER(tf_session_memory, planned_bytes);
  MEMBER(tf_session_memory, allocated_bytes), MEMBER(tf_session_memory, allocations);
  MEMBER(tf_session_memory, allocations_after_create), close_struct();
  STRUCT(SessionScaling, tf_session_scaling), MEMBER(tf_session_scaling, scaled);
  MEMBER(tf_session_scaling, loss_scale_log2), MEMBER(tf_session_scaling, previous_log2);
  MEMBER(tf_session_scaling, good_steps), MEMBER(tf_session_scaling, skipped_steps);
  MEMBER(tf_session_scaling, last_skipped), close_struct();
  STRUCT(OnnxOptions, tf_onnx_options), MEMBER(tf_onnx_options, weights_path), MEMBER(tf_onnx_options, weights_ref);
  MEMBER(tf_onnx_options, symbol_defaults), MEMBER(tf_onnx_options, loss), MEMBER(tf_onnx_options, ignore_index);
  MEMBER(tf_onnx_options, label_name), MEMBER(tf_onnx_options, graph_name), MEMBER(tf_onnx_options, label_length),
      MEMBER(tf_onnx_options, narrow_float64);
  close_struct();
}

static int constants_printed;

static void constant(const char *name, long long value) {
  printf("%s\n    \"%s\": %lld", constants_printed++ ? "," : "", name, value);
}

#define CONSTANT(name) constant(#name, (long long)(name))

static void print_constants(void) {
  CONSTANT(TF_MAX_RANK), CONSTANT(TF_REGION_COUNT);
  CONSTANT(TF_F32), CONSTANT(TF_F16), CONSTANT(TF_BF16), CONSTANT(TF_I32), CONSTANT(TF_I64), CONSTANT(TF_U8);
  CONSTANT(TF_INIT_NONE), CONSTANT(TF_INIT_ZEROS), CONSTANT(TF_INIT_ONES), CONSTANT(TF_INIT_NORMAL);
  CONSTANT(TF_INIT_UNIFORM), CONSTANT(TF_INIT_XAVIER_UNIFORM), CONSTANT(TF_INIT_KAIMING_NORMAL);
  CONSTANT(TF_INIT_ARANGE), CONSTANT(TF_INIT_EXTERNAL), CONSTANT(TF_INIT_FILL);
  CONSTANT(TF_OPTIMIZER_NONE), CONSTANT(TF_OPTIMIZER_SGD), CONSTANT(TF_OPTIMIZER_ADAMW);
  CONSTANT(TF_OPTIMIZER_ADAMW8BIT);
  CONSTANT(TF_PRECISION_F32), CONSTANT(TF_PRECISION_BF16), CONSTANT(TF_PRECISION_F16);
  CONSTANT(TF_ROLE_PARAMETER), CONSTANT(TF_ROLE_INPUT), CONSTANT(TF_ROLE_LABEL), CONSTANT(TF_ROLE_STATE);
  CONSTANT(TF_ONNX_LOSS_NONE), CONSTANT(TF_ONNX_LOSS_CROSS_ENTROPY), CONSTANT(TF_ONNX_LOSS_MSE);
  CONSTANT(TF_ONNX_LOSS_BCE_WITH_LOGITS), CONSTANT(TF_ONNX_LOSS_L1), CONSTANT(TF_ONNX_LOSS_CTC);
  CONSTANT(TF_ONNX_LOSS_OUTPUT);
}

int main(void) {
  printf("{\n  \"structs\": {");
  print_structs();
  printf("\n  },\n  \"constants\": {");
  print_constants();
  printf("\n  }\n}\n");
  return 0;
}
