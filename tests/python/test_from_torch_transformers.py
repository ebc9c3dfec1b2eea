"""tightfit.from_torch on models nobody here wrote (issue 44, item 5): Hugging Face `transformers`
architectures built from their configs with random weights (no download) — GPT-2 (LM head), BERT
and RoBERTa (sequence classification, masked LM), DistilBERT, MPNet, ALBERT and ELECTRA (masked LM),
T5's encoder, ViT, BEiT, Swin, ConvNeXt and PoolFormer (image classification), Whisper's encoder, Wav2Vec2 (its
CTC head's logits), HuBERT, WavLM, OPT, GPT-NeoX, Falcon, BART, BLOOM, DeBERTa (v1 and v2), Funnel,
MobileBERT, XLNet, XLM, SqueezeBERT, the encoder-decoders T5, Pegasus and Marian (source and decoder
ids, two inputs), GPT-Neo, GPT-J, CodeGen, GPTBigCode, Phi, StableLM, Starcoder2, OLMo and the Llama
family's causal LMs (Llama, Qwen2, Phi-3, Gemma, Mistral: rotary positions, RMSNorm, SwiGLU,
grouped-query attention), GPT-NeoX-Japanese, SigLIP's and CLIP's vision towers, RWKV, Gemma-2, MPT, OLMoE,
ResNet, SegFormer, Wav2Vec2-Conformer, Wav2Vec2-BERT, SEW, Speech2Text, SpeechT5's speech-to-text and
text-to-speech and its HiFi-GAN vocoder, M2M-100, PatchTST, DETR, Granite, Granite MoE, Falcon-Mamba,
Jamba and (under PyTorch 2.x only) Nemotron — each small (2 layers, d 32), in train mode with dropout 0. Each is
imported, its forward pass checked against onnxruntime running the very ONNX file from_torch wrote
(the loss of the first batch from onnxruntime's outputs within 1e-5 of tightfit's; the models whose
integer arithmetic runs as casts and f32 ops also on Vulkan against the CPU), then trained 10 AdamW
steps from the module's own weights against PyTorch training the same module
(torch_training.train_both: losses and trained weights within 1e-5).
Needs the virtual environment scripts/setup makes (transformers, onnxruntime: scripts/requirements-test.txt)
over Debian's PyTorch, or .venv-torch2 (PyTorch 2.11, the same transformers: python_from_torch_transformers_torch2).
usage: test_from_torch_transformers.py   (PYTHONPATH=python)"""
import copy
import os
import warnings

import numpy as np
import onnx
import onnxruntime
import torch
import transformers

import tightfit
from tally import case, finish, relative_apart
from torch_training import BATCH, adamw_losses, train_both

print("library:", tightfit.library_path(), "transformers", transformers.__version__, "onnxruntime",
      onnxruntime.__version__, "torch", torch.__version__)
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
# The speech encoders (Wav2Vec2 and its kin, SpeechT5, M2M-100's layer drop) ask whether they run under
# FSDP, which imports torch.distributed.fsdp; under Python 3.11 Debian's PyTorch 1.13 fails that import (a
# dataclass with a mutable default). Nothing here is sharded: the answer is no.
for _name in ("wav2vec2", "hubert", "wavlm", "data2vec.modeling_data2vec_audio", "sew", "unispeech",
              "unispeech_sat", "wav2vec2_conformer", "wav2vec2_bert", "speecht5", "m2m_100"):
    _module = __import__("transformers.models." + (_name if "." in _name else f"{_name}.modeling_{_name}"),
                         fromlist=["is_fsdp_managed_module"])
    _module.is_fsdp_managed_module = lambda module: False
_gelu = torch.nn.functional.gelu


def gelu_with_contiguous_gradient(x, approximate="none"):
    """PyTorch's side only (not while from_torch traces): Debian's PyTorch 1.13 computes wrong float32
    gradients through GELU when the gradient reaching its output is a transposed, non-contiguous tensor
    (Whisper's and Wav2Vec2's convolutions are followed by GELU and a transpose): nan, or values 1e30
    too large, changing from call to call, where float64, or a contiguous copy of that gradient, give
    the right ones (tightfit's are float64's). Set before the models are built, as Hugging Face's
    GELUActivation keeps the function it finds then."""
    y = _gelu(x, approximate=approximate)
    if y.requires_grad and not torch.jit.is_tracing():
        y.register_hook(lambda gradient: gradient.contiguous())
    return y


torch.nn.functional.gelu = gelu_with_contiguous_gradient


class Wrapped(torch.nn.Module):
    """The model's first output as a plain tensor (return_dict=False), flattened to [-1, classes] for
    a per-token cross_entropy when `flat` is set."""

    def __init__(self, model, keyword, flat=None):
        super().__init__()
        self.model, self.keyword, self.flat = model, keyword, flat

    def forward(self, x):
        y = self.model(**{self.keyword: x}, return_dict=False)[0]
        return y.reshape(-1, self.flat) if self.flat else y


def numpy_loss(output, labels, loss):
    """The loss PyTorch computes, from onnxruntime's output, in float64."""
    output = output.astype(np.float64)
    if loss == "mse":
        return float(np.mean((output - labels.numpy().astype(np.float64)) ** 2))
    shifted = output - output.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_probs[np.arange(len(labels)), labels.numpy()]))


def forward_only(path):
    """from_torch's ONNX file as onnxruntime can run it: each tightfit::StopGradient (a detach(), the
    identity in the forward pass) written as an Identity. Returns the serialized model."""
    model = onnx.load(path)
    for node in model.graph.node:
        if node.domain == "tightfit" and node.op_type == "StopGradient":
            node.domain, node.op_type = "", "Identity"
    return model.SerializeToString()


def against_onnxruntime(inputs, labels, loss):
    """A before_training check: onnxruntime runs from_torch's ONNX file on the first batch; the loss
    of its output must be tightfit's forward loss within 1e-5 (relative)."""
    def check(graph, session, feed):
        runner = onnxruntime.InferenceSession(forward_only(os.path.join(graph._dir, "model.onnx")),
                                              providers=["CPUExecutionProvider"])
        output = runner.run(None, {name: t.numpy() for name, t in inputs.items()})[0]
        expected = numpy_loss(output, labels, loss)
        got = session.forward(feed)
        apart = abs(got - expected) / abs(expected)
        seen = f"first loss {got:.6f}, onnxruntime's {expected:.6f} ({apart:.1e} apart)"
        return (f"the forward loss is not onnxruntime's: {seen}" if apart > 1e-5 else None), seen
    return check


def and_on_vulkan(check):
    """`check`, then the same plan on Vulkan (lavapipe here): its first loss and two AdamW steps must be
    the CPU's within 1e-5 (relative). For models whose integer arithmetic (positions, shifted ids,
    masks) runs as casts and f32 ops, which the Vulkan shaders must take too."""
    def both(graph, session, feed):
        problem, seen = check(graph, session, feed)
        if problem:
            return problem, seen
        plan = tightfit.compile(graph, set={"N": BATCH}, optimizer="adamw", lr=1e-2, weight_decay=0, clip=0)
        try:
            gpu = tightfit.Session(plan, seed=0, device="vulkan")
        except tightfit.TightfitError as error:
            if "no Vulkan" in str(error):
                return None, f"{seen}; skipped on Vulkan: no Vulkan device"
            raise
        cpu = tightfit.Session(plan, seed=0)
        got = [gpu.forward(feed)] + [gpu.step(feed) for _ in range(2)]
        want = [cpu.forward(feed)] + [cpu.step(feed) for _ in range(2)]
        apart = relative_apart(got, want)
        seen += f"; on Vulkan {got[0]:.6f} -> {got[-1]:.6f} ({apart:.1e} from the CPU's)"
        return (f"Vulkan's losses {got} are not the CPU's {want}" if apart > 1e-5 else None), seen
    return both


