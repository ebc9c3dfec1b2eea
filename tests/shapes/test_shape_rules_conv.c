/* Shape rules of conv1d, conv2d, conv_transpose2d and the pools: exact outputs, every attribute
 * error path, output sizes below 1, and int64 overflow. */
#include "shape_cases.h"

static void test_conv(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs same = conv_attrs(1, 1, 1, 1), strided = conv_attrs(2, 1, 1, 1), dilated = conv_attrs(1, 0, 2, 1),
           grouped = conv_attrs(1, 0, 1, 2);
  EXPECT_SHAPE(c, "conv2d [8,3,32,32] w [16,3,3,3] pad 1",
               RULE(tf_shape_conv, TF_OP_CONV2D, &same, T("x", TF_F32, 8, 3, 32, 32), T("w", TF_F32, 16, 3, 3, 3),
                    T("b", TF_F32, 16)),
               TF_F32, 8, 16, 32, 32);
  EXPECT_SHAPE(c, "conv2d stride 2 pad 1 on 32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &strided, T("x", TF_F16, 1, 3, 32, 31), T("w", TF_F16, 4, 3, 3, 3)),
               TF_F16, 1, 4, 16, 16);
  EXPECT_SHAPE(c, "conv2d dilation 2 on 32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &dilated, T("x", TF_F32, 1, 3, 32, 32), T("w", TF_F32, 4, 3, 3, 3)),
               TF_F32, 1, 4, 28, 28);
  EXPECT_SHAPE(c, "conv2d groups 2",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 4, 10, 10), T("w", TF_F32, 8, 2, 3, 3)),
               TF_F32, 1, 8, 8, 8);
  tf_attrs conv1 = conv_attrs(2, 2, 1, 1);
  conv1.u.conv.stride[1] = 0; // conv1d reads index 0 only
  conv1.u.conv.dilation[1] = -7;
  EXPECT_SHAPE(
      c, "conv1d [2,4,100] w [6,4,5] stride 2 pad 2",
      RULE(tf_shape_conv, TF_OP_CONV1D, &conv1, T("x", TF_F32, 2, 4, 100), T("w", TF_F32, 6, 4, 5), T("b", TF_F32, 6)),
      TF_F32, 2, 6, 50);
  tf_attrs stride0 = conv_attrs(0, 0, 1, 1), dilation0 = conv_attrs(1, 0, 0, 1), pad_negative = conv_attrs(1, -1, 1, 1),
           groups0 = conv_attrs(1, 0, 1, 0), plain = conv_attrs(1, 0, 1, 1), stride2 = conv_attrs(2, 0, 1, 1);
  EXPECT_ERROR(c, "conv2d stride 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &stride0, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "stride 0", NULL);
  EXPECT_ERROR(c, "conv2d dilation 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &dilation0, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "dilation 0", NULL);
  EXPECT_ERROR(c, "conv2d padding -1",
               RULE(tf_shape_conv, TF_OP_CONV2D, &pad_negative, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "padding -1", NULL);
  EXPECT_ERROR(c, "conv2d groups 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &groups0, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "groups is 0", NULL);
  EXPECT_ERROR(c, "conv2d groups 2 with 3 channels",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 1, 3, 3)),
               "groups 2", "'x' [1,3,8,8]");
  EXPECT_ERROR(c, "conv2d groups 2 with 5 filters",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 4, 8, 8), T("w", TF_F32, 5, 2, 3, 3)),
               "groups 2", "'w' [5,2,3,3]");
  EXPECT_ERROR(c, "conv2d w channels 3 for C/groups 2",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 4, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "'w' [4,3,3,3] must have 2", "'x' [1,4,8,8]");
  EXPECT_ERROR(c, "conv2d bias [5] for 4 filters",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3),
                    T("bias", TF_F32, 5)),
               "'bias' [5]", "[4]");
  EXPECT_ERROR(c, "conv2d bias f16",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3),
                    T("bias", TF_F16, 4)),
               "'bias' [4] is f16", NULL);
  EXPECT_ERROR(c, "conv2d kernel 5 on height 2",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 2, 8), T("w", TF_F32, 4, 3, 5, 3)),
               "output height would be < 1", "'x' [1,3,2,8]");
  EXPECT_ERROR(c, "conv1d kernel 5 on 4 with stride 2 (no truncation to 1)",
               RULE(tf_shape_conv, TF_OP_CONV1D, &stride2, T("x", TF_F32, 1, 3, 4), T("w", TF_F32, 4, 3, 5)),
               "output length would be < 1", "window 5");
  EXPECT_ERROR(c, "conv2d kernel width 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 0)),
               "kernel width is 0", NULL);
  EXPECT_ERROR(c, "conv2d on rank 3 x",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "'x' [3,8,8]", "[N,C,H,W]");
  EXPECT_ERROR(c, "conv1d on rank 4 w",
               RULE(tf_shape_conv, TF_OP_CONV1D, &plain, T("x", TF_F32, 1, 3, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "'w' [4,3,3,3]", "[O,C/groups,K]");
  EXPECT_ERROR(c, "conv2d of i32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_I32, 1, 3, 8, 8), T("w", TF_I32, 4, 3, 3, 3)),
               "'x' [1,3,8,8] is i32", NULL);
  EXPECT_ERROR(c, "conv2d w f16 for x f32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F16, 4, 3, 3, 3)), "'w'",
               "f16");
  tf_attrs pad1 = conv_attrs(1, 1, 1, 1), dilation4 = conv_attrs(1, 0, 4, 1);
  EXPECT_ERROR(c, "conv1d length BIG + padding overflows",
               RULE(tf_shape_conv, TF_OP_CONV1D, &pad1, T("x", TF_F32, 1, 1, BIG), T("w", TF_F32, 1, 1, 3)),
               "9223372036854775807", "overflows int64");
  EXPECT_ERROR(
      c, "conv1d dilation 4 x kernel 2^62 overflows",
      RULE(tf_shape_conv, TF_OP_CONV1D, &dilation4, T("x", TF_F32, 1, 1, 8), T("w", TF_F32, 1, 1, INT64_C(1) << 62)),
      "kernel 4611686018427387904", "overflows int64");
}

static void test_conv_transpose(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs up2 = conv_attrs(2, 1, 1, 1), grouped = conv_attrs(1, 0, 1, 2), up2_extra = conv_attrs(2, 1, 1, 1),
           dilated_extra = conv_attrs(1, 0, 2, 1);
  up2_extra.u.conv.output_padding[0] = up2_extra.u.conv.output_padding[1] = 1;
  dilated_extra.u.conv.output_padding[0] = dilated_extra.u.conv.output_padding[1] = 1;
  EXPECT_SHAPE(c, "conv_transpose2d [2,16,8,8] w [16,8,4,4] stride 2 pad 1",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &up2, T("x", TF_F32, 2, 16, 8, 8),
                    T("w", TF_F32, 16, 8, 4, 4)),
               TF_F32, 2, 8, 16, 16);
  EXPECT_SHAPE(c, "conv_transpose2d groups 2 with bias [6]",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &grouped, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 4, 3, 3, 3), T("b", TF_F32, 6)),
               TF_F32, 1, 6, 7, 7);
  EXPECT_SHAPE(c, "conv_transpose2d output_padding 1 with stride 2",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &up2_extra, T("x", TF_F16, 2, 16, 8, 8),
                    T("w", TF_F16, 16, 8, 4, 4)),
               TF_F16, 2, 8, 17, 17);
  EXPECT_SHAPE(c, "conv_transpose2d output_padding 1 with stride 1, dilation 2",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &dilated_extra, T("x", TF_F32, 1, 2, 4, 4),
                    T("w", TF_F32, 2, 3, 3, 3)),
               TF_F32, 1, 3, 9, 9);
  tf_attrs too_much = conv_attrs(2, 1, 1, 1), negative = conv_attrs(2, 1, 1, 1), plain = conv_attrs(1, 0, 1, 1),
           shrink = conv_attrs(1, 1, 1, 1), stride4 = conv_attrs(4, 0, 1, 1), groups4 = conv_attrs(1, 0, 1, 4),
           stride0 = conv_attrs(0, 0, 1, 1);
  too_much.u.conv.output_padding[1] = 2;
  negative.u.conv.output_padding[0] = -1;
  EXPECT_ERROR(c, "output_padding 2 with stride 2",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &too_much, T("x", TF_F32, 2, 16, 8, 8),
                    T("w", TF_F32, 16, 8, 4, 4)),
               "output_padding 2", "max(stride 2, dilation 1)");
  EXPECT_ERROR(c, "output_padding -1",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &negative, T("x", TF_F32, 2, 16, 8, 8),
                    T("w", TF_F32, 16, 8, 4, 4)),
               "output_padding -1", NULL);
  EXPECT_ERROR(c, "stride 0",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &stride0, T("x", TF_F32, 1, 2, 4, 4),
                    T("w", TF_F32, 2, 3, 3, 3)),
               "stride 0", NULL);
  EXPECT_ERROR(c, "w rows differ from C",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &plain, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 3, 3, 3, 3)),
               "'w' [3,3,3,3]", "'x' [1,4,5,5]");
  EXPECT_ERROR(c, "groups 2 with 3 channels",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &grouped, T("x", TF_F32, 1, 3, 5, 5),
                    T("w", TF_F32, 3, 3, 3, 3)),
               "groups 2", "'x' [1,3,5,5]");
  EXPECT_ERROR(c, "bias [3] for 6 output channels",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &grouped, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 4, 3, 3, 3), T("bias", TF_F32, 3)),
               "'bias' [3]", "[6]");
  EXPECT_ERROR(c, "output height < 1",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &shrink, T("x", TF_F32, 1, 1, 1, 1),
                    T("w", TF_F32, 1, 1, 1, 1)),
               "would be -1", "'x' [1,1,1,1]");
  EXPECT_ERROR(c, "rank 3 w",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &plain, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 4, 3, 3)),
               "'w' [4,3,3]", "[C,O/groups,KH,KW]");
  EXPECT_ERROR(c, "height 2^62 x stride 4 overflows",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &stride4,
                    T("x", TF_F32, 1, 1, INT64_C(1) << 62, 1), T("w", TF_F32, 1, 1, 1, 1)),
               "stride 4", "overflows int64");
  // An empty kernel keeps w's element count in range while w[1] x groups overflows.
  EXPECT_ERROR(c, "w[1] 2^61 x groups 4 overflows",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &groups4, T("x", TF_F32, 1, 4, 1, 1),
                    T("w", TF_F32, 4, INT64_C(1) << 61, 0, 1)),
               "'w' [4,2305843009213693952,0,1] x groups 4", "overflow");
}

