/* vit: a Vision Transformer classifier (ViT-Base/16 by default); names follow timm's
 * VisionTransformer so that its checkpoints map by name. */
#include <inttypes.h>

#include "models/family.h"
#include "tightfit/layers.h"

enum { IMAGE, PATCH, D_MODEL, LAYERS, HEADS, CLASSES, MLP, KNOB_COUNT };

static const tf_zoo_knob knobs[KNOB_COUNT] = {
    [IMAGE] = TF_ZOO_KNOB("image", 224, 1, 65536, "image height and width (a multiple of patch)"),
    [PATCH] = TF_ZOO_KNOB("patch", 16, 1, 65536, "patch height and width"),
    [D_MODEL] = TF_ZOO_KNOB("d_model", 768, 1, TF_ZOO_SIZE_MAX, "model width"),
    [LAYERS] = TF_ZOO_KNOB("layers", 12, 1, TF_ZOO_LAYERS_MAX, "transformer blocks"),
    [HEADS] = TF_ZOO_DERIVED_KNOB("heads", 12, 1, TF_ZOO_SIZE_MAX, "attention heads (default d_model / 64)", "d_model",
                                  1, 64),
    [CLASSES] = TF_ZOO_KNOB("classes", 1000, 1, TF_ZOO_SIZE_MAX, "output classes"),
    [MLP] =
        TF_ZOO_DERIVED_KNOB("mlp", 3072, 1, TF_ZOO_SIZE_MAX, "MLP hidden width (default 4 x d_model)", "d_model", 4, 1),
};

static tf_status check(const int64_t *k) {
  if (k[IMAGE] % k[PATCH] != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "patch (%" PRId64 ") must divide image (%" PRId64 ")", k[PATCH],
                         k[IMAGE]);
  return tf_zoo_check_heads(k[D_MODEL], k[HEADS]);
}

/* image [N, 3, S, S] -> patch conv -> [N, P, d] -> [cls; patches] + pos_embed -> blocks -> norm ->
 * head(class token) -> logits [N, classes]. */
static void build(tf_graph *g, const int64_t *k) {
  int64_t d = k[D_MODEL], patch = k[PATCH], grid = k[IMAGE] / k[PATCH];
  int64_t patches = grid * grid;
  int32_t batch = tf_graph_symbol(g, "N", 8);
  tf_tensor_id image =
      tf_graph_input(g, "image", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(3), tf_fixed(k[IMAGE]), tf_fixed(k[IMAGE])));
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(tf_sym(batch)));

  tf_tensor_id cls_token =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(1), tf_fixed(1), tf_fixed(d)), tf_layers_normal(0.02), "cls_token");
  tf_tensor_id pos_embed = tf_layers_parameter(g, TF_SHAPE(tf_fixed(1), tf_fixed(patches + 1), tf_fixed(d)),
                                               tf_layers_normal(0.02), "pos_embed");
  tf_tensor_id proj_weight =
      tf_layers_parameter(g, TF_SHAPE(tf_fixed(d), tf_fixed(3), tf_fixed(patch), tf_fixed(patch)),
                          tf_layers_fan_in_uniform(3 * patch * patch), "patch_embed.proj.weight");
  tf_tensor_id proj_bias = tf_layers_parameter(g, TF_SHAPE(tf_fixed(d)), tf_layers_zeros(), "patch_embed.proj.bias");

  tf_graph_set_scope(g, "patch_embed");
  tf_conv_attrs conv = {.stride = {(int32_t)patch, (int32_t)patch}, .dilation = {1, 1}, .groups = 1};
  tf_tensor_id x = tf_conv2d(g, image, proj_weight, proj_bias, &conv); /* [N, d, grid, grid] */
  x = tf_reshape(g, x, TF_SHAPE(tf_sym(batch), tf_fixed(d), tf_fixed(patches)));
  x = tf_transpose(g, x, (const int32_t[]){0, 2, 1}, 3); /* [N, patches, d] */
  tf_graph_set_scope(g, "cls_token");
  tf_tensor_id cls = tf_expand(g, cls_token, TF_SHAPE(tf_sym(batch), tf_fixed(1), tf_fixed(d)));
  x = tf_concat(g, (const tf_tensor_id[]){cls, x}, 2, 1); /* [N, patches + 1, d] */
  tf_graph_set_scope(g, "pos_embed");
  x = tf_add(g, x, pos_embed);

  tf_block_config block = {
      .d_model = d,
      .heads = k[HEADS],
      .ffn = k[MLP],
      .causal = false,
      .gelu_approximate = false,
      .epsilon = 1e-6f,
      .init_std = 0.02,
      .residual_init_std = 0.02,
      .names = &tf_layers_timm_names,
  };
  x = tf_layers_stack(g, x, TF_NO_TENSOR, &block, k[LAYERS], "blocks", "norm");

  tf_graph_set_scope(g, "pool");
  x = tf_slice(g, x, 1, 0, 1, 1); /* the class token */
  x = tf_reshape(g, x, TF_SHAPE(tf_sym(batch), tf_fixed(d)));
  tf_tensor_id logits = tf_layers_linear(g, x, d, k[CLASSES], true, tf_layers_normal(0.02), "head");
  tf_zoo_finish_classifier(g, logits, labels, tf_layers_adamw());
}

const tf_zoo_family tf_zoo_family_vit = {
    .name = "vit", .knobs = knobs, .n_knobs = KNOB_COUNT, .check = check, .build = build};