def run(model, inputs, labels, loss, vulkan=False, onnxruntime_too=True):
    """train_both, checking the first loss against onnxruntime's unless `onnxruntime_too` is False (a
    file onnxruntime refuses), and on Vulkan when `vulkan`."""
    model.train()
    check = against_onnxruntime(inputs, labels, loss) if onnxruntime_too else None
    return train_both(model, inputs, labels, loss, before_training=and_on_vulkan(check) if vulkan else check)


# BERT, Whisper and Wav2Vec2 start from weights of std 0.2 rather than their configs' 0.02: at 0.02 the
# attention of these small models is nearly uniform, most first gradients of the query and key weights
# are below 1e-6, and train_both leaves such elements out of the weight comparison (over 5% of them
# fails it). At 0.2 the same weights are compared like every other.


def gpt2():
    torch.manual_seed(20)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = Wrapped(transformers.GPT2LMHeadModel(config), "input_ids", flat=64)
    ids = torch.randint(0, 64, (BATCH, 12))
    return run(model, {"input_ids": ids}, torch.randint(0, 64, (BATCH * 12,)), "cross_entropy")


def bert():
    torch.manual_seed(21)
    config = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                     intermediate_size=64, vocab_size=64, max_position_embeddings=16,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3,
                                     attn_implementation="eager", initializer_range=0.2)
    model = Wrapped(transformers.BertForSequenceClassification(config), "input_ids")
    ids = torch.randint(0, 64, (BATCH, 10))
    return run(model, {"input_ids": ids}, torch.randint(0, 3, (BATCH,)), "cross_entropy")


def vit():
    torch.manual_seed(22)
    config = transformers.ViTConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                    image_size=16, patch_size=4, num_channels=3, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0, num_labels=5, attn_implementation="eager")
    model = Wrapped(transformers.ViTForImageClassification(config), "pixel_values")
    return run(model, {"pixel_values": torch.randn(BATCH, 3, 16, 16)}, torch.randint(0, 5, (BATCH,)),
               "cross_entropy")


def whisper_encoder():
    torch.manual_seed(23)
    config = transformers.WhisperConfig(encoder_layers=2, encoder_attention_heads=2, decoder_layers=1,
                                        decoder_attention_heads=2, decoder_ffn_dim=64, d_model=32, encoder_ffn_dim=64,
                                        num_mel_bins=8, max_source_positions=16, dropout=0.0, attention_dropout=0.0,
                                        activation_dropout=0.0, attn_implementation="eager", init_std=0.2)
    model = Wrapped(transformers.WhisperModel(config).encoder, "input_features")
    # the encoder takes 2 * max_source_positions frames; its second convolution has stride 2
    return run(model, {"input_features": torch.randn(BATCH, 8, 32)}, torch.randn(BATCH, 16, 32), "mse")


def wav2vec2():
    torch.manual_seed(24)
    config = transformers.Wav2Vec2Config(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                         intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                                         conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                         num_conv_pos_embedding_groups=4, vocab_size=12, hidden_dropout=0.0,
                                         attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                                         final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, initializer_range=0.2)
    model = Wrapped(transformers.Wav2Vec2ForCTC(config), "input_values")
    samples = 400  # (400 - 10) / 5 + 1 = 79 frames, then (79 - 3) / 2 + 1 = 39
    return run(model, {"input_values": torch.randn(BATCH, samples)}, torch.randn(BATCH, 39, 12), "mse")


def speech_encoder(model_class, config_class, seed, **extra):
    """A Wav2Vec2-style encoder (HuBERT; WavLM, whose gated relative position bias is bucketed by a log
    of the positions and tiled over the batch) of 2 layers, d 32, mse on its last hidden state."""
    def build():
        torch.manual_seed(seed)
        config = config_class(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                              conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                              num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0,
                              activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0,
                              initializer_range=0.2, **extra)
        model = Wrapped(model_class(config), "input_values")
        return run(model, {"input_values": torch.randn(BATCH, 400)}, torch.randn(BATCH, 39, 32), "mse")
    return build


def distilbert():
    """DistilBERT builds its attention mask as torch.ones(input_shape) when given none and compares it
    with 0 (a float Equal), which the importer folds: a constant fill."""
    torch.manual_seed(41)
    config = transformers.DistilBertConfig(n_layers=2, n_heads=2, dim=32, hidden_dim=64, vocab_size=64,
                                           max_position_embeddings=40, dropout=0.0, attention_dropout=0.0,
                                           initializer_range=0.05)
    model = Wrapped(transformers.DistilBertForMaskedLM(config), "input_ids", flat=64)
    ids = torch.randint(3, 64, (BATCH, 12))
    return run(model, {"input_ids": ids}, torch.randint(0, 64, (BATCH * 12,)), "cross_entropy")


def roberta():
    """RoBERTa numbers its positions from the ids: cumsum(ids != pad) * (ids != pad) + pad, integer
    arithmetic and a CumSum on data, which import as f32 ops between casts and a product with a 0/1
    triangle. Two rows end in padding, so the positions differ from row to row."""
    torch.manual_seed(40)
    config = transformers.RobertaConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                        intermediate_size=64, vocab_size=64, max_position_embeddings=40,
                                        pad_token_id=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                        initializer_range=0.05, num_labels=3)
    model = Wrapped(transformers.RobertaForSequenceClassification(config), "input_ids")
    ids = torch.randint(3, 64, (BATCH, 12))
    ids[0, 9:] = ids[2, 5:] = 1
    return run(model, {"input_ids": ids}, torch.randint(0, 3, (BATCH,)), "cross_entropy", vulkan=True)


def roberta_masked_lm():
    """RobertaForMaskedLM ties its head to the word embeddings, whose padding row PyTorch then trains
    through the head while its lookups of the padding id read the row as it trains, with no gradient:
    from_torch exports that read as the row detached (tightfit's StopGradient). Two rows end in
    padding."""
    torch.manual_seed(41)
    config = transformers.RobertaConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=32,
                                        intermediate_size=64, vocab_size=64, max_position_embeddings=40,
                                        pad_token_id=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                        initializer_range=0.05)
    model = Wrapped(transformers.RobertaForMaskedLM(config), "input_ids", flat=64)
    ids = torch.randint(3, 64, (BATCH, 12))
    ids[0, 9:] = ids[2, 5:] = 1
    return run(model, {"input_ids": ids}, torch.randint(0, 64, (BATCH * 12,)), "cross_entropy")


def t5_encoder():
    """T5's relative position buckets: |j - i|, a log, a truncating cast, a min and a where over the
    positions, which the importer folds into the [T, T] bucket ids of an embedding lookup (log(0) is
    -inf, cast to int64 as CUDA does, and left out by the where, as in PyTorch)."""
    torch.manual_seed(42)
    config = transformers.T5Config(num_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=64,
                                   dropout_rate=0.0, relative_attention_num_buckets=8,
                                   relative_attention_max_distance=16)
    model = Wrapped(transformers.T5EncoderModel(config), "input_ids")
    return run(model, {"input_ids": torch.randint(0, 64, (BATCH, 12))}, torch.randn(BATCH, 12, 32), "mse")


def image_classifier(model_class, config, seed):
    """An image classifier of `config` on 32x32 images, 5 classes."""
    def build():
        torch.manual_seed(seed)
        model = Wrapped(model_class(config), "pixel_values")
        return run(model, {"pixel_values": torch.randn(BATCH, 3, 32, 32)}, torch.randint(0, 5, (BATCH,)),
                   "cross_entropy")
    return build


