import sys, copy, torch, warnings
sys.path.insert(0, "/work/main/python"); sys.path.insert(0, "/work/main/tests/python")
import tightfit, transformers
from torch_training import adamw_losses
transformers.logging.set_verbosity_error(); warnings.filterwarnings("ignore")
torch.set_num_threads(1)
T_ = transformers
class Own(torch.nn.Module):
    def __init__(s, m, names): super().__init__(); s.m, s.names = m, names
    def forward(s, *args): return s.m(**dict(zip(s.names, args))).loss
def run(label, model, inputs, steps=3):
    torch.manual_seed(0)
    w = Own(model.train(), list(inputs)); start = copy.deepcopy(w)
    try:
        g = tightfit.from_torch(w, tuple(inputs.values()), loss="output", input_names=list(inputs))
        s = tightfit.Session(tightfit.compile(g, set={"N": 2}, optimizer="adamw", lr=1e-3, weight_decay=0, clip=0), seed=0)
        feed = {k: v.numpy() for k, v in inputs.items()}
        got = [s.step(feed) for _ in range(steps)]
        want = adamw_losses(start, tuple(inputs.values()), None, steps, 1e-3, criterion=lambda l, _: l)
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        print(f"{'OK ' if worst < 1e-4 else 'DIFF'} {label}: {got[0]:.6f}->{got[-1]:.6f} vs {want[0]:.6f}->{want[-1]:.6f} worst {worst:.1e}", flush=True)
    except Exception as e:
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:700]}", flush=True)
which = sys.argv[1:]
def want(n): return not which or n in which
B, ctx, pred = 2, 16, 4
torch.manual_seed(1)
TS = dict(prediction_length=pred, context_length=ctx, lags_sequence=[1, 2, 3], num_time_features=1, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, d_model=16, encoder_ffn_dim=32, decoder_ffn_dim=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
past = ctx + 3
ts_inputs = {"past_values": torch.randn(B, past).abs() + 1, "past_time_features": torch.arange(past, dtype=torch.float32).repeat(B, 1)[..., None] / past, "past_observed_mask": torch.ones(B, past), "future_values": torch.randn(B, pred).abs() + 1, "future_time_features": (torch.arange(pred, dtype=torch.float32) + past).repeat(B, 1)[..., None] / past}
if want("tst"): run("TimeSeriesTransformer", T_.TimeSeriesTransformerForPrediction(T_.TimeSeriesTransformerConfig(**TS)), ts_inputs)
if want("informer"): run("Informer", T_.InformerForPrediction(T_.InformerConfig(attention_type="full", **TS)), ts_inputs)
if want("informer_prob"): run("Informer prob", T_.InformerForPrediction(T_.InformerConfig(attention_type="prob", sampling_factor=2, **TS)), ts_inputs)
if want("autoformer"): run("Autoformer", T_.AutoformerForPrediction(T_.AutoformerConfig(moving_average=5, autocorrelation_factor=2, label_length=4, **TS)), ts_inputs)
if want("patchtsmixer"):
    c = T_.PatchTSMixerConfig(context_length=32, patch_length=8, patch_stride=8, num_input_channels=3, prediction_length=4, d_model=16, num_layers=2, dropout=0.0, head_dropout=0.0)
    run("PatchTSMixer", T_.PatchTSMixerForPrediction(c), {"past_values": torch.randn(B, 32, 3), "future_values": torch.randn(B, 4, 3)})
if want("dpt"):
    c = T_.DPTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 16, 16], fusion_hidden_size=16, hidden_dropout_prob=0, attention_probs_dropout_prob=0, head_in_index=-1, reassemble_factors=[4, 2, 1, 0.5])
    run("DPT depth", T_.DPTForDepthEstimation(c), {"pixel_values": torch.randn(B, 3, 32, 32), "labels": torch.rand(B, 32, 32) + 0.1})
if want("upernet"):
    bc = T_.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], out_features=["stage1", "stage2", "stage3", "stage4"])
    c = T_.UperNetConfig(backbone_config=bc, hidden_size=16, num_labels=3, auxiliary_in_channels=16, auxiliary_channels=8, use_auxiliary_head=False)
    run("UperNet", T_.UperNetForSemanticSegmentation(c), {"pixel_values": torch.randn(B, 3, 64, 64), "labels": torch.randint(0, 3, (B, 64, 64))})
if want("segformer"): pass
if want("mobilevit_seg"):
    c = T_.MobileViTConfig(image_size=64, hidden_sizes=[16, 16, 16], neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32], num_labels=3, hidden_dropout_prob=0, attention_probs_dropout_prob=0, classifier_dropout_prob=0, aspp_dropout_prob=0, aspp_out_channels=16)
    run("MobileViT seg", T_.MobileViTForSemanticSegmentation(c), {"pixel_values": torch.randn(B, 3, 64, 64), "labels": torch.randint(0, 3, (B, 32, 32))})
if want("vitmae"):
    c = T_.ViTMAEConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8, decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2, decoder_intermediate_size=32, mask_ratio=0.5, hidden_dropout_prob=0, attention_probs_dropout_prob=0)
    run("ViTMAE", T_.ViTMAEForPreTraining(c), {"pixel_values": torch.randn(B, 3, 32, 32), "noise": torch.rand(B, 16)})
if want("videomae"):
    c = T_.VideoMAEConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8, num_frames=4, tubelet_size=2, num_labels=3, hidden_dropout_prob=0, attention_probs_dropout_prob=0)
    run("VideoMAE cls", T_.VideoMAEForVideoClassification(c), {"pixel_values": torch.randn(B, 4, 3, 32, 32), "labels": torch.tensor([0, 2])})
if want("timesformer"):
    c = T_.TimesformerConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8, num_frames=4, num_labels=3, hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0)
    run("TimeSformer", T_.TimesformerForVideoClassification(c), {"pixel_values": torch.randn(B, 4, 3, 32, 32), "labels": torch.tensor([0, 2])})
if want("vivit"):
    c = T_.VivitConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, tubelet_size=[2, 8, 8], num_frames=4, num_labels=3, hidden_dropout_prob=0, attention_probs_dropout_prob=0)
    run("ViViT", T_.VivitForVideoClassification(c), {"pixel_values": torch.randn(B, 4, 3, 32, 32), "labels": torch.tensor([0, 2])})
if want("swin2sr"):
    c = T_.Swin2SRConfig(image_size=16, patch_size=1, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, upscale=2, hidden_dropout_prob=0, attention_probs_dropout_prob=0, drop_path_rate=0)
    class SR(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, pixel_values, target): return torch.nn.functional.l1_loss(s.m(pixel_values=pixel_values).reconstruction, target)
    m = SR(T_.Swin2SRForImageSuperResolution(c))
    class Wrap:
        pass
    import types
    torch.manual_seed(0)
    x, t = torch.randn(B, 3, 16, 16), torch.randn(B, 3, 32, 32)
    try:
        g = tightfit.from_torch(m, (x, t), loss="output", input_names=["pixel_values", "target"])
        print("OK  Swin2SR imports")
    except Exception as e: print("FAIL Swin2SR:", str(e)[:500])
