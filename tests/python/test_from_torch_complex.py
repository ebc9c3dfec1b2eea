"""tightfit.from_torch on PyTorch's Fourier transforms and complex tensors, each model trained beside PyTorch
from the same weights (and its plan on Vulkan beside the CPU): a multi-resolution STFT loss of a vocoder
(torch.stft's complex result, its magnitude, the centring reflect pad, a window shorter than the frame), a
log-mel front end (torch.stft(return_complex=False), normalized, a mel filter bank), torch.fft's fft, ifft,
rfft, fft2 and rfftn with each norm and a given n or s, FNet-style token mixing, Vocos' head (a spectrum of
exp(mag) * (cos p + 1j sin p) through torch.istft), complex arithmetic with irfft and istft, rotary
embeddings as Meta's Llama code writes them (a complex table, view_as_complex); and the refusals: an op of
complex tensors without a pair form (a complex matmul, named with its line), an opset before ONNX's DFT.
Fails, not skips, without the ONNX importer.
usage: test_from_torch_complex.py   (PYTHONPATH=python)"""
import copy
import json

import torch
import torch.nn.functional as F

import tightfit
from from_torch_cases import (batch, beside_torch, case, dumped, finish, own_loss_both, own_loss_everywhere,
                              require_importer)
from tally import relative_apart
from torch_training import adamw_losses

require_importer()


def ops_of(graph):
    return {node["op"] for node in json.loads(dumped(graph))["nodes"]}