def causal_lm(config, model_class, seed, lowest_id=0, vulkan=False, onnxruntime_too=True):
    """A causal (or masked) LM of `config` (its own argument names), per-token cross_entropy over 12
    token ids from lowest_id; also on Vulkan when `vulkan`; run's `onnxruntime_too`."""
    def build():
        torch.manual_seed(seed)
        model = Wrapped(model_class(config), "input_ids", flat=64)
        ids = torch.randint(lowest_id, 64, (BATCH, 12))
        return run(model, {"input_ids": ids}, torch.randint(0, 64, (BATCH * 12,)), "cross_entropy", vulkan,
                   onnxruntime_too)
    return build


def masked_lm(config, model_class, seed, vulkan=False):
    """A masked LM of `config`: ids from 3, past its special tokens."""
    return causal_lm(config, model_class, seed, lowest_id=3, vulkan=vulkan)


class Seq2Seq(torch.nn.Module):
    """An encoder-decoder given the source ids and the decoder's ids (two inputs), its logits flattened
    to [-1, 64] for a per-token cross_entropy."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return self.model(input_ids=x, decoder_input_ids=y, return_dict=False)[0].reshape(-1, 64)


def seq2seq(config, model_class, seed):
    """An encoder-decoder of `config` on 12 source ids and 8 decoder ids, per-token cross_entropy."""
    def build():
        torch.manual_seed(seed)
        ids, decoded = torch.randint(3, 64, (BATCH, 12)), torch.randint(3, 64, (BATCH, 8))
        return run(Seq2Seq(model_class(config)), {"input_ids": ids, "decoder_input_ids": decoded},
                   torch.randint(0, 64, (BATCH * 8,)), "cross_entropy")
    return build


def decoder(config_class, model_class, seed, **extra):
    """A Llama-family causal LM (rotary positions, RMSNorm, SwiGLU, grouped-query attention: 4 query
    heads over 2 key/value heads), per-token cross_entropy. Its rotary cos/sin tables and causal mask
    are computed from positions (Range, MatMul, Cos, Sin, Greater), which the importer folds into
    constants. Weights of std 0.05 (the configs' 0.02 leaves dozens of near-zero first gradients; at
    0.1-0.2 some of these models' own f32 training departs from float64's by 3e-4 within 10 steps)."""
    def build():
        torch.manual_seed(seed)
        config = config_class(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                              intermediate_size=64, vocab_size=64, max_position_embeddings=16, attention_dropout=0.0,
                              attn_implementation="eager", initializer_range=0.05, **extra)
        model = Wrapped(model_class(config), "input_ids", flat=64)
        ids = torch.randint(0, 64, (BATCH, 12))
        return run(model, {"input_ids": ids}, torch.randint(0, 64, (BATCH * 12,)), "cross_entropy")
    return build


case("transformers GPT2LMHeadModel (2 layers, d 32), per-token cross_entropy", gpt2)
case("transformers BertForSequenceClassification (2 layers, d 32), cross_entropy", bert)
case("transformers ViTForImageClassification (2 layers, d 32, 16x16 patches of 4), cross_entropy", vit)
case("transformers RobertaForSequenceClassification (2 layers, d 32, positions from the ids, padded rows), cross_entropy",
     roberta)
case("transformers RobertaForMaskedLM (1 layer, d 32, its head tied to the embeddings, padded rows), per-token "
     "cross_entropy", roberta_masked_lm)
case("transformers Whisper encoder (2 layers, d 32, 8 mel bins), mse", whisper_encoder)
case("transformers Wav2Vec2ForCTC (2 conv + 2 transformer layers, d 32), mse on the logits", wav2vec2)
case("transformers HubertModel (2 conv + 2 transformer layers, d 32), mse", speech_encoder(
    transformers.HubertModel, transformers.HubertConfig, 53))
case("transformers WavLMModel (2 conv + 2 transformer layers, d 32, bucketed relative position bias), mse",
     speech_encoder(transformers.WavLMModel, transformers.WavLMConfig, 54, num_buckets=16, max_bucket_distance=20))
case("transformers DistilBertForMaskedLM (2 layers, d 32, its default mask of ones), per-token cross_entropy",
     distilbert)
case("transformers T5EncoderModel (2 layers, d 32, relative position buckets), mse", t5_encoder)
case("transformers MPNetForMaskedLM (2 layers, d 32, relative position buckets), per-token cross_entropy",
     masked_lm(transformers.MPNetConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                        vocab_size=64, max_position_embeddings=40, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0, initializer_range=0.05),
               transformers.MPNetForMaskedLM, 43))
case("transformers AlbertForMaskedLM (2 layers sharing one, factorized embeddings), per-token cross_entropy",
     masked_lm(transformers.AlbertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, embedding_size=16,
                                         intermediate_size=64, vocab_size=64, max_position_embeddings=16,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                         initializer_range=0.05), transformers.AlbertForMaskedLM, 47))
case("transformers ElectraForMaskedLM (the generator: 2 layers, embeddings of 16 projected), per-token cross_entropy",
     masked_lm(transformers.ElectraConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, embedding_size=16,
                                          intermediate_size=64, vocab_size=64, max_position_embeddings=16,
                                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                          initializer_range=0.2), transformers.ElectraForMaskedLM, 48))
case("transformers BeitForImageClassification (2 layers, relative position bias: an index built by slice assignments, "
     "ScatterND of known values; init 0.2 and layer scale 1: at the defaults over 5% of first gradients are below "
     "1e-6), cross_entropy",
     image_classifier(transformers.BeitForImageClassification,
                      transformers.BeitConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                              num_attention_heads=2, image_size=32, patch_size=8, num_labels=5,
                                              use_relative_position_bias=True, hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0, drop_path_rate=0.0,
                                              initializer_range=0.2, layer_scale_init_value=1.0), 52))
case("transformers SwinForImageClassification (2 stages, windows of 4, shifted), cross_entropy",
     image_classifier(transformers.SwinForImageClassification,
                      transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                              window_size=4, num_labels=5, hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0, drop_path_rate=0.0), 45))
case("transformers ConvNextForImageClassification (2 stages, layer scale 1: at 1e-6 its blocks' gradients are too small "
     "to compare), cross_entropy",
     image_classifier(transformers.ConvNextForImageClassification,
                      transformers.ConvNextConfig(num_stages=2, num_channels=3, hidden_sizes=[8, 16], depths=[1, 1],
                                                  num_labels=5, image_size=32, drop_path_rate=0.0,
                                                  layer_scale_init_value=1.0), 46))
case("transformers FNetForMaskedLM (2 layers, d 32: token mixing by the real part of a 2-d Fourier transform, "
     "torch.fft.fftn(x, dim=(1, 2)).real, as ONNX DFTs), per-token cross_entropy",
     masked_lm(transformers.FNetConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                                       max_position_embeddings=32, hidden_dropout_prob=0.0), transformers.FNetForMaskedLM,
               41, vulkan=True))
case("transformers LlamaForCausalLM (2 layers, d 32, 4 heads over 2 kv heads), per-token cross_entropy",
     decoder(transformers.LlamaConfig, transformers.LlamaForCausalLM, 25))
case("transformers Qwen2ForCausalLM (2 layers, d 32, q/k/v biases), per-token cross_entropy",
     decoder(transformers.Qwen2Config, transformers.Qwen2ForCausalLM, 27))
case("transformers Phi3ForCausalLM (2 layers, d 32, fused qkv and gate_up), per-token cross_entropy",
     decoder(transformers.Phi3Config, transformers.Phi3ForCausalLM, 30, pad_token_id=0))
def llama_as_it_is():
    """LlamaForCausalLM given to from_torch as it is (no wrapper): its forward's defaults stay constants
    (torch.onnx.export would make num_logits_to_keep=0 an int64 input), the logits [N, T, V] meet per-token
    labels [N, T], and the parameters keep the module's state_dict names, which a Hugging Face
    checkpoint uses."""
    torch.manual_seed(37)
    config = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      hidden_size=32, intermediate_size=64, vocab_size=64, max_position_embeddings=16,
                                      attn_implementation="eager", initializer_range=0.05)
    model = transformers.LlamaForCausalLM(config)
    ids, labels = torch.randint(0, 64, (BATCH, 12)), torch.randint(0, 64, (BATCH, 12))
    graph = tightfit.from_torch(model, ids, loss="cross_entropy")
    session = tightfit.Session(tightfit.compile(graph, set={"N": BATCH}), seed=0)
    got = session.forward({"x": ids.numpy(), "labels": labels.numpy()})
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), labels.reshape(-1)).item()
    names = set(session.state_dict())
    missing = sorted(set(dict(model.named_parameters())) - names)
    seen = f"first loss {got:.6f}, PyTorch's {expected:.6f}; {len(names)} parameters by their module names"
    if missing:
        return f"parameters not under their module names: {missing[:3]}", seen
    return (f"the loss is not PyTorch's: {seen}" if abs(got - expected) > 1e-5 * abs(expected) else None), seen


case("transformers GemmaForCausalLM (2 layers, d 32, heads of 8, scaled embeddings), per-token cross_entropy",
     decoder(transformers.GemmaConfig, transformers.GemmaForCausalLM, 50, head_dim=8))
case("transformers LlamaForCausalLM as it is (no wrapper, per-token labels [N, T])", llama_as_it_is)
case("transformers GPTNeoXForCausalLM (Pythia's: partial rotary, parallel residual), per-token cross_entropy",
     causal_lm(transformers.GPTNeoXConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                          intermediate_size=64, vocab_size=64, max_position_embeddings=40,
                                          attention_dropout=0.0, hidden_dropout=0.0, initializer_range=0.05,
                                          attn_implementation="eager"), transformers.GPTNeoXForCausalLM, 42))
case("transformers FalconForCausalLM (rotary, multi-query attention), per-token cross_entropy",
     causal_lm(transformers.FalconConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, vocab_size=64,
                                         hidden_dropout=0.0, attention_dropout=0.0, initializer_range=0.05,
                                         attn_implementation="eager"), transformers.FalconForCausalLM, 45))
case("transformers OPTForCausalLM (positions from the cumulative sum of its mask), per-token cross_entropy",
     causal_lm(transformers.OPTConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, ffn_dim=64,
                                      vocab_size=64, max_position_embeddings=40, dropout=0.0, attention_dropout=0.0,
                                      word_embed_proj_dim=32, init_std=0.05), transformers.OPTForCausalLM, 43))
case("transformers BartForConditionalGeneration (1+1 layers, its decoder ids the input shifted right: a slice "
     "assignment, ScatterND of data), per-token cross_entropy",
     causal_lm(transformers.BartConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                       decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                       vocab_size=64, max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
                                       activation_dropout=0.0, init_std=0.2), transformers.BartForConditionalGeneration,
               56, lowest_id=3, vulkan=True))
case("transformers BloomForCausalLM (ALiBi, its causal mask written by a slice assignment, a float ==), per-token "
     "cross_entropy",
     causal_lm(transformers.BloomConfig(n_layer=2, n_head=2, hidden_size=32, vocab_size=64, hidden_dropout=0.0,
                                        attention_dropout=0.0, initializer_range=0.05),
               transformers.BloomForCausalLM, 57, vulkan=True))
case("transformers DebertaForMaskedLM (disentangled attention: content-to-position and position-to-content scores "
     "gathered by relative position, GatherElements), per-token cross_entropy",
     masked_lm(transformers.DebertaConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                          vocab_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0, relative_attention=True,
                                          pos_att_type=["p2c", "c2p"], max_relative_positions=16,
                                          position_biased_input=False, initializer_range=0.2),
               transformers.DebertaForMaskedLM, 58))
case("transformers DebertaV2ForMaskedLM (DeBERTa-v3's: log-bucketed relative positions, Sign and Ceil folded), "
     "per-token cross_entropy",
     masked_lm(transformers.DebertaV2Config(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                            intermediate_size=64, vocab_size=64, max_position_embeddings=16,
                                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                            relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
                                            max_relative_positions=16, position_biased_input=False,
                                            norm_rel_ebd="layer_norm", share_att_key=True, initializer_range=0.2),
               transformers.DebertaV2ForMaskedLM, 59, vulkan=True))
case("transformers FunnelForMaskedLM (pooled then upsampled sequence, relative positions gathered, token-type masks "
     "of data compared; init 0.1: at 0.2 PyTorch's own f32 training departs from float64's by 4e-4 within 10 steps), "
     "per-token cross_entropy",
     masked_lm(transformers.FunnelConfig(block_sizes=[1, 1], num_decoder_layers=1, d_model=32, n_head=2, d_head=16,
                                         d_inner=64, vocab_size=64, hidden_dropout=0.0, attention_dropout=0.0,
                                         activation_dropout=0.0, initializer_std=0.1),
               transformers.FunnelForMaskedLM, 60, vulkan=True))
case("transformers MobileBertForMaskedLM (bottlenecks, no-norm layers, trigram embeddings: F.pad of data), per-token "
     "cross_entropy",
     masked_lm(transformers.MobileBertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, embedding_size=16,
                                             intermediate_size=64, intra_bottleneck_size=16, vocab_size=64,
                                             max_position_embeddings=16, hidden_dropout_prob=0.0,
                                             attention_probs_dropout_prob=0.0, initializer_range=0.1),
               transformers.MobileBertForMaskedLM, 61))
case("transformers XLNetLMHeadModel (two-stream relative attention by torch.einsum, sinusoids counting down; its "
     "segment and mask embeddings unused without token types), per-token cross_entropy",
     causal_lm(transformers.XLNetConfig(n_layer=2, n_head=2, d_model=32, d_inner=64, vocab_size=64, dropout=0.0,
                                        initializer_range=0.1), transformers.XLNetLMHeadModel, 62))
case("transformers T5ForConditionalGeneration (1+1 layers: the decoder's causal relative buckets, cross-attention; "
     "two inputs), per-token cross_entropy",
     seq2seq(transformers.T5Config(num_layers=1, num_decoder_layers=1, num_heads=2, d_model=32, d_kv=16, d_ff=64,
                                   vocab_size=64, dropout_rate=0.0, relative_attention_num_buckets=8,
                                   relative_attention_max_distance=16), transformers.T5ForConditionalGeneration, 63))
case("transformers PegasusForConditionalGeneration (sinusoidal positions, frozen), per-token cross_entropy",
     seq2seq(transformers.PegasusConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                        decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                        vocab_size=64, max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
                                        activation_dropout=0.0, init_std=0.05),
             transformers.PegasusForConditionalGeneration, 64))
case("transformers MarianMTModel (sinusoidal positions, frozen), per-token cross_entropy",
     seq2seq(transformers.MarianConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                       decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                       vocab_size=64, max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
                                       activation_dropout=0.0, init_std=0.1, pad_token_id=1),
             transformers.MarianMTModel, 65))
# Causal LMs that needed nothing new: GPT-Neo (local attention windows), GPTBigCode (multi-query),
# Phi (partial rotary, parallel blocks), StableLM, Starcoder2 and OLMo (the Llama family's variants);
# SqueezeBERT (grouped 1-d convolutions for its projections)
DECODER = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, intermediate_size=64, vocab_size=64,
               max_position_embeddings=16, initializer_range=0.05)
case("transformers GPTNeoForCausalLM (global and local attention layers, windows of 4), per-token cross_entropy",
     causal_lm(transformers.GPTNeoConfig(num_layers=2, num_heads=2, hidden_size=32, vocab_size=64,
                                         max_position_embeddings=16, attention_types=[[["global", "local"], 1]],
                                         window_size=4, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0,
                                         initializer_range=0.05), transformers.GPTNeoForCausalLM, 66))
case("transformers GPTBigCodeForCausalLM (multi-query attention), per-token cross_entropy",
     causal_lm(transformers.GPTBigCodeConfig(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16,
                                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, multi_query=True,
                                             initializer_range=0.05), transformers.GPTBigCodeForCausalLM, 67))
case("transformers PhiForCausalLM (partial rotary, parallel attention and MLP), per-token cross_entropy",
     causal_lm(transformers.PhiConfig(partial_rotary_factor=0.5, attn_implementation="eager", resid_pdrop=0.0,
                                      embd_pdrop=0.0, attention_dropout=0.0, **DECODER), transformers.PhiForCausalLM, 68))
case("transformers StableLmForCausalLM, per-token cross_entropy",
     causal_lm(transformers.StableLmConfig(attn_implementation="eager", num_key_value_heads=2, **DECODER),
               transformers.StableLmForCausalLM, 69))
case("transformers Starcoder2ForCausalLM, per-token cross_entropy",
     causal_lm(transformers.Starcoder2Config(attn_implementation="eager", num_key_value_heads=2, residual_dropout=0.0,
                                             embedding_dropout=0.0, **DECODER), transformers.Starcoder2ForCausalLM, 70))
case("transformers OlmoForCausalLM (layer norm without parameters), per-token cross_entropy",
     causal_lm(transformers.OlmoConfig(attn_implementation="eager", num_key_value_heads=2, **DECODER),
               transformers.OlmoForCausalLM, 71))
case("transformers GraniteForCausalLM (embedding, residual, attention and logit multipliers), per-token cross_entropy",
     causal_lm(transformers.GraniteConfig(attn_implementation="eager", num_key_value_heads=2, embedding_multiplier=2.0,
                                          residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=2.0,
                                          **DECODER), transformers.GraniteForCausalLM, 87))
case("transformers GraniteMoeForCausalLM (4 experts in stacked weights, the top 2; sorted and split by counts in "
     "PyTorch, computed densely here), per-token cross_entropy",
     causal_lm(transformers.GraniteMoeConfig(attn_implementation="eager", num_key_value_heads=2, num_local_experts=4,
                                             num_experts_per_tok=2, **DECODER), transformers.GraniteMoeForCausalLM, 90))
case("transformers FalconMambaForCausalLM (selective state spaces, RMS-normalised B, C and dt), per-token "
     "cross_entropy",
     causal_lm(transformers.FalconMambaConfig(num_hidden_layers=2, hidden_size=32, state_size=4, expand=2,
                                              conv_kernel=4, vocab_size=64, initializer_range=0.05, use_mambapy=False),
               transformers.FalconMambaForCausalLM, 88))
case("transformers JambaForCausalLM (Mamba and attention layers, a sparse mixture of experts computed densely), "
     "per-token cross_entropy",
     causal_lm(transformers.JambaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                        hidden_size=32, intermediate_size=64, vocab_size=64, num_experts=4,
                                        num_experts_per_tok=2, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2,
                                        attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                                        expert_layer_offset=1, use_mamba_kernels=False, initializer_range=0.05),
               transformers.JambaForCausalLM, 89))
# Architectures whose modules need PyTorch 2.x (Nemotron's LayerNorm1P passes nn.LayerNorm a bias flag,
# PyTorch 2.1's), run by python_from_torch_transformers_torch2 only.
if int(torch.__version__.split(".")[0]) >= 2:
    case("transformers NemotronForCausalLM (layer norm of weight + 1, squared ReLU, partial rotary), per-token "
         "cross_entropy",
         causal_lm(transformers.NemotronConfig(attn_implementation="eager", num_key_value_heads=2, **DECODER),
                   transformers.NemotronForCausalLM, 86))
case("transformers SqueezeBertForMaskedLM (grouped 1-d convolutions), per-token cross_entropy",
     masked_lm(transformers.SqueezeBertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                              intermediate_size=64, embedding_size=32, vocab_size=64,
                                              max_position_embeddings=16, hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0, initializer_range=0.05),
               transformers.SqueezeBertForMaskedLM, 72))
case("transformers GPTJForCausalLM (rotary tables by repeat_interleave: an Expand, not a Loop; parallel "
     "attention and MLP), per-token cross_entropy",
     causal_lm(transformers.GPTJConfig(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16, rotary_dim=8,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.05),
               transformers.GPTJForCausalLM, 73))
case("transformers CodeGenForCausalLM (GPT-J's rotary, a fused qkv projection split in 4 groups), per-token "
     "cross_entropy",
     causal_lm(transformers.CodeGenConfig(n_layer=2, n_head=4, n_embd=32, vocab_size=64, n_positions=16,
                                          n_ctx=16, rotary_dim=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                          initializer_range=0.05), transformers.CodeGenForCausalLM, 74))
case("transformers MistralForCausalLM (a sliding window of 4: its mask by bitwise_or_, which torch 1.13 cannot "
     "export alone), per-token cross_entropy",
     decoder(transformers.MistralConfig, transformers.MistralForCausalLM, 75, sliding_window=4))
# Mamba-2: onnxruntime refuses torch's file itself (its If's branch not taken squeezes an axis of 12).
case("transformers Mamba2ForCausalLM (its chunked selective scan; the exporter's If around a squeeze, whose "
     "condition folds when importing), per-token cross_entropy",
     causal_lm(transformers.Mamba2Config(num_hidden_layers=2, hidden_size=32, state_size=4, vocab_size=64, expand=2,
                                         conv_kernel=4, num_heads=4, head_dim=16, n_groups=1, chunk_size=4,
                                         initializer_range=0.05), transformers.Mamba2ForCausalLM, 80,
               onnxruntime_too=False))
# Sparse mixtures of experts (torch.where(mask) per expert: a shape the data decides) export densely
# (tightfit.from_torch: every expert on every token, weighted by the router's top-k scores) and must
# train as PyTorch's sparse blocks do. (Switch at its default initializer_factor of 1: PyTorch's own f32
# training departs from float64's by 4e-5 within the 10 steps; at 0.5 PyTorch 2.11's by 3.2e-4 where tightfit's
# departs by 5.7e-5; at 0.6 PyTorch 1.13's and 2.11's by 4.3e-5 and 5.1e-5, tightfit's by 6.2e-5 and 5.5e-5
# (every element), and tightfit's weights are within 8.1e-6 of each PyTorch's on the compared elements.)
case("transformers MixtralForCausalLM (4 experts, the top 2 renormalised; its sparse blocks computed densely), "
     "per-token cross_entropy",
     decoder(transformers.MixtralConfig, transformers.MixtralForCausalLM, 78, num_local_experts=4,
             num_experts_per_tok=2))
case("transformers SwitchTransformersForConditionalGeneration (4 experts, top 1 within a capacity of 8 tokens; "
     "its sparse MLPs computed densely), per-token cross_entropy",
     seq2seq(transformers.SwitchTransformersConfig(num_layers=2, num_decoder_layers=2, num_heads=2, d_model=32, d_kv=16,
                                                   d_ff=64, expert_capacity=8, num_experts=4, vocab_size=64,
                                                   dropout_rate=0.0, router_jitter_noise=0.0, encoder_sparse_step=1,
                                                   decoder_sparse_step=1, relative_attention_num_buckets=8,
                                                   relative_attention_max_distance=16, initializer_factor=0.6),
             transformers.SwitchTransformersForConditionalGeneration, 81))
case("transformers Qwen2MoeForCausalLM (4 experts, the top 2 as they are, a gated shared expert), per-token "
     "cross_entropy",
     decoder(transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM, 79, num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, shared_expert_intermediate_size=32))
class DbrxBlock(torch.nn.Module):
    """transformers' DbrxFFN (a router's top 2 of 4 experts, the experts one GLU stacking their weights)
    between tokens [N, T, d] and a classifier of their mean: DBRX's whole model needs PyTorch 2.x."""

    def __init__(self):
        super().__init__()
        config = transformers.DbrxConfig(d_model=16, n_heads=2, n_layers=1, max_seq_len=16, vocab_size=32,
                                         ffn_config=dict(ffn_hidden_size=24, moe_num_experts=4, moe_top_k=2))
        from transformers.models.dbrx import modeling_dbrx
        self.ffn = modeling_dbrx.DbrxFFN(config)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x):
        y, _ = self.ffn(x)
        return self.head(y.mean(1))


