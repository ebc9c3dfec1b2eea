"""Scratch survey: speech, audio and multimodal transformers models given their labels, through
from_torch(loss="output") (or loss="ctc" on a CTC head's logits), 3 AdamW steps in tightfit and in
PyTorch from the same weights. usage: hf_audio_survey.py [name ...]"""
import copy, os, sys, torch
sys.path.insert(0, "/work/main/python"); sys.path.insert(0, "/work/main/tests/python")
import tightfit, transformers
from torch_training import adamw_losses
transformers.logging.set_verbosity_error()
torch.set_num_threads(1)
T_ = transformers
B = 2
# as test_from_torch_transformers.py: Debian's PyTorch 1.13 fails torch.distributed.fsdp's import under Python 3.11
# (nothing here is sharded), and computes GELU's float32 gradient wrongly from a non-contiguous gradient
import transformers.models.hubert.modeling_hubert as _hubert
import transformers.models.wav2vec2.modeling_wav2vec2 as _wav2vec2
import transformers.models.wavlm.modeling_wavlm as _wavlm
import importlib
for _name in ("wav2vec2_conformer", "sew", "sew_d", "unispeech", "unispeech_sat", "data2vec", "speecht5"):
    for _mod in ("modeling_" + _name, "modeling_data2vec_audio"):
        try:
            _m = importlib.import_module(f"transformers.models.{_name}.{_mod}")
            if hasattr(_m, "is_fsdp_managed_module"):
                _m.is_fsdp_managed_module = lambda module: False
        except ImportError:
            pass
for _speech in (_wav2vec2, _hubert, _wavlm):
    _speech.is_fsdp_managed_module = lambda module: False
_gelu = torch.nn.functional.gelu
def gelu_with_contiguous_gradient(x, approximate="none"):
    y = _gelu(x, approximate=approximate)
    if y.requires_grad and not torch.jit.is_tracing():
        y.register_hook(lambda gradient: gradient.contiguous())
    return y
torch.nn.functional.gelu = gelu_with_contiguous_gradient


class Own(torch.nn.Module):
    def __init__(s, m, names, field="loss", **fixed):
        super().__init__(); s.m, s.names, s.field, s.fixed = m, names, field, fixed
    def forward(s, *args):
        return getattr(s.m(**dict(zip(s.names, args)), **s.fixed), s.field)


def without_noise(model):
    """Dropout, layer drop and SpecAugment masking off (from_torch exports without them; PyTorch's
    side must train without them to compare), the model in training mode otherwise."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        for name, value in list(vars(m).items()):
            if ("dropout" in name or "layerdrop" in name) and isinstance(value, float):
                setattr(m, name, 0.0)
        config = getattr(m, "config", None)
        for name in ("mask_time_prob", "mask_feature_prob", "layerdrop", "encoder_layerdrop", "decoder_layerdrop"):
            if config is not None and isinstance(getattr(config, name, None), float):
                setattr(config, name, 0.0)
    return model.train()


def run(label, model, inputs, loss="output", labels=None, criterion=None, label_length=None, dynamic_batch=True, **fixed):
    torch.manual_seed(0)
    w = Own(without_noise(model), list(inputs), "loss" if loss == "output" else "logits", **fixed)
    start = w  # from_torch leaves the module's weights as they were
    try:
        g = tightfit.from_torch(w, tuple(inputs.values()), loss=loss, input_names=list(inputs), label_length=label_length,
                              dynamic_batch=dynamic_batch)
        plan = tightfit.compile(g, **({"set": {"N": B}} if dynamic_batch else {}), optimizer="adamw", lr=1e-3, weight_decay=0, clip=0)
        s = tightfit.Session(plan, seed=0)
        feed = {k: v.numpy() for k, v in inputs.items()}
        if labels is not None:
            feed["labels"] = labels.numpy()
        got = [s.step(feed) for _ in range(3)]
        want = adamw_losses(start, tuple(inputs.values()), labels, 3, 1e-3,
                            criterion=criterion or (lambda l, _: l))
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        print(f"{'OK ' if worst < 1e-4 else 'DIFF'} {label}: {got[0]:.6f}->{got[-1]:.6f} vs {want[0]:.6f}->{want[-1]:.6f} worst {worst:.1e}", flush=True)
    except Exception as e:
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:600]}", flush=True)


def ctc_criterion(logits, labels):
    """tightfit's loss="ctc": labels [N, L] ended by a negative; F.ctc_loss(log_softmax, reduction='mean')."""
    lengths = torch.tensor([int((row >= 0).cumprod(0).sum()) for row in labels])
    targets = torch.cat([row[:n] for row, n in zip(labels, lengths)])
    log_probs = torch.log_softmax(logits, -1).transpose(0, 1)
    return torch.nn.functional.ctc_loss(log_probs, targets, torch.full((logits.shape[0],), logits.shape[1]), lengths,
                                        reduction="mean")