class Vocoder(torch.nn.Module):
    """A small waveform generator trained by a multi-resolution STFT loss (Parallel WaveGAN's, HiFi-GAN's
    auxiliary loss): spectral convergence plus the L1 of log magnitudes, at two resolutions, one of them
    with a window shorter than its frame."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Conv1d(1, 8, 7, padding=3), torch.nn.Tanh(),
                                       torch.nn.Conv1d(8, 1, 7, padding=3))
        self.resolutions = [(64, 16, 64), (32, 8, 24)]
        for n, _, width in self.resolutions:
            self.register_buffer(f"window{n}", torch.hann_window(width))

    def magnitude(self, x, n, hop, width):
        spec = torch.stft(x, n, hop_length=hop, win_length=width, window=getattr(self, f"window{n}"),
                          return_complex=True)
        return torch.clamp(spec.abs(), min=1e-5)

    def forward(self, noise, target):
        audio = self.net(noise[:, None, :])[:, 0, :]
        loss = 0
        for n, hop, width in self.resolutions:
            got, want = self.magnitude(audio, n, hop, width), self.magnitude(target, n, hop, width)
            convergence = torch.norm(want - got, p="fro") / torch.norm(want, p="fro")
            loss = loss + convergence + F.l1_loss(torch.log(got), torch.log(want))
        return loss


def stft_loss():
    """Trained beside PyTorch and beside PyTorch in float64: the log magnitudes' gradients (1 / |X| at the quiet
    bins) under AdamW's sign-like steps put PyTorch's own f32 losses 5e-6 from float64's by the third step, so
    tightfit's must be as near float64's as PyTorch's f32 are (twice their distance, at least 1e-5); its
    Vulkan losses within 1e-5 of its CPU ones."""
    torch.manual_seed(3)
    model = Vocoder()
    # a tone in noise: a pure tone's spectrum has bins near 0 whose logs PyTorch's own f32 loss gets 5.6e-6 off
    # its float64 one, the comparison's whole margin
    noise, target = torch.randn(batch, 256), torch.sin(torch.arange(256.0) * 0.3) + 0.5 * torch.randn(batch, 256)
    reference = copy.deepcopy(model).double()
    graph = tightfit.from_torch(model, (noise, target), loss="output", input_names=["noise", "target"])
    if "conv1d" not in ops_of(graph) and "conv2d" not in ops_of(graph):
        return f"no convolution (the STFT) in the graph: {sorted(ops_of(graph))}", ""
    inputs = {"noise": noise, "target": target}
    losses, expected, _ = own_loss_both(graph, model, inputs, 4, {"N": batch})
    exact = adamw_losses(reference, (noise.double(), target.double()), None, 4, 1e-2, criterion=lambda loss, _: loss)
    ours, theirs = (relative_apart(run, exact) for run in (losses, expected))
    seen = f"4 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}, float64 " \
        f"{exact[-1]:.6f}); from float64's: tightfit {ours:.1e}, PyTorch {theirs:.1e}"
    if not ours <= max(1e-5, 2 * theirs):
        return f"tightfit {losses} vs PyTorch's float64 {exact} (PyTorch's f32 {expected})", seen
    try:
        on_vulkan = own_loss_both(graph, model, inputs, 4, {"N": batch}, device="vulkan")[0]
    except tightfit.TightfitError as error:
        if "no Vulkan" in str(error):
            return None, seen + f"; Vulkan skipped: no device ({error})"
        raise
    apart = relative_apart(on_vulkan, losses)
    seen += f"; on Vulkan within {apart:.1e} of the CPU's"
    return (None if apart <= 1e-5 else f"Vulkan {on_vulkan} vs CPU {losses}"), seen


def mel_bank(bins, mels):
    """Triangular filters over `bins` linear bins (the shape torchaudio's melscale_fbanks gives)."""
    edges = torch.linspace(0, bins - 1, mels + 2)
    grid = torch.arange(bins, dtype=torch.float32)[:, None]
    rise = (grid - edges[:-2]) / (edges[1:-1] - edges[:-2])
    fall = (edges[2:] - grid) / (edges[2:] - edges[1:-1])
    return torch.clamp(torch.minimum(rise, fall), min=0)


class MelClassifier(torch.nn.Module):
    """Keyword spotting on raw audio: a normalized STFT's power (return_complex=False: the real pairs torch
    gives), a mel filter bank, log, a convolution over time, mean-pooled into 5 classes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hamming_window(48))
        self.register_buffer("mel", mel_bank(25, 12))
        self.conv = torch.nn.Conv1d(12, 16, 3, padding=1)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, audio, labels):
        spec = torch.stft(audio, 48, hop_length=12, window=self.window, normalized=True, center=False,
                          return_complex=False)
        power = (spec ** 2).sum(-1)                       # [N, 25, frames]
        mel = torch.log(torch.matmul(power.transpose(1, 2), self.mel) + 1e-4).transpose(1, 2)
        logits = self.head(torch.relu(self.conv(mel)).mean(-1))
        return F.cross_entropy(logits, labels)


def mel_front_end():
    torch.manual_seed(5)
    model = MelClassifier()
    audio, labels = torch.randn(batch, 300), torch.randint(0, 5, (batch,))
    graph = tightfit.from_torch(model, (audio, labels), loss="output", input_names=["audio", "labels"])
    return own_loss_everywhere(graph, model, {"audio": audio, "labels": labels}, 4, {"N": batch})


class Spectra(torch.nn.Module):
    """Features from each transform of torch.fft after a Linear: rfft with norm="ortho", fft with n
    (zero padding) and with n shorter than the axis, ifft of an fft with norm="forward" (back to the
    signal), fft2 of the [N, 4, 6] view, rfftn with s; then another Linear and an MSE."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(24, 24), torch.nn.Linear(13 + 32 + 10 + 24 + 24 + 12, 3)

    def forward(self, x, target):
        h = self.a(x)
        parts = [torch.fft.rfft(h, norm="ortho").abs(),
                 torch.view_as_real(torch.fft.fft(h, n=16)).flatten(1),
                 torch.fft.fft(h, n=10).imag,
                 torch.fft.ifft(torch.fft.fft(h, norm="forward"), norm="forward").real,
                 torch.fft.fft2(h.reshape(-1, 4, 6)).abs().flatten(1),
                 torch.fft.rfftn(h.reshape(-1, 4, 6), s=(4, 4), dim=(1, 2)).real.flatten(1) * 0.5 +
                 torch.fft.rfftn(h.reshape(-1, 4, 6), s=(4, 4), dim=(1, 2)).imag.flatten(1)]
        return F.mse_loss(self.b(torch.cat(parts, 1)), target)


def fft_family():
    torch.manual_seed(7)
    model = Spectra()
    x, target = torch.randn(batch, 24), torch.randn(batch, 3)
    graph = tightfit.from_torch(model, (x, target), loss="output", input_names=["x", "target"])
    return own_loss_everywhere(graph, model, {"x": x, "target": target}, 4, {"N": batch})


class Phases(torch.nn.Module):
    """A phase-aware feature: torch.angle of an rfft (all four quadrants), its cos and sin beside the magnitude, and
    torch.angle of a real tensor (pi below 0, else 0) as a sign feature; then a Linear and an MSE."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(12, 12), torch.nn.Linear(7 * 3 + 12, 3)

    def forward(self, x, target):
        h = self.a(x)
        spectrum = torch.fft.rfft(h)
        phase = torch.angle(spectrum)
        parts = [phase, torch.cos(phase) * spectrum.abs(), torch.sin(phase), torch.angle(h) * h]
        return F.mse_loss(self.b(torch.cat(parts, 1)), target)


def phases():
    torch.manual_seed(8)
    model = Phases()
    x, target = torch.randn(batch, 12), torch.randn(batch, 3)
    graph = tightfit.from_torch(model, (x, target), loss="output", input_names=["x", "target"])
    return own_loss_everywhere(graph, model, {"x": x, "target": target}, 4, {"N": batch})


class FourierMixing(torch.nn.Module):
    """FNet's token mixing, fftn(x, dim=(1, 2)).real, in a residual block with LayerNorm."""

    def __init__(self):
        super().__init__()
        self.embed, self.norm, self.out = torch.nn.Linear(3, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1)

    def forward(self, x, target):
        h = self.embed(x)
        h = self.norm(h + torch.fft.fftn(h, dim=(1, 2)).real)
        return F.mse_loss(self.out(h)[..., 0], target)


def fourier_mixing():
    torch.manual_seed(11)
    model = FourierMixing()
    x, target = torch.randn(batch, 10, 3), torch.randn(batch, 10)
    graph = tightfit.from_torch(model, (x, target), loss="output", input_names=["x", "target"])
    return own_loss_everywhere(graph, model, {"x": x, "target": target}, 4, {"N": batch})


class SilentBins(torch.nn.Module):
    """The magnitudes of a spectrum with exact zeros (a frame of padding): PyTorch's abs of a complex 0 has
    gradient 0; as sqrt(re^2 + im^2) it would be NaN and poison every weight."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        padded = torch.cat([h, torch.zeros_like(h)], 1)
        return torch.fft.rfft(padded * 0).abs().sum() + torch.fft.rfft(padded).abs().mean()


def silent_bins():
    torch.manual_seed(13)
    model = SilentBins()
    x = torch.randn(batch, 8)
    graph = tightfit.from_torch(model, (x,), loss="output")
    return own_loss_everywhere(graph, model, {"x": x}, 4, {"N": batch})


class VocosHead(torch.nn.Module):
    """Vocos' vocoder head: a convolution predicts each frame's log-magnitude and phase, the spectrum
    exp(mag) * (cos p + 1j sin p) (complex arithmetic with the number 1j), torch.istft(center=True) back
    to a waveform, an L1 loss against the target."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Conv1d(6, 2 * 17, 3, padding=1)
        self.register_buffer("window", torch.hann_window(32))

    def forward(self, features, target):
        h = self.proj(features)
        magnitude, phase = torch.clamp(torch.exp(h[:, :17]), max=1e2), h[:, 17:]
        spectrum = magnitude * (torch.cos(phase) + 1j * torch.sin(phase))
        audio = torch.istft(spectrum, 32, hop_length=8, win_length=32, window=self.window, center=True)
        return F.l1_loss(audio, target)


def vocos_head():
    torch.manual_seed(17)
    model = VocosHead()
    features, target = torch.randn(batch, 6, 12), 0.1 * torch.randn(batch, 88)
    graph = tightfit.from_torch(model, (features, target), loss="output", input_names=["features", "target"])
    return own_loss_everywhere(graph, model, {"features": features, "target": target}, 4, {"N": batch})


class ComplexArithmetic(torch.nn.Module):
    """torch.complex, torch.polar, exp of an imaginary tensor, products, quotients, sums and differences of
    complex and real tensors and numbers, torch.conj, F.pad in three modes; then torch.fft.irfft (with n and ortho) and
    torch.istft with a length, a window shorter than its frame and normalized=True, and of every bin
    (onesided=False)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 2 * 9 * 5), torch.nn.Linear(8, 2 * 16 * 5)

    def forward(self, x, target):
        h = self.a(x).reshape(-1, 2, 9, 5)
        z = torch.complex(h[:, 0], h[:, 1])
        q = torch.polar(torch.sigmoid(h[:, 1]) + 0.5, h[:, 0])
        w = (z * q - z / (q + 2)) * 0.5 + torch.conj(z) - torch.exp(1j * h[:, 0]) / 3
        wave = torch.fft.irfft(w, n=12, dim=1, norm="ortho").flatten(1)
        audio = torch.istft(w, 16, hop_length=4, win_length=12, window=torch.hann_window(12), normalized=True,
                            length=22)
        g = self.b(x).reshape(-1, 2, 16, 5)
        whole = torch.istft(torch.complex(g[:, 0], g[:, 1]), 16, hop_length=4, window=torch.hann_window(16),
                            onesided=False)  # PyTorch's real output: bins 0 .. 8 as one-sided, the rest unread
        joined = torch.cat([w, torch.stack([z[:, :, 0], q[:, :, 1]], -1)], -1)  # [N, 9, 7], complex
        spread = joined.sum(1).abs().mean() + joined.mean((0, -1), keepdim=True).real.sum() + joined.sum().imag
        # F.pad of a complex spectrogram (Hybrid Demucs'): zeros, reflection and the edge's value
        padded = F.pad(w, (1, 2)) + F.pad(w, (2, 1), mode="reflect") * 0.5 + F.pad(w, (0, 3), mode="replicate") * 0.25
        return F.mse_loss(torch.cat([wave, audio, whole], 1), target) + w.abs().mean() + spread + \
            (padded * torch.arange(8.0)).abs().mean()


def complex_arithmetic():
    torch.manual_seed(19)
    model = ComplexArithmetic()
    x, target = torch.randn(batch, 8), torch.randn(batch, 60 + 22 + 16)
    graph = tightfit.from_torch(model, (x, target), loss="output", input_names=["x", "target"])
    return own_loss_everywhere(graph, model, {"x": x, "target": target}, 4, {"N": batch})


def rotations(dim, end, theta=10000.0):
    """Llama's reference precompute_freqs_cis: e^(i t f) for each position t and frequency f, complex64 [end, dim/2]."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    angles = torch.outer(torch.arange(end).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def rotated(x, freqs_cis):
    """Llama's reference apply_rotary_emb on one tensor [B, T, H, D]: pairs as complex numbers, times the
    rotations reshaped to [1, T, 1, D/2] (reshape_for_broadcast, from x's shape), back to real pairs."""
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == z.ndim - 1 else 1 for i, d in enumerate(z.shape)]
    return torch.view_as_real(z * freqs_cis.view(*shape)).flatten(3).type_as(x)