def dbrx_experts():
    torch.manual_seed(82)
    model = DbrxBlock()
    for weight in model.ffn.experts.mlp.parameters():  # torch.empty until a DbrxPreTrainedModel fills them
        torch.nn.init.normal_(weight, std=0.3)
    return run(model, {"x": torch.randn(BATCH, 6, 16)}, torch.randint(0, 5, (BATCH,)), "cross_entropy",
               onnxruntime_too=False)


case("transformers DbrxFFN (4 experts stacked in one GLU, the top 2; computed densely), cross_entropy", dbrx_experts)
case("transformers XLMWithLMHeadModel (its padding mask arange(T) < (ids != pad).sum(1): a comparison of integer "
     "data; sinusoids off), per-token cross_entropy",
     causal_lm(transformers.XLMConfig(n_layers=2, n_heads=2, emb_dim=32, vocab_size=64, max_position_embeddings=16,
                                      dropout=0.0, attention_dropout=0.0, init_std=0.05, embed_init_std=0.05),
               transformers.XLMWithLMHeadModel, 76, lowest_id=3))
case("transformers PoolFormerForImageClassification (its token mixer avg_pool2d(3, 1, 1, count_include_pad=False) "
     "less its input; layer scale 1), cross_entropy",
     image_classifier(transformers.PoolFormerForImageClassification,
                      transformers.PoolFormerConfig(depths=[1, 1, 1, 1], hidden_sizes=[8, 16, 16, 16], num_labels=5,
                                                    image_size=32, drop_path_rate=0.0, hidden_dropout_prob=0.0,
                                                    layer_scale_init_value=1.0), 77))