static void test_pool(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs halve = pool_attrs(2, 2, 0), same = pool_attrs(3, 1, 1), k3s2p1 = pool_attrs(3, 2, 1);
  EXPECT_SHAPE(c, "max_pool2d k2 s2 on [8,16,32,32]",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &halve, T("x", TF_F32, 8, 16, 32, 32)), TF_F32, 8, 16, 16, 16);
  EXPECT_SHAPE(c, "avg_pool2d k3 s1 p1 keeps size",
               RULE(tf_shape_pool2d, TF_OP_AVG_POOL2D, &same, T("x", TF_BF16, 1, 2, 9, 7)), TF_BF16, 1, 2, 9, 7);
  EXPECT_SHAPE(c, "max_pool2d k3 s2 p1 on 7",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &k3s2p1, T("x", TF_F32, 1, 1, 7, 7)), TF_F32, 1, 1, 4, 4);
  tf_attrs kernel0 = pool_attrs(0, 1, 0), stride0 = pool_attrs(2, 0, 0), wide_pad = pool_attrs(3, 1, 2),
           pad_negative = pool_attrs(3, 1, -1), big_kernel = pool_attrs(5, 1, 0), pad1 = pool_attrs(2, 1, 1);
  EXPECT_ERROR(c, "pool kernel 0", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &kernel0, T("x", TF_F32, 1, 1, 4, 4)),
               "kernel 0", NULL);
  EXPECT_ERROR(c, "pool stride 0", RULE(tf_shape_pool2d, TF_OP_AVG_POOL2D, &stride0, T("x", TF_F32, 1, 1, 4, 4)),
               "stride 0", NULL);
  EXPECT_ERROR(c, "pool padding 2 > kernel 3 / 2",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &wide_pad, T("x", TF_F32, 1, 1, 4, 4)), "padding 2", "kernel/2");
  EXPECT_ERROR(c, "pool padding -1", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &pad_negative, T("x", TF_F32, 1, 1, 4, 4)),
               "padding -1", NULL);
  EXPECT_ERROR(c, "pool kernel 5 on height 2",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &big_kernel, T("x", TF_F32, 1, 1, 2, 8)),
               "output height would be < 1", "'x' [1,1,2,8]");
  EXPECT_ERROR(c, "pool on rank 3", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &halve, T("x", TF_F32, 1, 4, 4)),
               "'x' [1,4,4]", "rank 4");
  EXPECT_ERROR(c, "pool of u8", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &halve, T("x", TF_U8, 1, 1, 4, 4)),
               "'x' [1,1,4,4] is u8", "max_pool2d");
  EXPECT_ERROR(c, "pool height BIG + padding overflows",
               RULE(tf_shape_pool2d, TF_OP_AVG_POOL2D, &pad1, T("x", TF_F32, 1, 1, BIG, 1)), "9223372036854775807",
               "overflows int64");
}

/* ---- robustness: mutated queries ---- */

int main(void) {
  tf_test_counts counts = {0, 0};
  test_conv(&counts);
  test_conv_transpose(&counts);
  test_pool(&counts);
  return tf_test_finish("shape_rules_conv", &counts);
}