class ComplexRope(torch.nn.Module):
    """A causal attention block with rotary embeddings as Meta's Llama code writes them: a complex table
    (a registered buffer here, sliced to the sequence: x[:T] of a complex tensor), view_as_complex,
    a complex product, view_as_real and flatten."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out, self.heads = torch.nn.Linear(16, 48), torch.nn.Linear(16, 5), 2
        self.register_buffer("freqs_cis", rotations(8, 32))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, 8).unbind(2)
        table = self.freqs_cis[:t]
        q, k = rotated(q, table), rotated(k, table)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / 8 ** 0.5
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        h = torch.einsum("bhts,bshd->bthd", torch.softmax(scores, -1), v).reshape(b, t, 16)
        return self.out(h).mean(1)


def complex_rope():
    torch.manual_seed(23)
    model = ComplexRope()
    x, labels = torch.randn(batch, 10, 16), torch.randint(0, 5, (batch,))
    problem, seen, _ = beside_torch(model, x, labels, ())
    return problem, seen.lstrip("; ")


class ComplexMatmul(torch.nn.Module):
    """A product of complex matrices: the exporter writes a MatMul that would run on the pairs."""

    def forward(self, x):
        f = torch.fft.rfft(x)  # [N, 9]
        return torch.matmul(f[:, :, None], f[:, None, :]).abs().sum()


def matmul_refused():
    try:
        tightfit.from_torch(ComplexMatmul(), (torch.randn(batch, 16),), loss="output")
    except tightfit.TightfitError as error:
        message = str(error)
        named = "aten::matmul" in message and "test_from_torch_complex.py" in message
        return (None if named else f"the message names no aten::matmul at its line: {message}"), message[:200]
    return "a complex matmul imported", ""


def old_opset_refused():
    model = FourierMixing()
    try:
        tightfit.from_torch(model, (torch.randn(batch, 10, 3), torch.randn(batch, 10)), loss="output",
                            opset_version=16)
    except tightfit.TightfitError as error:
        return (None if "opset 17" in str(error) else f"unexpected message: {error}"), str(error)[:160]
    return "a DFT at opset 16 imported", ""


case("a multi-resolution STFT loss (torch.stft's complex result, abs, the centring reflect pad, a window shorter "
     "than its frame) trains a waveform generator as near float64's as PyTorch's", stft_loss)
case("a log-mel front end (torch.stft(return_complex=False), normalized, Hamming window, a mel filter bank) trains a "
     "classifier as PyTorch's", mel_front_end)
case("torch.fft's rfft (ortho), fft with n longer and shorter than the axis, ifft of fft (forward), fft2 and rfftn "
     "with s, read by abs, .real, .imag and view_as_real, train as PyTorch's", fft_family)
case("torch.angle of a spectrum (its phase, cos and sin) and of a real tensor trains as PyTorch's", phases)
case("FNet's token mixing, fftn(x, dim=(1, 2)).real, trains as PyTorch's", fourier_mixing)
case("Vocos' head (exp(mag) * (cos p + 1j sin p), torch.istft centred) trains as PyTorch's", vocos_head)
case("complex arithmetic (torch.complex, torch.polar, exp(1j x), *, /, +, - of complex and real values, conj; "
     "sum, mean, cat, stack and F.pad of complex tensors), "
     "torch.fft.irfft with n and ortho, torch.istft with a length and a short window, normalized, and two-sided, "
     "train as PyTorch's",
     complex_arithmetic)
case("rotary embeddings as Meta's Llama code writes them (a complex buffer sliced to the sequence, view_as_complex, a "
     "complex product, view_as_real) train as PyTorch's", complex_rope)
case("the magnitude of an exactly zero spectrum has gradient 0, as PyTorch's (no NaN)", silent_bins)
case("a product of complex matrices (no pair form) is refused, naming aten::matmul and its line", matmul_refused)
case("a Fourier transform at an opset before 17 (ONNX's DFT) is refused, naming opset 17", old_opset_refused)
finish("from_torch_complex")
