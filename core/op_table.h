/* The op table: one row per op, the one place that says what an op is and what implements it in
 * each layer (shared/DESIGN.md, "Layout"). Every per-op table of the code base is generated from
 * this list, each by expanding TF_OP_TABLE(X) with its own X, or checked against it at compile time:
 *
 *   include/tightfit/types.h      enum tf_op: TF_OP_<ID> = <number>
 *   core/ops.c                    the tf_op_info rows; static checks: rows in number order
 *   core/workspace.h              tf_op_workspace_rule(), which core/workspace_cpu.c and _cuda.h switch on
 *   schema/graph_fb.cc            static checks: schema/graph.fbs's Op.<name> == TF_OP_<ID>, every row
 *   compiler/autodiff_rules.c     the VJP rule of each op
 *   kernels/cpu/list.h, table.c   the CPU kernels' declarations and dispatch
 *   kernels/cuda/common.cuh       each op's launcher (kLaunchers); elementwise.cu instantiates per row
 *   backends/vulkan/vk_lower.c    each op's lowering
 *   shaders/gen_op_codes.c        op_codes.glsl (#define TF_OP_<ID> <number>u), which the shaders switch on
 *   core/half_slices.c            how the CPU cuts an op on half data into slices (the slices column)
 *   targets/target.c              which ops each target runs on f16/bf16 data (the half column)
 *   python/tightfit/__init__.py   the op names, from the library at import (tf_op_count, tf_op_name)
 *   tests/docs/check_op_table.py  checks schema/graph.fbs and the docs' op lists and counts against the rows
 *
 * Columns, in order (a row takes three lines; the header above the table abbreviates some):
 *   ID               the enum constant TF_OP_<ID>.
 *   name             tf_op_name(), the name in graphs, plans and the IR; schema/graph.fbs's Op.<name>.
 *   number (#)       graph and plan files store it: never change a row's number. A new op takes the
 *                    next number, at the end of the table (core/ops.c checks the order).
 *   scope            GRAPH: a model graph (.tfg) may hold it; TRAINING: only the compiler emits it,
 *                    into plans.
 *   min, max         inputs (64 is TF_OP_VARIADIC: concat; 127 TF_OP_VARIADIC_INTERNAL: global_norm_sq).
 *   outputs (out)    0: the op only updates inputs in place.
 *   shape_only (so)  bit i: input i is read for its shape only (liveness ignores it).
 *   in_place (ip)    bit i: input i is written in place.
 *   attrs            the attribute family TF_ATTR_<attrs>.
 *   shape            the shape rule tf_shape_<shape> (core/shape_rules.h).
 *   alias            which inputs output 0 may share memory with: TF_ALIAS_<alias> (core/ops.h says when).
 *   workspace        the CPU and CUDA kernels' scratch formula: TF_WORKSPACE_<workspace> (core/workspace.h).
 *   vjp              the gradient rule vjp_<vjp> (compiler/autodiff_rules.c); none: no gradient.
 *   cpu              the CPU kernels tf_cpu_<cpu>_f32 and tf_cpu_<cpu>_f64 (kernels/cpu).
 *   cuda             the CUDA launcher launch_<cuda> (kernels/cuda).
 *   vulkan           the Vulkan lowering vk_lower_<vulkan> (backends/vulkan); the unary and binary
 *                    shaders take the op number itself as their op code.
 *   dtypes           the dtypes every backend's kernels take, TF_DTYPES_<dtypes> (core/ops.h): FLOAT,
 *                    every input read for its data is f32, f16 or bf16 (there is no integer arithmetic);
 *                    BYTES, any dtype, the kernels moving elements as they are, computing nothing
 *                    (tf_op_moves_elements: reshape, transpose, ...); ANY, any dtype (cast); INT0,
 *                    INT1, INT2, input 0, 1 or 2 holds integer ids or labels (i32 or i64) and every
 *                    other one is floating;
 *                    INT1_LENGTHS, input 1 integer labels and the optional last input (present when the op
 *                    has its max inputs) integer lengths (ctc_loss).
 *                    tf_op_check_dtypes() applies it wherever shapes are inferred: graph load, import,
 *                    compile and the plan verifier, so no kernel ever runs on a dtype it does not read.
 *   slices           how the CPU runs the op on f16/bf16 data in slices of the first axis, each widened
 *                    to f32 in turn (core/half_slices.h): ROWS, every operand of the output's rank cut
 *                    with the output's rows (element-wise ops, attention, pools: a row's results come
 *                    from its own rows); AXIS, ROWS when the op's axis attribute is not the first axis,
 *                    else WHOLE (softmax); LAST_AXIS, ROWS when the output has two axes or more (the
 *                    norms, over the last axis); FIRST, input 0 and the outputs cut, the weights whole
 *                    (convolutions); MATMUL, by the rows of A, by batch, or by depth, from the
 *                    transposes (core/half_slices.c); WHOLE, one slice (sums over rows, losses, ...).
 *   half             where f16/bf16 data runs without casts around the op (targets/target.c): NONE,
 *                    nowhere (the cast, and the ops that keep sums in their in-place operands, which
 *                    half storage would round); CPU, the CPU only (half slices or its own half kernel);
 *                    ALL, every target, a GPU kernel taking all its floating operands in one half type;
 *                    MIXED, every target, the GPU kernels taking f32 operands beside the half ones (an
 *                    f32 loss and dloss, f32 running statistics, attention_grad's f32 dy).
 *
 * The vjp, cpu, cuda and vulkan columns name functions of higher layers. They are plain tokens here:
 * only the layer that expands a column turns its tokens into symbols, so core references nothing
 * above it. docs/adding-an-op.md walks through adding a row. */