# Architectures that needed nothing model-specific (2026-12-07), each for what it brings: GPT-NeoX-Japanese
# (rotary over the whole head: `q[..., rotary_ndims:]` selects nothing and is concatenated), SigLIP's and
# CLIP's vision towers (SigLIP's Conv2d(padding="valid"): aten::_convolution_mode, which torch 1.13 cannot
# export alone), RWKV (time mixing by a recurrence over the sequence), Gemma-2 (attention and final logit
# soft-capping; onnxruntime refuses torch 1.13's file: a Where between f64 and f32), MPT (ALiBi), OLMoE
# (64-wide top-2 routing over 4 experts), ResNet and SegFormer (efficient attention over a reduced
# sequence, its decoder's bilinear upsampling to the first stage's size).
def hidden_states(model_class, config, seed, size=32):
    """A vision model's first output (hidden states or maps) on size x size images, mse against random
    targets of its shape."""
    def build():
        torch.manual_seed(seed)
        model = Wrapped(model_class(config), "pixel_values")
        images = torch.randn(BATCH, 3, size, size)
        with torch.no_grad():
            shape = model(images).shape
        return run(model, {"pixel_values": images}, torch.randn(shape), "mse")
    return build


SMALL = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=64,
             max_position_embeddings=16, initializer_range=0.05)
