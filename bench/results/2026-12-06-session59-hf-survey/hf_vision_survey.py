import sys, copy, os, torch
sys.path.insert(0, "/work/main/python"); sys.path.insert(0, "/work/main/tests/python")
import tightfit, transformers as T_
from torch_training import adamw_losses
T_.logging.set_verbosity_error()
torch.set_num_threads(1)
B = 2
class Own(torch.nn.Module):
    def __init__(s, m, names): super().__init__(); s.m, s.names = m, names
    def forward(s, *args): return s.m(**dict(zip(s.names, args))).loss
def run(label, model, inputs):
    torch.manual_seed(0)
    w = Own(model.train(), list(inputs)); start = copy.deepcopy(w)
    try:
        g = tightfit.from_torch(w, tuple(inputs.values()), loss="output", input_names=list(inputs))
        plan = tightfit.compile(g, set={"N": B}, optimizer="adamw", lr=1e-3, weight_decay=0, clip=0)
        s = tightfit.Session(plan, seed=0)
        feed = {k: v.numpy() for k, v in inputs.items()}
        got = [s.step(feed) for _ in range(3)]
        want = adamw_losses(start, tuple(inputs.values()), None, 3, 1e-3, criterion=lambda l, _: l)
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        print(f"{'OK ' if worst < 1e-4 else 'DIFF'} {label}: {got[0]:.6f}->{got[-1]:.6f} vs {want[0]:.6f}->{want[-1]:.6f} worst {worst:.1e}", flush=True)
    except Exception as e:
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:300]}", flush=True)
torch.manual_seed(1)
px = torch.randn(B, 3, 32, 32); lab = torch.randint(0, 5, (B,))
V = dict(num_labels=5)
which = sys.argv[1:]
def img(name, make):
    if which and name not in which: return
    try: m = make()
    except Exception as e: print(f"SKIP {name}: {str(e)[:200]}"); return
    run(name, m, {"pixel_values": px, "labels": lab})
img("deit", lambda: T_.DeiTForImageClassification(T_.DeiTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0, attention_probs_dropout_prob=0, **V)))
img("dinov2", lambda: T_.Dinov2ForImageClassification(T_.Dinov2Config(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, hidden_dropout_prob=0, attention_probs_dropout_prob=0, **V)))
img("swinv2", lambda: T_.Swinv2ForImageClassification(T_.Swinv2Config(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0, **V)))
img("convnextv2", lambda: T_.ConvNextV2ForImageClassification(T_.ConvNextV2Config(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], drop_path_rate=0, **V)))
img("resnet", lambda: T_.ResNetForImageClassification(T_.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", **V)))
img("regnet", lambda: T_.RegNetForImageClassification(T_.RegNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=4, **V)))
img("efficientnet", lambda: T_.EfficientNetForImageClassification(T_.EfficientNetConfig(image_size=32, width_coefficient=0.25, depth_coefficient=0.25, dropout_rate=0, drop_connect_rate=0, **V)))
img("mobilevit", lambda: T_.MobileViTForImageClassification(T_.MobileViTConfig(image_size=32, patch_size=2, hidden_sizes=[16, 16, 16], neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32], num_attention_heads=2, hidden_dropout_prob=0, attention_probs_dropout_prob=0, classifier_dropout_prob=0, **V)))
img("mobilevitv2", lambda: T_.MobileViTV2ForImageClassification(T_.MobileViTV2Config(image_size=32, width_multiplier=0.25, attn_dropout=0, classifier_dropout_prob=0, **V)))
img("levit", lambda: T_.LevitForImageClassification(T_.LevitConfig(image_size=32, hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3], depths=[1, 1, 1], key_dim=[8, 8, 8], drop_path_rate=0, **V)))
img("pvt", lambda: T_.PvtForImageClassification(T_.PvtConfig(image_size=32, num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0, **V)))
img("pvtv2", lambda: T_.PvtV2ForImageClassification(T_.PvtV2Config(image_size=32, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0, **V)))
img("segformer", lambda: T_.SegformerForImageClassification(T_.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0, classifier_dropout_prob=0, **V)))
img("cvt", lambda: T_.CvtForImageClassification(T_.CvtConfig(num_stages=2, patch_sizes=[7, 3], patch_stride=[4, 2], patch_padding=[2, 1], embed_dim=[16, 32], num_heads=[1, 2], depth=[1, 1], mlp_ratio=[2.0, 2.0], drop_rate=[0.0, 0.0], attention_drop_rate=[0.0, 0.0], drop_path_rate=[0.0, 0.0], qkv_bias=[True, True], cls_token=[False, True], qkv_projection_method=["dw_bn", "dw_bn"], kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2], padding_q=[1, 1], stride_q=[1, 1], **V)))
img("focalnet", lambda: T_.FocalNetForImageClassification(T_.FocalNetConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3], hidden_dropout_prob=0, drop_path_rate=0, **V)))
img("dinat", lambda: None)
img("bit", lambda: T_.BitForImageClassification(T_.BitConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="bottleneck", global_padding="SAME", **V)))
img("data2vec", lambda: T_.Data2VecVisionForImageClassification(T_.Data2VecVisionConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0, use_relative_position_bias=True, **V)))
img("vitmsn", lambda: T_.ViTMSNForImageClassification(T_.ViTMSNConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0, attention_probs_dropout_prob=0, **V)))
img("hiera", lambda: T_.HieraForImageClassification(T_.HieraConfig(image_size=[32, 32], patch_size=[3, 3], patch_stride=[2, 2], patch_padding=[1, 1], embed_dim=16, depths=[1, 1], num_heads=[1, 2], query_stride=[2, 2], masked_unit_size=[4, 4], drop_path_rate=0, **V)))
