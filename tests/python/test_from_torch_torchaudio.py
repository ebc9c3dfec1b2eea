"""tightfit.from_torch on torchaudio's models as they are (torchaudio.models, random weights, no download),
each small, in train mode with dropout 0: the Conformer encoder, Conv-TasNet (source separation),
DeepSpeech (a bidirectional RNN), WaveRNN (a GRU vocoder over upsampled spectrograms), wav2vec 2.0 and
WavLM (relative position buckets), Hybrid Demucs (STFT, complex spectrograms padded, the inverse STFT;
LSTM and local attention in its branches), Tacotron 2 (teacher-forced: its encoder packs the tokens by
their lengths, its decoder unrolls LSTMCells with location-sensitive attention), the Emformer RNN-T
(segment masks with empty blocks, a transcriber, an LSTM predictor and a joiner) and SQUIM's objective
metrics. Each is imported and trained 10 AdamW steps beside PyTorch training the same module
(torch_training.train_both: losses and trained weights within 1e-5).

What it needed: F.pad of a complex spectrogram (Hybrid Demucs); Concat beside blocks of no elements of
other widths and tanh of an empty memory bank (Emformer, as onnxruntime reads them); LSTMCell's gates split
where the exporter lost the axis's size (Tacotron 2); sequence lengths made from the sizes,
torch.full((n,), T), as a constant (Tacotron 2's packed encoder); ComputeDeltas as shifted slices (an ASR
front end: torch's exporter refuses torchaudio's convolution by a kernel repeated by a count from the batch).

Tacotron 2's prenet drops out even in eval mode and its encoder and postnet at a fixed p 0.5 in training:
those dropouts are taken out here (tightfit draws its own masks; the forward passes would differ), the rest
of the model is torchaudio's. Wav2Letter is left out: its 250- to 2000-channel convolutions (20 M
parameters) have first gradients below 1e-6 in over 5% of their weights at any learning rate that does not
blow its loss up to 1e12, so train_both's weight comparison would measure nothing (its losses agree).

torchaudio is pinned in scripts/requirements-torch2.txt (.venv-torch2; Debian packages no torchaudio for
PyTorch 1.13): python_from_torch_torchaudio_torch2. usage: test_from_torch_torchaudio.py   (PYTHONPATH=python)"""
import os
import types
import warnings

for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import torch  # noqa: E402

try:
    import torchaudio  # noqa: E402
    import torchaudio.models as M  # noqa: E402
    import torchaudio.models.tacotron2 as tacotron2_module  # noqa: E402
except ImportError as error:
    print(f"SKIP: torchaudio does not import here ({error}): scripts/setup installs it into .venv-torch2")
    raise SystemExit(77)

import tightfit  # noqa: E402
from tally import case, finish  # noqa: E402
from torch_training import BATCH, train_both  # noqa: E402

print("library:", tightfit.library_path(), "torch", torch.__version__, "torchaudio", torchaudio.__version__)
torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)


def target_like(model, *inputs):
    """Random MSE targets of the shape of model(*inputs)."""
    with torch.no_grad():
        return torch.randn(*model(*inputs).shape)


class FirstOutput(torch.nn.Module):
    """A model's first output (torchaudio's encoders return (output, lengths))."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        return self.model(*inputs)[0]


def trained(model, inputs, fixed_batch=False):
    """train_both on MSE against random targets of the output's shape."""
    return train_both(model, inputs, target_like(model, *inputs.values()), "mse", fixed_batch=fixed_batch)


def conformer():
    torch.manual_seed(11)  # seed 1: a weight 4.1e-5 apart (AdamW's first step of a near-cancelling gradient)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conformer = M.Conformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2,
                                         depthwise_conv_kernel_size=3, dropout=0.0)

        def forward(self, x):  # every utterance whole
            return self.conformer(x, torch.full((x.shape[0],), x.shape[1]))[0]

    return trained(Encoder(), {"features": torch.randn(BATCH, 10, 16)})