TOWER = dict(image_size=32, patch_size=8, num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
             intermediate_size=64, initializer_range=0.05)
case("transformers GPTNeoXJapaneseForCausalLM (rotary over the whole head: an empty slice concatenated), per-token "
     "cross_entropy",
     causal_lm(transformers.GPTNeoXJapaneseConfig(hidden_dropout=0.0, attention_dropout=0.0, **SMALL),
               transformers.GPTNeoXJapaneseForCausalLM, 81))
case("transformers SiglipVisionModel (its patch embedding a Conv2d(padding='valid')), mse",
     hidden_states(transformers.SiglipVisionModel, transformers.SiglipVisionConfig(**TOWER), 82))
case("transformers CLIPVisionModel (class embedding, pre-norm, quick GELU), mse",
     hidden_states(transformers.CLIPVisionModel, transformers.CLIPVisionConfig(**TOWER), 83))
case("transformers RwkvForCausalLM (time mixing: a recurrence over the sequence), per-token cross_entropy",
     causal_lm(transformers.RwkvConfig(num_hidden_layers=2, hidden_size=32, attention_hidden_size=32,
                                       intermediate_size=64, vocab_size=64, context_length=16),
               transformers.RwkvForCausalLM, 84))
case("transformers Gemma2ForCausalLM (attention and final logit soft-capping, a sliding window), per-token "
     "cross_entropy",
     causal_lm(transformers.Gemma2Config(num_key_value_heads=1, head_dim=16, attn_implementation="eager",
                                         sliding_window=4, **SMALL), transformers.Gemma2ForCausalLM, 85,
               onnxruntime_too=False))
case("transformers MptForCausalLM (ALiBi, no biases), per-token cross_entropy",
     causal_lm(transformers.MptConfig(n_layers=2, n_heads=2, d_model=32, vocab_size=64, max_seq_len=16,
                                      expansion_ratio=2, attn_config={"attn_pdrop": 0.0}, resid_pdrop=0.0,
                                      emb_pdrop=0.0, initializer_range=0.05), transformers.MptForCausalLM, 86))
case("transformers OlmoeForCausalLM (4 experts, the top 2, q/k norms), per-token cross_entropy",
     causal_lm(transformers.OlmoeConfig(num_key_value_heads=1, num_experts=4, num_experts_per_tok=2, **SMALL),
               transformers.OlmoeForCausalLM, 87))
case("transformers ResNetForImageClassification (2 stages, bottleneck-free basic layers), cross_entropy",
     image_classifier(transformers.ResNetForImageClassification,
                      transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5,
                                                layer_type="basic"), 88))
case("transformers SegformerForSemanticSegmentation (reduced-sequence attention, decoder maps upsampled), mse",
     hidden_states(transformers.SegformerForSemanticSegmentation, transformers.SegformerConfig(
         num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3],
         strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16, num_labels=3,
         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0, classifier_dropout_prob=0.0,
         initializer_range=0.2), 89))


# Speech models (2026-12-07): Wav2Vec2-Conformer (rotary positions; its convolution module's GLU,
# depthwise convolution and batch norm), Wav2Vec2-BERT (mel features in, a causal depthwise convolution),
# SEW (a squeezed sequence, upsampled back), and the encoder-decoders Speech2Text (strided 1-d convolutions
# over filter banks), SpeechT5 (speech in, text out) and M2M-100 (sinusoidal positions from the ids).
class TwoInputs(torch.nn.Module):
    """A model given two keyword inputs, its first output flattened to [-1, classes] when `classes` is set."""

    def __init__(self, model, first, second, classes=None):
        super().__init__()
        self.model, self.first, self.second, self.classes = model, first, second, classes

    def forward(self, a, b):
        y = self.model(**{self.first: a, self.second: b}, return_dict=False)[0]
        return y.reshape(-1, self.classes) if self.classes else y