which = sys.argv[1:]
def want(n): return not which or n in which
torch.manual_seed(1)
V = 40
text = torch.randint(3, V, (B, 6)); text_labels = text.clone(); text_labels[:, 5:] = -100
audio = torch.randn(B, 1600)
feats80 = torch.randn(B, 80, 32)

if want("whisper"):
    c = T_.WhisperConfig(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                         d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=80, max_source_positions=16,
                         max_target_positions=16, vocab_size=V, decoder_start_token_id=1, pad_token_id=0)
    run("whisper", T_.WhisperForConditionalGeneration(c), {"input_features": feats80, "labels": text_labels})
if want("speech2text"):
    c = T_.Speech2TextConfig(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                             d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, input_feat_per_channel=80,
                             max_source_positions=64, max_target_positions=16, vocab_size=V, conv_channels=32,
                             decoder_start_token_id=1, pad_token_id=0)
    run("speech2text", T_.Speech2TextForConditionalGeneration(c), {"input_features": feats80.transpose(1, 2), "labels": text_labels})
if want("speecht5_asr"):
    c = T_.SpeechT5Config(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                          hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, conv_dim=(32, 32),
                          conv_kernel=(10, 3), conv_stride=(5, 2), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                          max_text_positions=32, max_speech_positions=400, speech_decoder_prenet_units=32,
                          decoder_start_token_id=1, pad_token_id=0)
    run("speecht5_asr", T_.SpeechT5ForSpeechToText(c), {"input_values": audio, "labels": text_labels})
if want("speecht5_tts"):
    c = T_.SpeechT5Config(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                          hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, num_mel_bins=16,
                          speech_decoder_prenet_units=32, speech_decoder_postnet_units=32, speech_decoder_postnet_layers=2,
                          reduction_factor=2, max_text_positions=32, max_speech_positions=64, speaker_embedding_dim=8,
                          pad_token_id=0, use_guided_attention_loss=False)
    run("speecht5_tts", T_.SpeechT5ForTextToSpeech(c), {"input_ids": text, "labels": torch.randn(B, 10, 16),
                                                        "speaker_embeddings": torch.randn(B, 8)})
ctc_labels = torch.full((B, 4), -1, dtype=torch.int64); ctc_labels[0, :3] = torch.tensor([3, 5, 7]); ctc_labels[1, :2] = torch.tensor([4, 4])
def ctc_model(name, cls, config_cls, **extra):
    if want(name):
        c = config_cls(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=V,
                       conv_dim=(32, 32), conv_kernel=(10, 3), conv_stride=(5, 2), num_conv_pos_embeddings=16,
                       num_conv_pos_embedding_groups=2, **extra)
        run(name, cls(c), {"input_values": audio}, loss="ctc", labels=ctc_labels, criterion=ctc_criterion, label_length=4)