def conv_tasnet():
    torch.manual_seed(2)
    model = M.ConvTasNet(num_sources=2, enc_kernel_size=8, enc_num_feats=16, msk_kernel_size=3, msk_num_feats=8,
                         msk_num_hidden_feats=16, msk_num_layers=2, msk_num_stacks=1)
    return trained(model, {"mixture": torch.randn(BATCH, 1, 64)})


def deepspeech():
    torch.manual_seed(3)
    return trained(M.DeepSpeech(n_feature=16, n_hidden=32, n_class=10, dropout=0.0),
                   {"features": torch.randn(BATCH, 1, 12, 16)})


def wavernn():
    torch.manual_seed(4)
    model = M.WaveRNN(upsample_scales=[2, 2], n_classes=16, hop_length=4, n_res_block=1, n_rnn=16, n_fc=16,
                      kernel_size=5, n_freq=8, n_hidden=8, n_output=8)
    return trained(model, {"waveform": torch.randn(BATCH, 1, 24), "specgram": torch.randn(BATCH, 1, 8, 10)})


def speech_encoder(builder, **extra):
    """wav2vec 2.0 or WavLM (its gated relative position bias), 2 layers of d 16 over two convolutions."""
    model = builder(extractor_mode="group_norm", extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)],
                    extractor_conv_bias=False, encoder_embed_dim=16, encoder_projection_dropout=0.0,
                    encoder_pos_conv_kernel=4, encoder_pos_conv_groups=2, encoder_num_layers=2, encoder_num_heads=2,
                    encoder_attention_dropout=0.0, encoder_ff_interm_features=32, encoder_ff_interm_dropout=0.0,
                    encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=10,
                    **extra)
    return trained(FirstOutput(model), {"waveform": torch.randn(BATCH, 400)})


def wav2vec2():
    torch.manual_seed(5)
    return speech_encoder(M.wav2vec2_model)


def wavlm():
    torch.manual_seed(6)
    return speech_encoder(M.wavlm_model, encoder_num_buckets=8, encoder_max_distance=16)


def hybrid_demucs():
    """Its reshapes read the batch as a number: from_torch warns and imports it at the traced batch."""
    torch.manual_seed(7)
    model = M.HDemucs(sources=["voice", "rest"], audio_channels=1, channels=8, growth=2, nfft=64, depth=2, freq_emb=0.0,
                      dconv_depth=1, dconv_comp=2, dconv_attn=4, dconv_lstm=4, norm_starts=1, norm_groups=2,
                      dconv_init=1.0)
    problem, seen = trained(model, {"mixture": torch.randn(BATCH, 1, 512)}, fixed_batch=True)
    if not problem and "froze the batch size" not in seen:
        problem = "from_torch did not say that it fixed the batch"
    return problem, seen


def prenet_without_dropout(self, x):
    for linear in self.layers:
        x = torch.nn.functional.relu(linear(x))
    return x