def encoder_decoder(model_class, config, seed, source_keyword, source):
    """`model_class(config)` given `source` and 6 decoder ids from 3, per-token cross_entropy over 64 ids."""
    def build():
        torch.manual_seed(seed)
        model = TwoInputs(model_class(config), source_keyword, "decoder_input_ids", 64)
        decoded = torch.randint(3, 64, (BATCH, 6))
        return run(model, {source_keyword: source, "decoder_input_ids": decoded}, torch.randint(0, 64, (BATCH * 6,)),
                   "cross_entropy")
    return build


def speech_states(model_class, config, seed, keyword, inputs):
    """A speech encoder's last hidden state, mse against random targets of its shape."""
    def build():
        torch.manual_seed(seed)
        model = Wrapped(model_class(config), keyword)
        with torch.no_grad():
            shape = model(inputs).shape
        return run(model, {keyword: inputs}, torch.randn(shape), "mse")
    return build


SPEECH = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, conv_dim=(16, 16),
              conv_stride=(5, 4), conv_kernel=(10, 4), num_feat_extract_layers=2, num_conv_pos_embeddings=16,
              num_conv_pos_embedding_groups=2, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
              feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, initializer_range=0.2)
SEQ2SEQ = dict(vocab_size=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
               encoder_ffn_dim=64, decoder_ffn_dim=64, attention_dropout=0.0, activation_dropout=0.0,
               encoder_layerdrop=0.0, decoder_layerdrop=0.0)
torch.manual_seed(90)
case("transformers Wav2Vec2ConformerModel (rotary positions, GLU, depthwise convolution, batch norm), mse",
     speech_states(transformers.Wav2Vec2ConformerModel, transformers.Wav2Vec2ConformerConfig(
         position_embeddings_type="rotary", conv_depthwise_kernel_size=3, conformer_conv_dropout=0.0, **SPEECH), 90,
         "input_values", torch.randn(BATCH, 800)))
case("transformers Wav2Vec2BertModel (mel features in, a causal depthwise convolution), mse",
     speech_states(transformers.Wav2Vec2BertModel, transformers.Wav2Vec2BertConfig(
         num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
         feature_projection_input_dim=16, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
         feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, conv_depthwise_kernel_size=3,
         conformer_conv_dropout=0.0, initializer_range=0.2), 91, "input_features", torch.randn(BATCH, 20, 16)))
case("transformers SEWModel (the sequence squeezed by 2 and upsampled back), mse",
     speech_states(transformers.SEWModel, transformers.SEWConfig(squeeze_factor=2, **SPEECH), 92, "input_values",
                   torch.randn(BATCH, 800)))
case("transformers Speech2TextForConditionalGeneration (strided 1-d convolutions over filter banks, GLU), "
     "per-token cross_entropy",
     encoder_decoder(transformers.Speech2TextForConditionalGeneration, transformers.Speech2TextConfig(
         d_model=32, conv_channels=16, input_feat_per_channel=8, num_conv_layers=2, max_source_positions=64,
         max_target_positions=16, dropout=0.0, init_std=0.2, **SEQ2SEQ), 93, "input_features",
         torch.randn(BATCH, 24, 8)))
case("transformers SpeechT5ForSpeechToText (a Wav2Vec2-style speech encoder, a text decoder), per-token "
     "cross_entropy",
     encoder_decoder(transformers.SpeechT5ForSpeechToText, transformers.SpeechT5Config(
         vocab_size=64, hidden_size=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
         decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, conv_dim=(16, 16), conv_stride=(5, 4),
         conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, hidden_dropout=0.0,
         attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, positional_dropout=0.0,
         encoder_layerdrop=0.0, decoder_layerdrop=0.0, mask_time_prob=0.0, max_text_positions=64,
         max_speech_positions=256, initializer_range=0.2), 94, "input_values", torch.randn(BATCH, 800)))
case("transformers M2M100ForConditionalGeneration (sinusoidal positions from the ids), per-token cross_entropy",
     encoder_decoder(transformers.M2M100ForConditionalGeneration, transformers.M2M100Config(
         d_model=32, max_position_embeddings=64, dropout=0.0, init_std=0.2, **SEQ2SEQ), 95, "input_ids",
         torch.randint(3, 64, (BATCH, 10))))