ctc_model("wav2vec2_ctc", T_.Wav2Vec2ForCTC, T_.Wav2Vec2Config)
ctc_model("wav2vec2_conformer", T_.Wav2Vec2ConformerForCTC, T_.Wav2Vec2ConformerConfig, conv_depthwise_kernel_size=7)
ctc_model("sew", T_.SEWForCTC, T_.SEWConfig, squeeze_factor=2)
ctc_model("sew_d", T_.SEWDForCTC, T_.SEWDConfig, squeeze_factor=2, position_buckets=16, max_position_embeddings=64)
ctc_model("unispeech", T_.UniSpeechForCTC, T_.UniSpeechConfig)
ctc_model("unispeech_sat", T_.UniSpeechSatForCTC, T_.UniSpeechSatConfig)
ctc_model("data2vec_audio", T_.Data2VecAudioForCTC, T_.Data2VecAudioConfig, conv_pos_kernel_size=5)
ctc_model("hubert_ctc", T_.HubertForCTC, T_.HubertConfig)
if want("clip_fixed"):
    c = T_.CLIPConfig(text_config=dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                       vocab_size=V, max_position_embeddings=16),
                      vision_config=dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                         image_size=32, patch_size=8), projection_dim=16)
    run("clip_fixed", T_.CLIPModel(c), {"input_ids": text, "pixel_values": torch.randn(B, 3, 32, 32)}, return_loss=True,
        dynamic_batch=False)
if want("clip"):
    c = T_.CLIPConfig(text_config=dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                       vocab_size=V, max_position_embeddings=16),
                      vision_config=dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                         image_size=32, patch_size=8), projection_dim=16)
    run("clip", T_.CLIPModel(c), {"input_ids": text, "pixel_values": torch.randn(B, 3, 32, 32)}, return_loss=True)
if want("siglip"):
    c = T_.SiglipConfig(text_config=dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                         vocab_size=V, max_position_embeddings=16),
                        vision_config=dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                           image_size=32, patch_size=8))
    run("siglip", T_.SiglipModel(c), {"input_ids": text, "pixel_values": torch.randn(B, 3, 32, 32)}, return_loss=True)
if want("musicgen"):
    dc = T_.MusicgenDecoderConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, ffn_dim=64, vocab_size=V,
                                  num_codebooks=2, max_position_embeddings=32)
    run("musicgen", T_.MusicgenForCausalLM(dc), {"input_ids": torch.randint(0, V, (B * 2, 6)),
                                                  "labels": torch.randint(0, V, (B, 6, 2))})
if want("musicgen_fixed"):
    dc = T_.MusicgenDecoderConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, ffn_dim=64, vocab_size=V,
                                  num_codebooks=2, max_position_embeddings=32)
    run("musicgen_fixed", T_.MusicgenForCausalLM(dc), {"input_ids": torch.randint(0, V, (B * 2, 6)),
                                                        "labels": torch.randint(0, V, (B, 6, 2))}, dynamic_batch=False)
if want("fastspeech2"):
    c = T_.FastSpeech2ConformerConfig(hidden_size=32, vocab_size=V, num_mel_bins=16, encoder_layers=2, decoder_layers=2,
                                      encoder_num_attention_heads=2, decoder_num_attention_heads=2,
                                      encoder_linear_units=64, decoder_linear_units=64, speech_decoder_postnet_layers=2,
                                      speech_decoder_postnet_units=32, duration_predictor_layers=2,
                                      duration_predictor_channels=32, pitch_predictor_layers=2, pitch_predictor_channels=32,
                                      energy_predictor_layers=2, energy_predictor_channels=32)
    run("fastspeech2", T_.FastSpeech2ConformerModel(c), {"input_ids": text, "spectrogram_labels": torch.randn(B, 12, 16),
                                                          "duration_labels": torch.full((B, 6), 2, dtype=torch.int64),
                                                          "pitch_labels": torch.randn(B, 6, 1),
                                                          "energy_labels": torch.randn(B, 6, 1)})