def tacotron2():
    """Teacher-forced (the spectrogram given), MSE on the postnet's output."""
    torch.manual_seed(8)
    functional = types.SimpleNamespace(**{k: getattr(torch.nn.functional, k) for k in dir(torch.nn.functional)
                                          if not k.startswith("__")})
    functional.dropout = lambda x, *args, **kwargs: x
    saved = tacotron2_module.F, tacotron2_module._Prenet.forward
    tacotron2_module.F, tacotron2_module._Prenet.forward = functional, prenet_without_dropout
    try:
        model = M.Tacotron2(mask_padding=False, n_mels=8, n_symbol=20, n_frames_per_step=1, symbol_embedding_dim=16,
                            encoder_embedding_dim=16, encoder_n_convolution=1, encoder_kernel_size=3,
                            decoder_rnn_dim=16, decoder_max_step=50, decoder_dropout=0.0, decoder_early_stopping=True,
                            attention_rnn_dim=16, attention_hidden_dim=8, attention_location_n_filter=4,
                            attention_location_kernel_size=3, attention_dropout=0.0, prenet_dim=8,
                            postnet_n_convolution=2, postnet_kernel_size=3, postnet_embedding_dim=8,
                            gate_threshold=0.5)

        class TeacherForced(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.tacotron2 = model

            def forward(self, tokens, mel):
                n = tokens.shape[0]
                return self.tacotron2(tokens, torch.full((n,), tokens.shape[1]), mel,
                                      torch.full((n,), mel.shape[2]))[1]

        return trained(TeacherForced(), {"tokens": torch.randint(0, 20, (BATCH, 7)), "mel": torch.randn(BATCH, 8, 6)})
    finally:
        tacotron2_module.F, tacotron2_module._Prenet.forward = saved


def emformer_rnnt():
    """The joiner's output over (frames, target tokens); no right context and no memory bank: the segment
    masks hold blocks of no elements, and the memory bank is empty."""
    torch.manual_seed(9)
    model = M.emformer_rnnt_model(
        input_dim=8, encoding_dim=16, num_symbols=10, segment_length=4, right_context_length=0,
        time_reduction_input_dim=16, time_reduction_stride=2, transformer_num_heads=2, transformer_ffn_dim=16,
        transformer_num_layers=2, transformer_dropout=0.0, transformer_activation="relu",
        transformer_left_context_length=8, transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True, symbol_embedding_dim=8,
        num_lstm_layers=1, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-5, lstm_dropout=0.0)

    class Joint(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnnt = model

        def forward(self, features, targets):
            n = features.shape[0]
            return self.rnnt(features, torch.full((n,), features.shape[1]), targets,
                             torch.full((n,), targets.shape[1]))[0]

    return trained(Joint(), {"features": torch.randn(BATCH, 16, 8), "targets": torch.randint(0, 10, (BATCH, 5))})


def squim_objective():
    """STOI, PESQ and SI-SDR estimates (dual-path transformer over an LSTM), stacked."""
    torch.manual_seed(10)
    model = M.squim_objective_model(feat_dim=16, win_len=16, d_model=16, nhead=2, hidden_dim=16, num_blocks=1,
                                    rnn_type="LSTM", chunk_size=8)

    class Metrics(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.squim = model

        def forward(self, waveform):
            return torch.stack(self.squim(waveform), 1)

    return trained(Metrics(), {"waveform": torch.randn(BATCH, 400)})


class FrontEnd(torch.nn.Module):
    """An ASR front end as the first layers: log-mel features and their deltas (ComputeDeltas, which torch's
    exporter refuses: a convolution by a kernel repeated by a count from the batch), a convolution, a head."""

    def __init__(self):
        super().__init__()
        self.mel = torchaudio.transforms.MelSpectrogram(sample_rate=8000, n_fft=64, hop_length=16, n_mels=8)
        self.deltas = torchaudio.transforms.ComputeDeltas(win_length=5)
        self.conv, self.head = torch.nn.Conv1d(16, 8, 3), torch.nn.Linear(8, 4)

    def forward(self, waveform):
        features = torch.log(self.mel(waveform) + 1e-6)  # [N, 8, T]
        stacked = torch.cat([features, self.deltas(features)], 1)
        return self.head(torch.relu(self.conv(stacked)).mean(-1))


def front_end():
    torch.manual_seed(12)
    return trained(FrontEnd(), {"waveform": torch.randn(BATCH, 400)})


case("torchaudio Conformer (2 layers, d 16, depthwise kernel 3)", conformer)
case("torchaudio ConvTasNet (2 sources, 2 layers)", conv_tasnet)
case("torchaudio DeepSpeech (bidirectional RNN)", deepspeech)
case("torchaudio WaveRNN (upsampling, GRU)", wavernn)
case("torchaudio wav2vec2_model (2 layers, d 16)", wav2vec2)
case("torchaudio wavlm_model (relative position buckets)", wavlm)
case("torchaudio HDemucs (STFT, complex pad, inverse STFT, LSTM and attention; the batch fixed)", hybrid_demucs)
case("torchaudio Tacotron2 (teacher-forced, packed encoder, LSTMCell decoder, location attention)", tacotron2)
case("torchaudio emformer_rnnt_model (empty mask blocks and memory, LSTM predictor, joiner)", emformer_rnnt)
case("torchaudio squim_objective_model (dual-path transformer)", squim_objective)
case("torchaudio MelSpectrogram and ComputeDeltas as a front end (deltas as shifted slices)", front_end)
finish("from_torch_torchaudio")