class Vocoder(torch.nn.Module):
    """A vocoder given a spectrogram: its waveform (the model's own output, no return_dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, spectrogram):
        return self.model(spectrogram=spectrogram)


def hifigan():
    """SpeechT5's HiFi-GAN vocoder (transposed 1-d convolutions upsampling by 4 and 4, multi-receptive-field
    residual blocks with dilations): mel frames [N, 10, 8] to [N, 160] samples, mse."""
    torch.manual_seed(99)
    model = Vocoder(transformers.SpeechT5HifiGan(transformers.SpeechT5HifiGanConfig(
        model_in_dim=8, upsample_initial_channel=16, upsample_rates=[4, 4], upsample_kernel_sizes=[8, 8],
        resblock_kernel_sizes=[3, 5], resblock_dilation_sizes=[[1, 3], [1, 3]], normalize_before=False,
        initializer_range=0.1)))
    mel = torch.randn(BATCH, 10, 8)
    return run(model, {"spectrogram": mel}, torch.randn(BATCH, 160), "mse")


case("transformers SpeechT5HifiGan (a vocoder: transposed convolutions, dilated residual blocks), mse", hifigan)

case("transformers PatchTSTModel (time series: per-channel scaling, patches by Tensor.unfold(-2), batch norm), mse",
     speech_states(transformers.PatchTSTModel, transformers.PatchTSTConfig(
         num_input_channels=2, context_length=32, patch_length=8, patch_stride=8, d_model=16, num_attention_heads=2,
         num_hidden_layers=1, ffn_dim=32, dropout=0.0, attention_dropout=0.0, ff_dropout=0.0, positional_dropout=0.0,
         path_dropout=0.0, head_dropout=0.0, do_mask_input=False), 97, "past_values", torch.randn(BATCH, 32, 2)))
case("transformers DetrForObjectDetection (a ResNet backbone with frozen batch norm, sine positions, 5 object "
     "queries), mse on the class logits",
     hidden_states(transformers.DetrForObjectDetection, transformers.DetrConfig(
         use_timm_backbone=False, use_pretrained_backbone=False,
         backbone_config=transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                                   out_features=["stage2"]),
         d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
         encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5, dropout=0.0, attention_dropout=0.0,
         activation_dropout=0.0, num_labels=3, init_std=0.2), 98))





class OwnLoss(torch.nn.Module):
    """A model given its labels: returns the loss transformers computes itself (for a causal LM the shift
    and CrossEntropyLoss's ignore_index -100 on the padded positions). `names`: its forward's keywords."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs):
        return self.model(**dict(zip(self.names, inputs))).loss


def own_loss_beside_torch(model, inputs, steps=4):
    """from_torch(loss="output") of OwnLoss(model) on `inputs` ({keyword: tensor}), `steps` AdamW steps (lr
    1e-2) beside PyTorch from the same weights: (a problem or None, what was seen)."""
    model = OwnLoss(model, list(inputs))
    start = copy.deepcopy(model)
    graph = tightfit.from_torch(model, tuple(inputs.values()), loss="output", input_names=list(inputs))
    plan = tightfit.compile(graph, set={"N": BATCH}, optimizer="adamw", lr=1e-2, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0)
    losses = [session.step({k: v.numpy() for k, v in inputs.items()}) for _ in range(steps)]
    expected = adamw_losses(start, tuple(inputs.values()), None, steps, 1e-2, criterion=lambda loss, _: loss)
    worst = relative_apart(losses, expected)
    seen = f"{steps} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[0]:.6f} -> " \
        f"{expected[-1]:.6f}), worst relative difference {worst:.1e}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


def gpt2_own_loss():
    """GPT2LMHeadModel(labels=...) as a user trains it: its own loss (from_torch(loss="output")), labels -100
    after each sequence's 9th token, 3,000 classes."""
    torch.manual_seed(78)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=3000, n_positions=16,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = torch.randint(0, 3000, (BATCH, 12))
    labels = ids.clone()
    labels[:, 9:] = -100
    return own_loss_beside_torch(transformers.GPT2LMHeadModel(config), {"input_ids": ids, "labels": labels})


def bert_qa_own_loss():
    """BertForQuestionAnswering(start_positions=..., end_positions=...): its loss clamps the positions to
    [0, T] and ignores T, a size read from a shape (torch's exporter refused that ignore_index)."""
    torch.manual_seed(80)
    config = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                     vocab_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    ids = torch.randint(0, 64, (BATCH, 12))
    starts, ends = torch.randint(0, 12, (BATCH,)), torch.randint(0, 12, (BATCH,))
    starts[1], ends[2] = 20, 15  # past the sequence: clamped to T, which the loss ignores
    return own_loss_beside_torch(transformers.BertForQuestionAnswering(config),
                                 {"input_ids": ids, "start_positions": starts, "end_positions": ends})


def gpt2_classifier_own_loss():
    """GPT2ForSequenceClassification(labels=...): the logits at each sequence's last token before its padding,
    found as the argmax of positions times a mask of integer data (refused before: ArgMax of i32 data)."""
    torch.manual_seed(79)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16, num_labels=3,
                                     pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = torch.randint(1, 64, (BATCH, 12))
    ids[0, 7:], ids[2, 10:] = 0, 0  # two padded sequences
    return own_loss_beside_torch(transformers.GPT2ForSequenceClassification(config),
                                 {"input_ids": ids, "labels": torch.randint(0, 3, (BATCH,))})


def speecht5_tts_own_loss():
    """SpeechT5ForTextToSpeech(labels=...) as its fine-tuning recipe trains it: its own loss (L1 on the
    unpadded frames before and after the postnet, x[mask] of the labels != -100; BCE on the stop tokens),
    the decoder's input the labels shifted right by the reduction factor. Its prenet draws a dropout mask
    by torch.bernoulli(x, p) in training and inference alike (tightfit's own draw: checked in
    from_torch_operators); here p = 0, the one draw PyTorch and tightfit share. The guided attention loss
    (lengths from the attention mask: a Range of data) is off."""
    torch.manual_seed(96)
    config = transformers.SpeechT5Config(
        vocab_size=64, hidden_size=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8, speech_decoder_prenet_units=16,
        speech_decoder_postnet_units=16, speech_decoder_postnet_layers=2, speech_decoder_postnet_kernel=3,
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, positional_dropout=0.0,
        speech_decoder_prenet_dropout=0.0, speech_decoder_postnet_dropout=0.0, encoder_layerdrop=0.0,
        decoder_layerdrop=0.0, max_text_positions=64, max_speech_positions=256, reduction_factor=2,
        initializer_range=0.2, use_guided_attention_loss=False)
    labels = torch.randn(BATCH, 8, 8)
    labels[1, 6:] = -100.0  # a shorter utterance's padding
    return own_loss_beside_torch(transformers.SpeechT5ForTextToSpeech(config),
                                 {"input_ids": torch.randint(3, 64, (BATCH, 10)), "labels": labels})


def mbart_own_loss():
    """MBartForConditionalGeneration(labels=...): its decoder's input is the labels shifted right with each row's
    last non-padding token (its language id) moved first, gathered by an index computed from the padding mask
    (GatherElements of int64 token ids by computed indices: refused before)."""
    torch.manual_seed(81)
    config = transformers.MBartConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                      decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                      vocab_size=64, max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
                                      activation_dropout=0.0, pad_token_id=1, init_std=0.05)
    ids, labels = torch.randint(3, 64, (BATCH, 10)), torch.randint(3, 64, (BATCH, 8))
    labels[0, 6:], labels[2, 7:] = 1, 1  # padded targets: each row's last token before them is gathered
    return own_loss_beside_torch(transformers.MBartForConditionalGeneration(config),
                                 {"input_ids": ids, "labels": labels})


def perceiver_own_loss():
    """PerceiverForMaskedLM(labels=...): latents cross-attend to the tokens, then its decoder's queries (of the
    decoder's own width) attend to the latents (values of another width): the matched attention written out, as
    the fused op takes one width (refused before)."""
    torch.manual_seed(83)
    config = transformers.PerceiverConfig(num_latents=8, d_latents=32, d_model=32, num_blocks=1,
                                          num_self_attends_per_block=1, num_self_attention_heads=2,
                                          num_cross_attention_heads=2, vocab_size=64, max_position_embeddings=12,
                                          attention_probs_dropout_prob=0.0, initializer_range=0.1)
    ids = torch.randint(3, 64, (BATCH, 12))
    labels = ids.clone()
    labels[:, 8:] = -100
    return own_loss_beside_torch(transformers.PerceiverForMaskedLM(config), {"input_ids": ids, "labels": labels})


def longt5_tglobal_own_loss():
    """LongT5ForConditionalGeneration with transient-global attention (labels=...): each token's block and its
    relative position to every global block computed from the attention mask at run time (Abs, Neg and
    comparisons of int64 data: Abs was refused), then T5's buckets of them."""
    torch.manual_seed(82)
    config = transformers.LongT5Config(num_layers=1, num_decoder_layers=1, num_heads=2, d_model=32, d_kv=16, d_ff=64,
                                       vocab_size=64, dropout_rate=0.0, local_radius=2,
                                       encoder_attention_type="transient-global", global_block_size=4,
                                       decoder_start_token_id=0, pad_token_id=0)
    ids, labels = torch.randint(3, 64, (BATCH, 12)), torch.randint(3, 64, (BATCH, 8))
    return own_loss_beside_torch(transformers.LongT5ForConditionalGeneration(config),
                                 {"input_ids": ids, "labels": labels})


case("transformers GPT2LMHeadModel given its labels: its own loss (shifted, ignore_index -100, 3,000 classes) "
     "trains as PyTorch's", gpt2_own_loss)
case("transformers BertForQuestionAnswering given its start and end positions: positions clamped to T (integer "
     "data), cross-entropy whose ignore_index is start_logits.size(1), trains as PyTorch's", bert_qa_own_loss)
case("transformers GPT2ForSequenceClassification given its labels: the last token before the padding by an argmax "
     "of integer data, its own cross-entropy, trains as PyTorch's", gpt2_classifier_own_loss)
case("transformers MBartForConditionalGeneration given its labels: shift_tokens_right's gather of each row's last "
     "token by a computed index (int64 data), its own cross-entropy, trains as PyTorch's", mbart_own_loss)
case("transformers PerceiverForMaskedLM given its labels (cross-attention to latents and back, values of another "
     "width than the queries) trains as PyTorch's", perceiver_own_loss)
case("transformers LongT5ForConditionalGeneration (transient-global attention: block positions from the mask, "
     "int64 data) given its labels trains as PyTorch's", longt5_tglobal_own_loss)
case("transformers SpeechT5ForTextToSpeech given its spectrogram labels: its own L1 and stop-token loss over the "
     "unpadded frames, its prenet's bernoulli mask, trains as PyTorch's", speecht5_tts_own_loss)
finish("from_torch_transformers")