#ifndef TIGHTFIT_CORE_OP_TABLE_H
#define TIGHTFIT_CORE_OP_TABLE_H

// clang-format off
/*  ID                    name                  #   scope     min max  out so   ip   attrs          shape
 *    alias      workspace           vjp               cpu                   cuda             vulkan
 *    dtypes        slices     half */
#define TF_OP_TABLE(X)                                                                                                 \
  X(MATMUL,               matmul,               0,  GRAPH,    2,  2,   1,  0,   0,   MATMUL,        matmul,            \
      NONE,      MATMUL,             matmul,           matmul,               matmul,          matmul,                  \
      FLOAT,        MATMUL,    ALL)                                                                                    \
  X(ADD,                  add,                  1,  GRAPH,    2,  2,   1,  0,   0,   NONE,          broadcast,         \
      ANY_INPUT, NONE,               add,              add,                  binary,          binary,                  \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SUB,                  sub,                  2,  GRAPH,    2,  2,   1,  0,   0,   NONE,          broadcast,         \
      ANY_INPUT, NONE,               sub,              sub,                  binary,          binary,                  \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(MUL,                  mul,                  3,  GRAPH,    2,  2,   1,  0,   0,   NONE,          broadcast,         \
      ANY_INPUT, NONE,               mul,              mul,                  binary,          binary,                  \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(DIV,                  div,                  4,  GRAPH,    2,  2,   1,  0,   0,   NONE,          broadcast,         \
      ANY_INPUT, NONE,               div,              div,                  binary,          binary,                  \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(NEG,                  neg,                  5,  GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               neg,              neg,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(EXP,                  exp,                  6,  GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               exp,              exp,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(LOG,                  log,                  7,  GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               log,              log,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SQRT,                 sqrt,                 8,  GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               sqrt,             sqrt,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(RSQRT,                rsqrt,                9,  GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               rsqrt,            rsqrt,                unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(RELU,                 relu,                 10, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               relu,             relu,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(GELU,                 gelu,                 11, GRAPH,    1,  1,   1,  0,   0,   GELU,          unary_float,       \
      INPUT0,    NONE,               gelu,             gelu,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SILU,                 silu,                 12, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               silu,             silu,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SIGMOID,              sigmoid,              13, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               sigmoid,          sigmoid,              unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(TANH,                 tanh,                 14, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               tanh,             tanh,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SUM,                  sum,                  15, GRAPH,    1,  1,   1,  0,   0,   REDUCE,        reduce,            \
      NONE,      REDUCE,             sum,              sum,                  reduce,          reduce,                  \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  X(MEAN,                 mean,                 16, GRAPH,    1,  1,   1,  0,   0,   REDUCE,        reduce,            \
      NONE,      REDUCE,             mean,             mean,                 reduce,          reduce,                  \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  X(MAX,                  max,                  17, GRAPH,    1,  1,   1,  0,   0,   REDUCE,        reduce,            \
      NONE,      REDUCE,             max,              max,                  reduce,          reduce,                  \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  X(SOFTMAX,              softmax,              18, GRAPH,    1,  1,   1,  0,   0,   AXIS,          softmax,           \
      NONE,      NONE,               softmax,          softmax,              softmax,         softmax,                 \
      FLOAT,        AXIS,      ALL)                                                                                    \
  X(LOG_SOFTMAX,          log_softmax,          19, GRAPH,    1,  1,   1,  0,   0,   AXIS,          softmax,           \
      NONE,      NONE,               log_softmax,      log_softmax,          softmax,         softmax,                 \
      FLOAT,        AXIS,      ALL)                                                                                    \
  X(LAYER_NORM,           layer_norm,           20, GRAPH,    2,  3,   1,  0,   0,   NORM,          norm,              \
      NONE,      NONE,               norm,             layer_norm,           norm,            norm,                    \
      FLOAT,        LAST_AXIS, ALL)                                                                                    \
  X(RMS_NORM,             rms_norm,             21, GRAPH,    2,  2,   1,  0,   0,   NORM,          norm,              \
      NONE,      NONE,               norm,             rms_norm,             norm,            norm,                    \
      FLOAT,        LAST_AXIS, ALL)                                                                                    \
  X(EMBEDDING,            embedding,            22, GRAPH,    2,  2,   1,  0,   0,   NONE,          embedding,         \
      NONE,      NONE,               embedding,        embedding,            embedding,       embedding,               \
      INT0,         WHOLE,     ALL)                                                                                    \
  X(RESHAPE,              reshape,              23, GRAPH,    1,  1,   1,  0,   0,   SHAPE,         reshape,           \
      INPUT0,    NONE,               reshape,          reshape,              layout,          layout,                  \
      BYTES,        WHOLE,     ALL)                                                                                    \
  X(TRANSPOSE,            transpose,            24, GRAPH,    1,  1,   1,  0,   0,   TRANSPOSE,     transpose,         \
      NONE,      NONE,               transpose,        transpose,            layout,          layout,                  \
      BYTES,        WHOLE,     ALL)                                                                                    \
  X(CONCAT,               concat,               25, GRAPH,    1,  64,  1,  0,   0,   AXIS,          concat,            \
      NONE,      NONE,               concat,           concat,               layout,          layout,                  \
      BYTES,        WHOLE,     ALL)                                                                                    \
  X(SLICE,                slice,                26, GRAPH,    1,  1,   1,  0,   0,   SLICE,         slice,             \
      NONE,      NONE,               slice,            slice,                layout,          layout,                  \
      BYTES,        WHOLE,     ALL)                                                                                    \
  X(EXPAND,               expand,               27, GRAPH,    1,  1,   1,  0,   0,   SHAPE,         expand,            \
      NONE,      NONE,               expand,           expand,               layout,          layout,                  \
      BYTES,        WHOLE,     ALL)                                                                                    \
  X(CONV1D,               conv1d,               28, GRAPH,    2,  3,   1,  0,   0,   CONV,          conv,              \
      NONE,      CONV,               conv,             conv1d,               conv,            conv,                    \
      FLOAT,        FIRST,     ALL)                                                                                    \
  X(CONV2D,               conv2d,               29, GRAPH,    2,  3,   1,  0,   0,   CONV,          conv,              \
      NONE,      CONV,               conv,             conv2d,               conv,            conv,                    \
      FLOAT,        FIRST,     ALL)                                                                                    \
  X(CONV_TRANSPOSE2D,     conv_transpose2d,     30, GRAPH,    2,  3,   1,  0,   0,   CONV,          conv_transpose2d,  \
      NONE,      CONV,               conv_transpose2d, conv_transpose2d,     conv,            conv,                    \
      FLOAT,        FIRST,     ALL)                                                                                    \
  X(MAX_POOL2D,           max_pool2d,           31, GRAPH,    1,  1,   1,  0,   0,   POOL,          pool2d,            \
      NONE,      NONE,               max_pool2d,       max_pool2d,           pool,            pool,                    \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(AVG_POOL2D,           avg_pool2d,           32, GRAPH,    1,  1,   1,  0,   0,   POOL,          pool2d,            \
      NONE,      NONE,               avg_pool2d,       avg_pool2d,           pool,            pool,                    \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(DROPOUT,              dropout,              33, GRAPH,    1,  1,   1,  0,   0,   DROPOUT,       dropout,           \
      NONE,      DROPOUT,            dropout,          dropout,              dropout,         dropout,                 \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  X(ATTENTION,            attention,            34, GRAPH,    3,  3,   1,  0,   0,   ATTENTION,     attention,         \
      NONE,      ATTENTION,          attention,        attention,            attention,       attention,               \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(CAST,                 cast,                 35, GRAPH,    1,  1,   1,  0,   0,   CAST,          cast,              \
      NONE,      NONE,               cast,             cast,                 cast,            cast,                    \
      ANY,          WHOLE,     NONE)                                                                                   \
  X(CROSS_ENTROPY,        cross_entropy,        36, GRAPH,    2,  2,   1,  0,   0,   CROSS_ENTROPY, cross_entropy,     \
      NONE,      CROSS_ENTROPY,      cross_entropy,    cross_entropy,        loss,            loss,                    \
      INT1,         WHOLE,     MIXED)                                                                                  \
  X(MSE,                  mse,                  37, GRAPH,    2,  2,   1,  0,   0,   NONE,          pair_loss,         \
      NONE,      PAIR_LOSS,          mse,              mse,                  loss,            loss,                    \
      FLOAT,        WHOLE,     MIXED)                                                                                  \
  X(BCE_WITH_LOGITS,      bce_with_logits,      38, GRAPH,    2,  2,   1,  0,   0,   NONE,          pair_loss,         \
      NONE,      PAIR_LOSS,          bce_with_logits,  bce_with_logits,      loss,            loss,                    \
      FLOAT,        WHOLE,     MIXED)                                                                                  \
  /* Training-only ops: the compiler's autodiff and optimizer passes emit them into plans; a .tfg                      \
   * model graph may not hold them. Inputs marked (shape) are read for their shape only, never                         \
   * their data (the shape_only column). Gradient ops take the forward op's attributes. */                             \
  /* (v, dy) -> dx: dy where v > 0; v is relu's output y (autodiff), or its input x: the same elements */            \
  X(RELU_GRAD,            relu_grad,            39, TRAINING, 2,  2,   1,  0,   0,   NONE,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             relu_grad,            activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x, dy) -> dx */                                                                                                  \
  X(GELU_GRAD,            gelu_grad,            40, TRAINING, 2,  2,   1,  0,   0,   GELU,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             gelu_grad,            activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x, dy) -> dx */                                                                                                  \
  X(SILU_GRAD,            silu_grad,            41, TRAINING, 2,  2,   1,  0,   0,   NONE,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             silu_grad,            activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (y, dy) -> dx, y = sigmoid(x) */                                                                                  \
  X(SIGMOID_GRAD,         sigmoid_grad,         42, TRAINING, 2,  2,   1,  0,   0,   NONE,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             sigmoid_grad,         activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (y, dy) -> dx, y = tanh(x) */                                                                                     \
  X(TANH_GRAD,            tanh_grad,            43, TRAINING, 2,  2,   1,  0,   0,   NONE,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             tanh_grad,            activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (dy, like (shape)) -> dy summed over the axes that broadcasting added */                                          \
  X(SUM_TO,               sum_to,               44, TRAINING, 2,  2,   1,  0x2, 0,   NONE,          sum_to,            \
      NONE,      REDUCE,             none,             sum_to,               reduce,          reduce,                  \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, y, dy) -> dx: dy split evenly among the maxima (reduce attrs) */                                              \
  X(MAX_GRAD,             max_grad,             45, TRAINING, 3,  3,   1,  0,   0,   REDUCE,        max_grad,          \
      NONE,      REDUCE,             none,             max_grad,             max_grad,        reduce,                  \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (y, dy) -> dx */                                                                                                  \
  X(SOFTMAX_GRAD,         softmax_grad,         46, TRAINING, 2,  2,   1,  0,   0,   AXIS,          elementwise_grad,  \
      NONE,      NONE,               none,             softmax_grad,         softmax,         softmax,                 \
      FLOAT,        AXIS,      ALL)                                                                                    \
  /* (y, dy) -> dx */                                                                                                  \
  X(LOG_SOFTMAX_GRAD,     log_softmax_grad,     47, TRAINING, 2,  2,   1,  0,   0,   AXIS,          elementwise_grad,  \
      NONE,      NONE,               none,             log_softmax_grad,     softmax,         softmax,                 \
      FLOAT,        AXIS,      ALL)                                                                                    \
  /* (x, gamma, dy) -> (dx, dgamma, dbeta) */                                                                          \
  X(LAYER_NORM_GRAD,      layer_norm_grad,      48, TRAINING, 3,  3,   3,  0,   0,   NORM,          norm_grad,         \
      NONE,      NORM_GRAD,          none,             layer_norm_grad,      norm_grad,       norm,                    \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, gamma, dy) -> (dx, dgamma) */                                                                                 \
  X(RMS_NORM_GRAD,        rms_norm_grad,        49, TRAINING, 3,  3,   2,  0,   0,   NORM,          norm_grad,         \
      NONE,      NORM_GRAD,          none,             rms_norm_grad,        norm_grad,       norm,                    \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (ids, dy, table (shape)) -> dtable, rows scatter-added */                                                         \
  X(EMBEDDING_GRAD,       embedding_grad,       50, TRAINING, 3,  3,   1,  0x4, 0,   NONE,          embedding_grad,    \
      NONE,      EMBEDDING_GRAD,     none,             embedding_grad,       embedding_grad,  embedding,               \
      INT0,         WHOLE,     ALL)                                                                                    \
  /* (dy, x (shape)) -> dx: dy placed at the slice, zeros elsewhere */                                                 \
  X(SLICE_GRAD,           slice_grad,           51, TRAINING, 2,  2,   1,  0x2, 0,   SLICE,         slice_grad,        \
      NONE,      NONE,               none,             slice_grad,           layout,          layout,                  \
      BYTES,        WHOLE,     ALL)                                                                                    \
  /* (dy, w, x (shape)) -> dx */                                                                                       \
  X(CONV1D_GRAD_INPUT,    conv1d_grad_input,    52, TRAINING, 3,  3,   1,  0x4, 0,   CONV,          conv_grad,         \
      NONE,      CONV,               none,             conv1d_grad_input,    conv,            conv,                    \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, dy, w (shape)) -> dw */                                                                                       \
  X(CONV1D_GRAD_WEIGHT,   conv1d_grad_weight,   53, TRAINING, 3,  3,   1,  0x4, 0,   CONV,          conv_grad,         \
      NONE,      CONV,               none,             conv1d_grad_weight,   conv,            conv,                    \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (dy, w, x (shape)) -> dx */                                                                                       \
  X(CONV2D_GRAD_INPUT,    conv2d_grad_input,    54, TRAINING, 3,  3,   1,  0x4, 0,   CONV,          conv_grad,         \
      NONE,      CONV,               none,             conv2d_grad_input,    conv,            conv,                    \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, dy, w (shape)) -> dw */                                                                                       \
  X(CONV2D_GRAD_WEIGHT,   conv2d_grad_weight,   55, TRAINING, 3,  3,   1,  0x4, 0,   CONV,          conv_grad,         \
      NONE,      CONV,               none,             conv2d_grad_weight,   conv,            conv,                    \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, dy) -> dx: to the first maximum of each window */                                                             \
  X(MAX_POOL2D_GRAD,      max_pool2d_grad,      56, TRAINING, 2,  2,   1,  0,   0,   POOL,          pool_grad,         \
      NONE,      NONE,               none,             max_pool2d_grad,      pool,            pool,                    \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (dy, x (shape)) -> dx */                                                                                          \
  X(AVG_POOL2D_GRAD,      avg_pool2d_grad,      57, TRAINING, 2,  2,   1,  0x2, 0,   POOL,          pool_grad,         \
      NONE,      NONE,               none,             avg_pool2d_grad,      pool,            pool,                    \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (q, k, v, dy) -> (dq, dk, dv), the forward recomputed blockwise */                                                \
  X(ATTENTION_GRAD,       attention_grad,       58, TRAINING, 4,  4,   3,  0,   0,   ATTENTION,     attention_grad,    \
      NONE,      ATTENTION_GRAD,     none,             attention_grad,       attention_grad,  attention,               \
      FLOAT,        ROWS,      MIXED)                                                                                  \
  /* (logits, labels, dloss) -> dlogits */                                                                             \
  X(CROSS_ENTROPY_GRAD,   cross_entropy_grad,   59, TRAINING, 3,  3,   1,  0,   0,   CROSS_ENTROPY, loss_grad,         \
      INPUT0,    CROSS_ENTROPY_GRAD, none,             cross_entropy_grad,   loss_grad,       loss,                    \
      INT1,         WHOLE,     MIXED)                                                                                  \
  /* (prediction, target, dloss) -> dprediction */                                                                     \
  X(MSE_GRAD,             mse_grad,             60, TRAINING, 3,  3,   1,  0,   0,   NONE,          loss_grad,         \
      NONE,      NONE,               none,             mse_grad,             loss_grad,       loss,                    \
      FLOAT,        WHOLE,     MIXED)                                                                                  \
  /* (logits, target, dloss) -> dlogits */                                                                             \
  X(BCE_WITH_LOGITS_GRAD, bce_with_logits_grad, 61, TRAINING, 3,  3,   1,  0,   0,   NONE,          loss_grad,         \
      NONE,      NONE,               none,             bce_with_logits_grad, loss_grad,       loss,                    \
      FLOAT,        WHOLE,     MIXED)                                                                                  \
  /* (sum, x): sum += x in place; no outputs */                                                                        \
  X(ACCUMULATE,           accumulate,           62, TRAINING, 2,  2,   0,  0,   0x1, NONE,          update,            \
      NONE,      NONE,               none,             accumulate,           optimizer,       binary,                  \
      FLOAT,        WHOLE,     NONE)                                                                                   \
  /* (x): x = 0 in place; no outputs */                                                                                \
  X(ZERO,                 zero,                 63, TRAINING, 1,  1,   0,  0,   0x1, NONE,          update,            \
      NONE,      NONE,               none,             zero,                 optimizer,       zero,                    \
      BYTES,        WHOLE,     ALL)                                                                                    \
  /* (g1, g2, ...) -> f32 scalar sum of squares of every element */                                                    \
  X(GLOBAL_NORM_SQ,       global_norm_sq,       64, TRAINING, 1,  127, 1,  0,   0,   NONE,          global_norm_sq,    \
      NONE,      GLOBAL_NORM_SQ,     none,             global_norm_sq,       global_norm_sq,  global_norm_sq,          \
      FLOAT,        WHOLE,     NONE)                                                                                   \
  /* (param, grad, momentum [, norm_sq]): updates param and momentum in place */                                       \
  X(SGD,                  sgd,                  65, TRAINING, 3,  4,   0,  0,   0x5, OPTIMIZER,     update,            \
      NONE,      OPTIMIZER,          none,             sgd,                  optimizer,       optimizer,               \
      FLOAT,        WHOLE,     NONE)                                                                                   \
  /* (param, grad, m, v [, norm_sq]): updates param, m and v in place */                                               \
  X(ADAMW,                adamw,                66, TRAINING, 4,  5,   0,  0,   0xd, OPTIMIZER,     update,            \
      NONE,      OPTIMIZER,          none,             adamw,                optimizer,       optimizer,               \
      FLOAT,        WHOLE,     NONE)                                                                                   \
  /* Ops added since, of either scope: each takes the next number. */                                                  \
  X(SOFTPLUS,             softplus,             67, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               softplus,         softplus,             unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x [.., d], weight [V, d] (or [d, V]), labels [.. ] [, bias [V]]) -> f32 mean cross-entropy of x weightᵀ */       \
  /* (+ bias), computed chunk_rows rows at a time: the [rows, V] logits never exist (compiler/fuse_loss.c) */          \
  X(LINEAR_CROSS_ENTROPY, linear_cross_entropy, 68, GRAPH, 3, 4, 1, 0, 0, CROSS_ENTROPY, linear_cross_entropy, NONE,   \
      LINEAR_CROSS_ENTROPY, linear_cross_entropy, linear_cross_entropy, linear_cross_entropy, linear_cross_entropy,    \
      INT2, WHOLE, MIXED)                                                                                              \
  /* (x, weight, labels, dloss) -> (dx, dweight), the logits recomputed chunk by chunk */                              \
  X(LINEAR_CROSS_ENTROPY_GRAD, linear_cross_entropy_grad, 69, TRAINING, 4, 4, 2, 0, 0, CROSS_ENTROPY,                  \
      linear_cross_entropy_grad, NONE, LINEAR_CROSS_ENTROPY, none, linear_cross_entropy_grad,                          \
      linear_cross_entropy_grad, linear_cross_entropy, INT2, WHOLE, MIXED)                                             \
  /* (ids, dy, sum): sum += embedding_grad(ids, dy) in place, a gradient part scattered straight into */               \
  /* the parameter's gradient (compiler/optimizer.c); no outputs */                                                    \
  X(EMBEDDING_GRAD_ACCUMULATE, embedding_grad_accumulate, 70, TRAINING, 3, 3, 0, 0, 0x4, NONE, embedding_grad, NONE,   \
      EMBEDDING_GRAD, none, embedding_grad_accumulate, embedding_grad, embedding, INT0, WHOLE, NONE)                   \
  /* (sum, a, b): sum += op(a) op(b) in place (matmul's transposes), a weight's gradient part written */               \
  /* straight into the parameter's gradient (compiler/optimizer.c); 2-D operands only; no outputs */                   \
  X(MATMUL_ACCUMULATE,    matmul_accumulate,    71, TRAINING, 3,  3,   0,  0,   0x1, MATMUL,        matmul_accumulate, \
      NONE,      MATMUL,             none,             matmul_accumulate,    matmul,          matmul,                  \
      FLOAT,        WHOLE,     NONE)                                                                                   \
  /* (x, weight, labels, dloss, bias) -> (dx, dweight, dbias): linear_cross_entropy_grad of a head with a */           \
  /* bias, which also sums each chunk's dlogits over its rows into dbias (the outputs column is a count) */            \
  X(LINEAR_CROSS_ENTROPY_BIAS_GRAD, linear_cross_entropy_bias_grad, 72, TRAINING, 5, 5, 3, 0, 0, CROSS_ENTROPY,        \
      linear_cross_entropy_grad, NONE, LINEAR_CROSS_ENTROPY, none, linear_cross_entropy_grad,                          \
      linear_cross_entropy_grad, linear_cross_entropy, INT2, WHOLE, MIXED)                                             \
  /* (x, weight, labels, dloss [, bias]) -> (loss, dx, dweight [, dbias]): linear_cross_entropy and its */             \
  /* gradient in one pass over the chunks, each chunk's logits computed once, in a training plan's forward */          \
  /* pass when dloss is the loss seed (compiler/fuse_loss.c); the bias form has one more input and output */           \
  X(LINEAR_CROSS_ENTROPY_TRAIN, linear_cross_entropy_train, 73, TRAINING, 4, 4, 3, 0, 0, CROSS_ENTROPY,                \
      linear_cross_entropy_train, NONE, LINEAR_CROSS_ENTROPY, none, linear_cross_entropy_train,                        \
      linear_cross_entropy_train, linear_cross_entropy, INT2, WHOLE, MIXED)                                            \
  X(LINEAR_CROSS_ENTROPY_BIAS_TRAIN, linear_cross_entropy_bias_train, 74, TRAINING, 5, 5, 4, 0, 0, CROSS_ENTROPY,      \
      linear_cross_entropy_train, NONE, LINEAR_CROSS_ENTROPY, none, linear_cross_entropy_train,                        \
      linear_cross_entropy_train, linear_cross_entropy, INT2, WHOLE, MIXED)                                            \
  /* (x, weight, labels, dloss, dweight_sum) -> dx, and dweight_sum += dweight in place: the gradient of a */          \
  /* head whose weight's gradient is accumulated over k > 1 micro-batches, added chunk by chunk straight */            \
  /* into the accumulator (compiler/optimizer.c); the bias form takes (.., dloss, bias, dweight_sum, dbias_sum) */     \
  X(LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE, linear_cross_entropy_grad_accumulate, 75, TRAINING, 5, 5, 1, 0, 0x10,        \
      CROSS_ENTROPY, linear_cross_entropy_grad_accumulate, NONE, LINEAR_CROSS_ENTROPY, none,                           \
      linear_cross_entropy_grad, linear_cross_entropy_grad, linear_cross_entropy, INT2, WHOLE, NONE)                   \
  X(LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE, linear_cross_entropy_bias_grad_accumulate, 76, TRAINING, 7, 7, 1, 0,    \
      0x60, CROSS_ENTROPY, linear_cross_entropy_grad_accumulate, NONE, LINEAR_CROSS_ENTROPY, none,                     \
      linear_cross_entropy_grad, linear_cross_entropy_grad, linear_cross_entropy, INT2, WHOLE, NONE)                   \
  /* x -> x for x > 0, alpha x otherwise */                                                                            \
  X(LEAKY_RELU,           leaky_relu,           77, GRAPH,    1,  1,   1,  0,   0,   LEAKY_RELU,    unary_float,       \
      INPUT0,    NONE,               leaky_relu,       leaky_relu,           unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x, dy) -> dx: dy for x > 0, alpha dy otherwise */                                                                \
  X(LEAKY_RELU_GRAD,      leaky_relu_grad,      78, TRAINING, 2,  2,   1,  0,   0,   LEAKY_RELU,    elementwise_grad,  \
      ANY_INPUT, NONE,               none,             leaky_relu_grad,      activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x [N, C, ...], gamma [C], beta [C] [, running_mean [C], running_var [C]]) -> y: normalised per channel */        \
  /* (axis 1) with the batch's statistics over every other axis (PyTorch's BatchNorm in training mode). The */         \
  /* running statistics (f32 constants) are the compiler's: it strips them and adds batch_norm_running */              \
  X(BATCH_NORM,           batch_norm,           79, GRAPH,    3,  5,   1,  0,   0,   NORM,          batch_norm,        \
      NONE,      NONE,               batch_norm,       batch_norm,           batch_norm,      batch_norm,              \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, gamma, dy) -> (dx, dgamma, dbeta), the statistics recomputed from x */                                        \
  X(BATCH_NORM_GRAD,      batch_norm_grad,      80, TRAINING, 3,  3,   3,  0,   0,   NORM,          batch_norm_grad,   \
      NONE,      NONE,               none,             batch_norm_grad,      batch_norm_grad, batch_norm,              \
      FLOAT,        WHOLE,     ALL)                                                                                    \
  /* (x, running_mean, running_var): both f32, updated in place with the batch's mean and unbiased */                  \
  /* variance, running = (1 - momentum) running + momentum batch; once per micro-batch, in the forward pass */         \
  X(BATCH_NORM_RUNNING, batch_norm_running, 81, TRAINING, 3, 3, 0, 0, 0x6, NORM, batch_norm_running, NONE, NONE,       \
      none, batch_norm_running, batch_norm_running, batch_norm_running, FLOAT, WHOLE, MIXED)                           \
  /* x -> |x| (an L1 loss: mean(abs(y - target))) */                                                                   \
  X(ABS,                  abs,                  82, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               abs,              abs,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x, dy) -> dx: dy for x > 0, -dy for x < 0, 0 at 0 (PyTorch's sign(x) dy) */                                      \
  X(ABS_GRAD,             abs_grad,             83, TRAINING, 2,  2,   1,  0,   0,   NONE,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             abs_grad,             activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (logits [N, T, C], labels [N, S] [, input_lengths [N]]) -> f32 CTC loss over log_softmax(logits), each */         \
  /* sequence's divided by its target length (the labels before the first negative one; at least 1), the */            \
  /* mean over the batch: PyTorch's ctc_loss(reduction='mean'). core/ctc.h has the recursions' layout */               \
  X(CTC_LOSS,             ctc_loss,             84, GRAPH,    2,  3,   1,  0,   0,   CTC,           ctc_loss,          \
      NONE,      CTC,                ctc_loss,         ctc_loss,             ctc,             ctc,                     \
      INT1_LENGTHS, WHOLE,     CPU)                                                                                    \
  /* (logits, labels, dloss [, input_lengths]) -> dlogits */                                                           \
  X(CTC_LOSS_GRAD,        ctc_loss_grad,        85, TRAINING, 3,  4,   1,  0,   0,   CTC,           ctc_loss_grad,     \
      NONE,      CTC,                none,             ctc_loss_grad,        ctc,             ctc,                     \
      INT1_LENGTHS, WHOLE,     CPU)                                                                                    \
  /* x -> erf(x), the Gauss error function (ONNX's Erf: the exact GELU as exporters write it) */                       \
  X(ERF,                  erf,                  86, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               erf,              erf,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x, dy) -> dx = dy 2/sqrt(pi) e^(-x²) */                                                                         \
  X(ERF_GRAD,             erf_grad,             87, TRAINING, 2,  2,   1,  0,   0,   NONE,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             erf_grad,             activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (param, grad, m_codes, m_scales, v_codes, v_scales [, norm_sq]): adamw over moments stored as u8 */               \
  /* codes with an f32 scale per block of TF_ADAMW8BIT_BLOCK elements (kernels/cpu/optimizer8bit.c) */                 \
  X(ADAMW8BIT,            adamw8bit,            88, TRAINING, 6,  7,   0,  0,   0x3d, OPTIMIZER,    adamw8bit,         \
      NONE,      OPTIMIZER,          none,             adamw8bit,            adamw8bit,       adamw8bit,               \
      STATE8,       WHOLE,     NONE)                                                                                   \
  /* x -> x, through which no gradient flows: autodiff treats its output as a constant (PyTorch's */                  \
  /* detach(); compiler/autodiff.c) */                                                                                 \
  X(STOP_GRADIENT,        stop_gradient,        89, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               none,             stop_gradient,        unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (param, master): param = master cast to param's dtype (rounded to nearest even), in place; no */                  \
  /* outputs. Writes a half parameter from its f32 master weights after their update (optimizer.c) */                  \
  X(CAST_INTO,            cast_into,            90, TRAINING, 2,  2,   0,  0,   0x1, NONE,          cast_into,         \
      NONE,      NONE,               none,             cast_into,            cast_into,       cast_into,               \
      ANY,          WHOLE,     NONE)                                                                               \
  /* (x) -> (y, dydx): gelu and its derivative from one evaluation; compiler/gelu_pair.c emits it (cpu */         \
  /* target, f32) in place of gelu when gelu_grad reads the same x, which then becomes dy dydx (mul) */              \
  X(GELU_PAIR,            gelu_pair,            91, TRAINING, 1,  1,   2,  0,   0,   GELU,          unary_pair,        \
      INPUT0,    NONE,               none,             gelu_pair,            gelu_pair,       gelu_pair,               \
      FLOAT,        ROWS,      NONE)                                                                                   \
  /* x -> sin(x), cos(x): data through sinusoids (diffusion timestep and NeRF-style position embeddings, */          \
  /* SIREN); each one's gradient is the other's, composed (compiler/autodiff_rules.c) */                              \
  X(SIN,                  sin,                  92, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               sin,              sin,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(COS,                  cos,                  93, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               cos,              cos,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* x -> min(max(x, lo), hi), NaN kept (ONNX's Clip with constant bounds; ReLU6, hardtanh, torch.clamp) */            \
  X(CLIP,                 clip,                 94, GRAPH,    1,  1,   1,  0,   0,   CLIP,          unary_float,       \
      INPUT0,    NONE,               clip,             clip,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (v, dy) -> dx: dy where lo < v < hi, else 0 (PyTorch's hardtanh_backward); v is y or x, as relu_grad's */      \
  X(CLIP_GRAD,            clip_grad,            95, TRAINING, 2,  2,   1,  0,   0,   CLIP,          elementwise_grad,  \
      ANY_INPUT, NONE,               none,             clip_grad,            activation_grad, unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* x -> floor(x), ceil(x), round(x) (half to even, as torch.round and ONNX's Round), sign(x) (-1, 0 or 1; */       \
  /* a NaN and a signed zero kept): steps, whose gradient is 0 (PyTorch's): autodiff passes none through */           \
  /* them, as through stop_gradient (compiler/autodiff.c). A straight-through estimator composes them */             \
  /* with stop_gradient: x + stop_gradient(round(x) - x) */                                                          \
  X(FLOOR,                floor,                96, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               none,             floor,                unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(CEIL,                 ceil,                 97, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               none,             ceil,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(ROUND,                round,                98, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               none,             round,                unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SIGN,                 sign,                 99, GRAPH,    1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               none,             sign,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* (x, m) -> x where m != 0 (a NaN m too), else 0, a NaN or an infinity of x included (torch.where(m, x, 0)), */  \
  /* with numpy broadcasting: a select that no product by a 0/1 mask gives (NaN * 0 is NaN). dx = keep(dy, m), */    \
  /* sum_to x's shape; m gets no gradient. The importer's where(), masked_fill, x[mask] and isnan take it */          \
  X(KEEP,                 keep,                 100, GRAPH,   2,  2,   1,  0,   0,   NONE,          broadcast,         \
      ANY_INPUT, NONE,               keep,             keep,                 binary,          binary,                  \
      FLOAT,        ROWS,      ALL)                                                                                    \
  /* x -> asin, acos, atan, tan, sinh, cosh, asinh, acosh, atanh of x (ONNX's operators of those names; */             \
  /* torch.atan in a CIoU loss, atanh of a squashed policy's actions, hyperbolic embeddings); NaN outside */           \
  /* the domain; gradients composed of existing ops (compiler/autodiff_rules.c) */                                     \
  X(ASIN,                 asin,                 101, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               asin,             asin,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(ACOS,                 acos,                 102, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               acos,             acos,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(ATAN,                 atan,                 103, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               atan,             atan,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(TAN,                  tan,                  104, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               tan,              tan,                  unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(SINH,                 sinh,                 105, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               sinh,             sinh,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(COSH,                 cosh,                 106, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               cosh,             cosh,                 unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(ASINH,                asinh,                107, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               asinh,            asinh,                unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(ACOSH,                acosh,                108, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               acosh,            acosh,                unary,           unary,                   \
      FLOAT,        ROWS,      ALL)                                                                                    \
  X(ATANH,                atanh,                109, GRAPH,   1,  1,   1,  0,   0,   NONE,          unary_float,       \
      INPUT0,    NONE,               atanh,            atanh,                unary,           unary,                   \
      FLOAT,        ROWS,      ALL)
// clang-format on

#endif
