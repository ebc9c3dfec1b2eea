"""tightfit.from_torch on convolutional, pooling and audio networks' pieces, each trained beside PyTorch
from the same weights: a DCGAN discriminator's LeakyReLU and Softplus, a mobile network's clamps, an L1
loss and a weight_norm vocoder, HiFi-GAN's discriminators, spectral_norm refused, average pooling that
does not count its padding, ceil_mode pools, interpolation (linear, bilinear, trilinear, bicubic),
PixelShuffle, reflect, replicate and circular padding, padding="same", 3-d convolutions and pools,
timm's standardised weights, and F.unfold. Fails, not skips, without the ONNX importer.
usage: test_from_torch_convolution.py   (PYTHONPATH=python)"""
import copy
import json
import warnings

import torch
import torch.nn.functional as F

import tightfit
from from_torch_cases import adamw_both, batch, beside_torch, case, dumped, each_beside_torch, finish, \
    require_importer
from tally import relative_apart
from torch_training import adamw_losses

require_importer()
torch.set_num_threads(1)  # as the other from_torch tests


# A DCGAN discriminator's activations: LeakyReLU(0.2) after strided convolutions (and a Softplus), 5
# AdamW steps as PyTorch's.
def leaky_discriminator():
    torch.manual_seed(6)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, stride=2, padding=1), torch.nn.LeakyReLU(0.2),
                                torch.nn.Conv2d(8, 16, 4, stride=2, padding=1), torch.nn.LeakyReLU(0.2),
                                torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 8), torch.nn.Softplus(),
                                torch.nn.Linear(8, 2))
    xs, ys = torch.randn(batch, 3, 16, 16), torch.randint(0, 2, (batch,))
    graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    losses, expected, worst = adamw_both(graph, model, xs, ys, 5)
    seen = f"{ops.count('leaky_relu')} leaky_relu, {ops.count('softplus')} softplus; 5 AdamW steps " \
        f"{losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    if ops.count("leaky_relu") != 2 or ops.count("softplus") != 1:
        return f"expected 2 leaky_relu and 1 softplus nodes: {ops}", seen
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("LeakyReLU(0.2) and Softplus import and train as PyTorch's", leaky_discriminator)


# A mobile network's clamps: ReLU6, Hardtanh, torch.clamp by numbers (one side and both), Hardsigmoid
# and Hardswish import as one clip op each (no Max/Min stacks, whose stacked copies made MobileNet v2's
# plan 2.5 times its ReLU twin's) and train 5 AdamW steps as PyTorch's; the plan of a ReLU6 network is
# no larger than the same network's with ReLU.
class Clamps(torch.nn.Module):
    def __init__(self, activation=None):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.head = torch.nn.Linear(8 * 8 * 8, 4)
        self.activation = activation or torch.nn.ReLU6()

    def forward(self, x):
        h = self.activation(self.conv1(x))
        h = torch.nn.functional.hardtanh(self.conv2(h), -0.5, 0.75) + h.clamp(min=0.25)
        h = torch.nn.functional.hardswish(h) * torch.nn.functional.hardsigmoid(h.clamp(-1.0, 2.0))
        return self.head(h.flatten(1))


def clamps():
    torch.manual_seed(8)
    model = Clamps()
    xs, ys = 2 * torch.randn(batch, 3, 8, 8), torch.randint(0, 4, (batch,))
    graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    losses, expected, worst = adamw_both(graph, model, xs, ys, 5)
    twin = copy.deepcopy(model)
    twin.activation = torch.nn.ReLU()
    plans = [tightfit.compile(tightfit.from_torch(m, (xs,), loss="cross_entropy"), set={"N": batch},
                              optimizer="adamw").total_bytes for m in (model, twin)]
    seen = f"{ops.count('clip')} clip, {ops.count('max')} max; 5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} " \
        f"(PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}; plan {plans[0]} bytes " \
        f"(with ReLU {plans[1]})"
    if ops.count("clip") != 6 or ops.count("max") != 0:
        return f"expected 6 clip nodes and no max: {ops}", seen
    if plans[0] > plans[1]:
        return "the ReLU6 network's plan is larger than its ReLU twin's", seen
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("ReLU6, Hardtanh, clamp, Hardsigmoid and Hardswish import as clip and train as PyTorch's", clamps)


def l1_steps_beside_torch(model, xs, ys, steps=5):
    """Imports `model` with loss="l1", trains `steps` AdamW steps (lr 1e-2, no decay, no clipping) in
    tightfit and then in PyTorch from the same weights; returns (the graph's ops, tightfit's losses,
    PyTorch's, the worst relative difference)."""
    graph = tightfit.from_torch(model, (xs,), loss="l1")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    plan = tightfit.compile(graph, set={"N": batch}, optimizer="adamw", lr=1e-2, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0)
    losses = [session.step({"x": xs.numpy(), "labels": ys.numpy()}) for _ in range(steps)]
    expected = adamw_losses(model, (xs,), ys, steps, 1e-2, criterion=F.l1_loss)
    return ops, losses, expected, relative_apart(losses, expected)


# A TTS-style mel head trained on an L1 loss (loss="l1": mean |output - target|, PyTorch's L1Loss),
# with a torch.abs inside the model too: 5 AdamW steps as PyTorch's.
def l1_mel_head():
    torch.manual_seed(7)

    class MelHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden, self.out = torch.nn.Linear(12, 32), torch.nn.Linear(32, 20)

        def forward(self, x):
            return self.out(torch.abs(self.hidden(x)))

    model = MelHead()
    xs, ys = torch.randn(batch, 12), torch.randn(batch, 20)
    ops, losses, expected, worst = l1_steps_beside_torch(model, xs, ys)
    seen = f"{ops.count('abs')} abs nodes; 5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} " \
        f"(PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    if ops.count("abs") != 2:
        return f"expected 2 abs nodes (the model's and the loss's): {ops}", seen
    return (None if worst <= 1e-5 and losses[-1] < losses[0] else f"tightfit {losses} vs PyTorch {expected}"), seen


case("torch.abs and an L1 loss import and train as PyTorch's", l1_mel_head)


# A HiFi-GAN-style vocoder in miniature (weight_norm on Conv1d and ConvTranspose1d, a dilated
# residual block, LeakyReLU 0.1, tanh) trained on an L1 loss against a waveform: 5 AdamW steps as
# PyTorch's, weight_g and weight_v updated as its parameters.
def weight_norm_vocoder():
    torch.manual_seed(11)
    norm = torch.nn.utils.weight_norm

    class Vocoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = norm(torch.nn.Conv1d(8, 16, 7, padding=3))
            self.up1 = norm(torch.nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1))
            self.up2 = norm(torch.nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1))
            self.res = torch.nn.ModuleList([norm(torch.nn.Conv1d(4, 4, 3, dilation=d, padding=d)) for d in (1, 3)])
            self.post = norm(torch.nn.Conv1d(4, 1, 7, padding=3))

        def forward(self, mel):
            h = self.up2(F.leaky_relu(self.up1(F.leaky_relu(self.pre(mel), 0.1)), 0.1))
            for conv in self.res:
                h = h + conv(F.leaky_relu(h, 0.1))
            return torch.tanh(self.post(F.leaky_relu(h, 0.1)))

    model = Vocoder()
    mel, wave = torch.randn(batch, 8, 6), 0.5 * torch.randn(batch, 1, 24)
    ops, losses, expected, worst = l1_steps_beside_torch(model, mel, wave)
    seen = f"{ops.count('conv_transpose2d')} conv_transpose2d, {ops.count('sqrt')} sqrt (weight norms); 5 AdamW " \
        f"steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    if ops.count("conv_transpose2d") != 2 or ops.count("sqrt") != 6:
        return f"expected 2 conv_transpose2d and 6 sqrt nodes: {ops}", seen
    return (None if worst <= 1e-5 and losses[-1] < losses[0] else f"tightfit {losses} vs PyTorch {expected}"), seen


case("a weight_norm vocoder (ConvTranspose1d) imports and trains as PyTorch's", weight_norm_vocoder)


# HiFi-GAN's discriminators in miniature (a TTS vocoder's GAN, weight_norm throughout): the
# multi-period one pads the waveform by reflection to a multiple of its period and reshapes it into
# [T / p, p] planes for (k, 1) convolutions; the multi-scale one average-pools it (AvgPool1d with
# padding) before grouped, strided Conv1d. Both train as PyTorch's.
class PeriodDiscriminator(torch.nn.Module):
    def __init__(self, period=3):
        super().__init__()
        norm = torch.nn.utils.weight_norm
        self.period = period
        self.convs = torch.nn.ModuleList([norm(torch.nn.Conv2d(1, 8, (5, 1), (3, 1), padding=(2, 0))),
                                          norm(torch.nn.Conv2d(8, 16, (5, 1), (3, 1), padding=(2, 0)))])
        self.post = norm(torch.nn.Conv2d(16, 1, (3, 1), 1, padding=(1, 0)))
        self.head = torch.nn.Linear(2 * 3, 5)

    def forward(self, x):  # x [N, 1, 50]
        n, c, t = x.shape
        x = F.pad(x, (0, self.period - t % self.period), "reflect")
        x = x.view(n, c, x.shape[2] // self.period, self.period)
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
        return self.head(torch.flatten(self.post(x), 1))


class ScaleDiscriminator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        norm = torch.nn.utils.weight_norm
        self.pool = torch.nn.AvgPool1d(4, 2, padding=2)
        self.convs = torch.nn.ModuleList([norm(torch.nn.Conv1d(1, 8, 15, 1, padding=7)),
                                          norm(torch.nn.Conv1d(8, 16, 41, 4, groups=4, padding=20))])
        self.head = torch.nn.Linear(16 * 7, 5)

    def forward(self, x):  # x [N, 1, 50]
        x = self.pool(x)
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
        return self.head(torch.flatten(x, 1))


def hifigan_discriminators():
    torch.manual_seed(18)
    wave, labels = torch.randn(batch, 1, 50), torch.randint(0, 5, (batch,))
    problem, period, ops = beside_torch(PeriodDiscriminator(), wave, labels, ["conv2d", "concat"])
    if problem:
        return problem, period
    problem, scale, ops = beside_torch(ScaleDiscriminator(), wave, labels, ["avg_pool2d", "conv1d"])
    return problem, f"multi-period: {period}; multi-scale: {scale}"


case("HiFi-GAN's period and scale discriminators (reflect pad, AvgPool1d) train as PyTorch's", hifigan_discriminators)


# spectral_norm updates its power-iteration vectors at every training forward pass, state a graph
# does not have: refused by name in both of its forms, rather than trained with them frozen.
def spectral_norm_refused():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    torch.nn.utils.spectral_norm(model[0])
    forms = [("hook", model)]
    parametrizations = getattr(torch.nn.utils, "parametrizations", None)
    if parametrizations is not None and hasattr(parametrizations, "spectral_norm"):
        other = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
        parametrizations.spectral_norm(other[0])
        forms.append(("parametrization", other))
    seen = []
    for form, m in forms:
        try:
            tightfit.from_torch(m, (torch.randn(batch, 3, 8, 8),), loss="cross_entropy")
            return f"the {form} form imported", ""
        except tightfit.TightfitError as error:
            text = str(error)
            if "spectral_norm on '0'" not in text or "power iteration" not in text:
                return f"the {form} form's message: {text}", ""
            seen.append(form)
    return None, f"refused ({', '.join(seen)}): {text[:90]}..."


case("spectral_norm is refused, naming the module", spectral_norm_refused)


# Average pooling that does not count its padding (PoolFormer's token mixer), at stride 1 and 2.
class UncountedPadding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 3, 3, padding=1)
        self.same = torch.nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.strided = torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False)
        self.head = torch.nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):  # x [N, 64]: 8 x 8 images
        h = torch.tanh(self.conv(x.reshape(-1, 1, 8, 8)))
        h = self.strided(self.same(h) - h)
        return self.head(h.flatten(1))


def uncounted_padding():
    torch.manual_seed(15)
    return beside_torch(UncountedPadding(), torch.randn(batch, 64), torch.randint(0, 5, (batch,)),
                        ["avg_pool2d"])[:2]


case("average pooling that does not count its padding (stride 1 and 2) trains as PyTorch's", uncounted_padding)


# ceil_mode pooling with partial last windows (SqueezeNet's MaxPool2d(3, 2, ceil_mode=True), ResNet-D's
# AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False), padded and 1-d forms): floor-mode windows
# over an input padded at the end (max: the last element repeated; average: zeros, then each window's
# own count, PyTorch's divisor); each trains as PyTorch's.
class CeilPooled(torch.nn.Module):
    def __init__(self, pool, spatial):
        super().__init__()
        self.conv = (torch.nn.Conv2d if len(spatial) == 2 else torch.nn.Conv1d)(2, 3, 1)
        self.pool = pool
        with torch.no_grad():
            size = self.pool(torch.zeros(1, 3, *spatial)).numel()
        self.head = torch.nn.Linear(size, 5)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.conv(x)), 1))


def ceil_mode_pools():
    torch.manual_seed(23)
    forms = [("max 3/2 over 7x7", torch.nn.MaxPool2d(3, 2, ceil_mode=True), (7, 7)),
             ("avg 2/2 over 7x7, padding not counted", torch.nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False),
              (7, 7)),
             ("avg 3/2 pad 1 over 6x6, counted", torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True), (6, 6)),
             ("avg 3/2 pad 1 over 6x5, not counted",
              torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False), (6, 5)),
             ("max 2/2 pad 1 over 5x6", torch.nn.MaxPool2d(2, 2, padding=1, ceil_mode=True), (5, 6)),
             ("avg1d 3/2 over 8", torch.nn.AvgPool1d(3, 2, ceil_mode=True), (8,)),
             ("max1d 2/2 over 7", torch.nn.MaxPool1d(2, 2, ceil_mode=True), (7,))]
    return each_beside_torch([(label, lambda pool=pool, spatial=spatial: (CeilPooled(pool, spatial),
                                                                          torch.randn(batch, 2, *spatial)))
                              for label, pool, spatial in forms])


case("ceil_mode pooling with partial windows (max, average counted or not, 1-d) trains as PyTorch's", ceil_mode_pools)


# Adaptive pools (a channel attention's squeeze: CBAM's max and mean of each channel; a 1-d text
# CNN's max over time): torch exports an output of size 1 over sizes it lost (after a reshape to -1)
# as GlobalMaxPool / GlobalAveragePool; over known sizes as a MaxPool / AveragePool of the whole
# window, or of a stride dividing the input. After a ReLU, so that a channel at 0 everywhere (tied
# maxima, whose gradient the ReLU stops) shows no difference.
class AdaptivePooled(torch.nn.Module):
    def __init__(self, pool, spatial, flatten_to=None):
        super().__init__()
        self.conv = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)[len(spatial) - 1](2, 3, 1)
        self.pool, self.flatten_to = pool, flatten_to  # flatten_to: the pooled rank, the exporter loses its sizes
        with torch.no_grad():
            size = self.forward_pooled(torch.zeros(1, 2, *spatial)).numel()
        self.head = torch.nn.Linear(size, 5)

    def forward_pooled(self, x):
        h = torch.relu(self.conv(x))
        if self.flatten_to:
            kept = self.flatten_to - 3  # trailing axes kept as they are
            h = h.reshape(h.shape[0], h.shape[1], -1, *(h.shape[h.dim() - kept:] if kept else ()))
        return self.pool(h)

    def forward(self, x):
        return self.head(torch.flatten(self.forward_pooled(x), 1))


def adaptive_pools():
    torch.manual_seed(29)
    forms = [("max1d to 1 over 9", torch.nn.AdaptiveMaxPool1d(1), (9,), None),
             ("max2d to 1 over 5x6", torch.nn.AdaptiveMaxPool2d(1), (5, 6), None),
             ("max3d to 1 over 3x4x2", torch.nn.AdaptiveMaxPool3d(1), (3, 4, 2), None),
             ("max2d to 2x3 over 4x6", torch.nn.AdaptiveMaxPool2d((2, 3)), (4, 6), None),
             ("max1d to 1 over 3x4 flattened (global)", torch.nn.AdaptiveMaxPool1d(1), (3, 4), 3),
             ("max2d to 1 over 2x3x4 reshaped to 6x4 (global)", torch.nn.AdaptiveMaxPool2d(1), (2, 3, 4), 4),
             ("avg1d to 1 over 3x4 flattened (global)", torch.nn.AdaptiveAvgPool1d(1), (3, 4), 3),
             ("avg3d to 1 over 2x3x4", torch.nn.AdaptiveAvgPool3d(1), (2, 3, 4), None)]
    return each_beside_torch([(label, lambda pool=pool, spatial=spatial, to=to: (AdaptivePooled(pool, spatial, to),
                                                                                torch.randn(batch, 2, *spatial)))
                              for label, pool, spatial, to in forms])


case("adaptive max and average pools (to size 1: global pools; 1-d, 2-d, 3-d) train as PyTorch's", adaptive_pools)


# Linear interpolation (F.interpolate bilinear and linear: MobileViT, segmentation heads): products with
# constant blend matrices, up and down, to sizes that are not multiples, both corner conventions.
class Interpolated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)
        self.head = torch.nn.Linear(2 * 8 * 8 + 2 * 5 * 7 + 2 * 3 * 3 + 2 * 11 + 2 * 3 * 8 * 8 + 2 * 5 * 3 * 2, 5)

    def forward(self, x):  # x [N, 16]: 4 x 4 images
        F = torch.nn.functional
        h = torch.tanh(self.conv(x.reshape(-1, 1, 4, 4)))
        up = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)  # [N, 2, 8, 8]
        odd = F.interpolate(h, size=(5, 7), mode="bilinear", align_corners=True)
        down = F.interpolate(up, size=(3, 3), mode="bilinear", align_corners=False)
        line = F.interpolate(h.mean(3), size=11, mode="linear", align_corners=False)  # [N, 2, 11]
        volume = torch.stack([h, h * h], 2)  # [N, 2, 2, 4, 4]: a volume of 2 planes
        trilinear = F.interpolate(volume, scale_factor=(1.5, 2, 2), mode="trilinear", align_corners=False)
        corners = F.interpolate(volume, size=(5, 3, 2), mode="trilinear", align_corners=True)
        parts = [t.flatten(1) for t in (up, odd, down, line, trilinear, corners)]
        return self.head(torch.cat(parts, 1))


def interpolated():
    torch.manual_seed(17)
    return beside_torch(Interpolated(), torch.randn(batch, 16), torch.randint(0, 5, (batch,)), ["matmul"])[:2]


case("bilinear, linear and trilinear interpolation (up, down, odd sizes, align_corners both ways) trains as PyTorch's",
     interpolated)


# Nearest interpolation other than by a whole factor (F.interpolate(size=...) to any size: DETR's masks
# and FPNs; a shrinking scale; "nearest-exact"): one-hot blend matrices, per axis.
class NearestResized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)
        self.head = torch.nn.Linear(2 * 5 * 7 + 2 * 3 * 3 + 2 * 7 * 6 + 2 * 9 + 2 * 2 * 2, 5)

    def forward(self, x):  # x [N, 16]: 4 x 4 images
        F = torch.nn.functional
        h = torch.tanh(self.conv(x.reshape(-1, 1, 4, 4)))
        odd = F.interpolate(h, size=(5, 7), mode="nearest")  # asymmetric, floor
        down = F.interpolate(h, size=(3, 3), mode="nearest")
        exact = F.interpolate(h, size=(7, 6), mode="nearest-exact")  # half_pixel, rounding
        line = F.interpolate(h.mean(3), size=9, mode="nearest")  # [N, 2, 9]
        shrunk = F.interpolate(h, scale_factor=0.6, mode="nearest")  # [N, 2, 2, 2]
        parts = [t.flatten(1) for t in (odd, down, exact, line, shrunk)]
        return self.head(torch.cat(parts, 1))


def nearest_resized():
    torch.manual_seed(18)
    return beside_torch(NearestResized(), torch.randn(batch, 16), torch.randint(0, 5, (batch,)), ["matmul"])[:2]


case("nearest interpolation to sizes that are no whole multiples, shrinking, and nearest-exact trains as "
     "PyTorch's", nearest_resized)


# Bicubic interpolation: four taps of Keys' kernel (a = -0.75) per output position, the taps past an edge
# reading the edge, as constant blend matrices like the linear modes'.
class Bicubic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)
        self.head = torch.nn.Linear(2 * 8 * 8 + 2 * 7 * 5 + 2 * 3 * 3, 5)

    def forward(self, x):  # x [N, 16]: 4 x 4 images
        F = torch.nn.functional
        h = torch.tanh(self.conv(x.reshape(-1, 1, 4, 4)))
        up = F.interpolate(h, scale_factor=2, mode="bicubic", align_corners=False)  # [N, 2, 8, 8]
        corners = F.interpolate(h, size=(7, 5), mode="bicubic", align_corners=True)
        down = F.interpolate(up, size=(3, 3), mode="bicubic")
        return self.head(torch.cat([t.flatten(1) for t in (up, corners, down)], 1))


def bicubic():
    torch.manual_seed(18)
    return beside_torch(Bicubic(), torch.randn(batch, 16), torch.randint(0, 5, (batch,)), ["matmul"], steps=3)[:2]


case("bicubic interpolation (up, down, odd sizes, align_corners both ways) trains as PyTorch's", bicubic)


# nn.PixelShuffle exports as DepthToSpace (CRD mode) and nn.PixelUnshuffle as a 6-D Reshape/Transpose
# chain (or SpaceToDepth): each imports as reshape, transpose, reshape, and a super-resolution-style
# block (conv, shuffle up, conv, shuffle down) trains as PyTorch's; torch.onnx.export of an explicit
# SpaceToDepth is covered by ONNX's node tests (tests/onnx_node).
def pixel_shuffles():
    torch.manual_seed(14)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 3, padding=1), torch.nn.PixelShuffle(2), torch.nn.Tanh(),
                                torch.nn.Conv2d(3, 2, 3, padding=1), torch.nn.PixelUnshuffle(4), torch.nn.Flatten(),
                                torch.nn.Linear(32 * 2 * 2, 5))
    problem, seen, ops = beside_torch(model, torch.randn(batch, 3, 4, 4), torch.randint(0, 5, (batch,)),
                                      ["transpose", "reshape"])
    return (f"expected 2 transposes (one per shuffle): {ops}" if ops.count("transpose") != 2 else problem), seen


case("PixelShuffle and PixelUnshuffle (DepthToSpace, a 6-D transpose) train as PyTorch's", pixel_shuffles)


# Reflect and replicate padding (nn.ReflectionPad2d in CycleGAN-style generators, nn.ReflectionPad1d
# in MelGAN-style vocoders) import as slices of the data concatenated with it; 1-d pooling as 2-d over
# a plane of height 1; torch's std and var, whose element count ReduceProd computes from the shape,
# fold it. Each trains as PyTorch's.
class PaddedGenerator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.ReflectionPad2d(2), torch.nn.Conv2d(3, 4, 5), torch.nn.ReLU(),
                                        torch.nn.ReplicationPad2d((1, 2, 0, 1)), torch.nn.Conv2d(4, 2, 3))
        self.head = torch.nn.Linear(2 * 5 * 6, 5)

    def forward(self, x):  # x [N, 3, 6, 5]
        return self.head(torch.flatten(self.body(x), 1))


class PooledSequence(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pad, self.conv = torch.nn.ReflectionPad1d(3), torch.nn.Conv1d(4, 6, 7)
        self.max = torch.nn.MaxPool1d(3, stride=2, padding=1)
        self.avg = torch.nn.AvgPool1d(2, stride=2, padding=1, count_include_pad=False)
        self.head = torch.nn.Linear(6 * 3, 5)

    def forward(self, x):  # x [N, 4, 9]
        h = self.avg(self.max(torch.tanh(self.conv(self.pad(x)))))
        h = (h - h.mean(-1, keepdim=True)) / (h.std(-1, keepdim=True) + 1e-3) + h.var(-1, keepdim=True)
        return self.head(torch.flatten(h, 1))


def padded_and_pooled():
    torch.manual_seed(15)
    problem, seen, ops = beside_torch(PaddedGenerator(), torch.randn(batch, 3, 6, 5), torch.randint(0, 5, (batch,)),
                                      ["slice", "concat", "expand"])
    if problem or ops.count("slice") < 8:
        return problem or f"expected the reflect pad's slices: {ops}", seen
    problem, seen1d, ops = beside_torch(PooledSequence(), torch.randn(batch, 4, 9), torch.randint(0, 5, (batch,)),
                                        ["max_pool2d", "avg_pool2d", "slice"])
    if not problem and (ops.count("max_pool2d") != 1 or ops.count("avg_pool2d") != 1):
        problem = f"expected one max_pool2d and one avg_pool2d: {ops}"
    return problem, f"reflect/replicate 2-d: {seen}; reflect 1-d, 1-d pools, std, var: {seen1d}"


case("ReflectionPad, ReplicationPad, 1-d pooling, std and var train as PyTorch's", padded_and_pooled)


# Circular padding (Conv2d(padding_mode="circular"), F.pad(mode="circular")): PyTorch 1.x's exporter
# slices the wrong elements for it (onnxruntime disagrees with PyTorch on its file), so from_torch
# writes it itself there (_circular_pad_as_torch); 2.x's export is right. Either way it must train as
# PyTorch's.
class CircularPads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular")
        self.head = torch.nn.Linear(4 * 7 * 8, 5)

    def forward(self, x):  # x [N, 3, 6, 5]
        h = F.pad(torch.tanh(self.conv(x)), (1, 2, 0, 1), mode="circular")
        return self.head(torch.flatten(h, 1))


def circular_padding():
    torch.manual_seed(16)
    return beside_torch(CircularPads(), torch.randn(batch, 3, 6, 5), torch.randint(0, 5, (batch,)),
                        ["slice", "concat"])[:2]


case("circular padding (Conv2d padding_mode, F.pad) trains as PyTorch's", circular_padding)


# padding="same" (PyTorch 2.x writes ONNX auto_pad SAME_UPPER; under 1.13, which has no symbolic for it,
# from_torch writes explicit pads) and "valid": an even kernel pads one more at the end, as zeros
# concatenated before a symmetric convolution; 2-d and a dilated 1-d convolution train as PyTorch's.
class SamePadded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.image = torch.nn.Conv2d(3, 4, 4, padding="same")
        self.sequence = torch.nn.Conv1d(4, 2, 6, padding="same", dilation=2)
        self.valid = torch.nn.Conv1d(2, 2, 3, padding="valid", bias=False)
        self.head = torch.nn.Linear(2 * 28, 5)

    def forward(self, x):  # x [N, 3, 5, 6]
        h = torch.tanh(self.image(x)).flatten(2)  # [N, 4, 30]
        return self.head(torch.flatten(self.valid(self.sequence(h)), 1))


def same_padding():
    torch.manual_seed(24)
    model, xs = SamePadded(), torch.randn(batch, 3, 5, 6)
    return beside_torch(model, xs, torch.randint(0, 5, (batch,)), ["concat", "conv2d", "conv1d"])[:2]


case("padding='same' with even kernels and padding='valid' train as PyTorch's", same_padding)


# 3-d convolution and pooling (video networks, volumetric U-Nets): Conv3d as one conv2d over its depth
# taps stacked beside the channels (groups, padding, a strided and dilated depth), ConvTranspose3d as
# one conv_transpose2d whose taps are spread over the output planes (2/2 by a reshape; 3/2 with
# output_padding; 3/1 grouped; (2,3,3)/(3,2,2) dilated), MaxPool3d and AvgPool3d as a 2-d pool per plane
# and a depth window reduced over stacked slices (padded: edge copies for max, counted zeros for avg).
class Volumetric(torch.nn.Module):
    def __init__(self, pool, up):
        super().__init__()
        self.enc = torch.nn.Conv3d(2, 8, 3, padding=1)
        self.pool = pool
        self.mid = torch.nn.Conv3d(8, 8, (3, 3, 3), stride=(2, 1, 1), padding=(2, 1, 1), dilation=(2, 1, 1), groups=2)
        self.up = up
        with torch.no_grad():
            size = self.features(torch.zeros(1, 2, 6, 8, 8)).numel()
        self.head = torch.nn.Linear(size, 5)  # every output position its own weights: placement matters

    def features(self, x):  # x [N, 2, 6, 8, 8]
        return self.up(torch.relu(self.mid(self.pool(torch.relu(self.enc(x))))))

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def volumetric():
    nn = torch.nn
    forms = [("max 2, up 2/2", lambda: (nn.MaxPool3d(2), nn.ConvTranspose3d(8, 4, 2, stride=2))),
             ("avg 2, up 3/2 output_padding 1",
              lambda: (nn.AvgPool3d(2), nn.ConvTranspose3d(8, 4, 3, 2, 1, output_padding=1))),
             ("max 3/2 pad 1, up 3/1 grouped", lambda: (nn.MaxPool3d(3, 2, 1), nn.ConvTranspose3d(8, 4, 3, 1, 1, groups=2))),
             ("avg 3/(1,2,2) pad 1, up (2,3,3)/(3,2,2) dilated",
              lambda: (nn.AvgPool3d(3, (1, 2, 2), 1),
                       nn.ConvTranspose3d(8, 4, (2, 3, 3), (3, 2, 2), (0, 1, 1), dilation=(2, 1, 1), bias=False))),
             ("no pool, up 2/2 output_padding (1,0,1)",
              lambda: (nn.Identity(), nn.ConvTranspose3d(8, 4, 2, stride=2, output_padding=(1, 0, 1))))]

    def made(i, layers):  # every weight drawn after the seed (the transposed convolution's too)
        torch.manual_seed(40 + i)
        return Volumetric(*layers()), torch.randn(batch, 2, 6, 8, 8)
    return each_beside_torch([(label, lambda i=i, layers=layers: made(i, layers))
                              for i, (label, layers) in enumerate(forms)])


case("Conv3d, ConvTranspose3d, MaxPool3d and AvgPool3d train as PyTorch's", volumetric)


# Three of timm's spellings: weights standardised by F.batch_norm(w, None, None, training=True) before
# each convolution (BiT's StdConv2d, NFNets' ScaledStdConv2d: from_torch writes the batch's own mean and
# biased variance, as for any BatchNorm without running statistics), a running sum along an axis other than the last
# (EdgeNeXt's Fourier positions: ones.cumsum(1)), and a parameter repeated by a count computed from the
# batch size (GCViT's q_global.repeat_interleave(B // b, 0): PyTorch 2.x writes it with a OneHot of known
# values, which the import folds).
class Standardised(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.gain = torch.nn.Parameter(torch.ones(4))
        self.query = torch.nn.Parameter(torch.randn(1, 4, 5))
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):  # x [N, 3, 5, 5]
        w = F.batch_norm(self.conv.weight.reshape(1, 4, -1), None, None, weight=self.gain, training=True,
                         momentum=0.0, eps=1e-6).reshape_as(self.conv.weight)
        h = F.conv2d(x, w, self.conv.bias, padding=1)  # [N, 4, 5, 5]
        positions = torch.ones_like(h[:, 0]).cumsum(1) / 5  # [N, 5, 5], along axis 1
        h = h * positions.unsqueeze(1) + h.cumsum(2) / 5
        query = self.query.repeat_interleave(x.shape[0] // self.query.shape[0], dim=0)  # [N, 4, 5]
        return self.head(torch.tanh(torch.cat([h, h * query.unsqueeze(-1)], 1)).mean((2, 3)))


def timm_spellings():
    torch.manual_seed(45)
    return beside_torch(Standardised(), torch.randn(batch, 3, 5, 5), torch.randint(0, 5, (batch,)),
                        ["batch_norm", "matmul"])[:2]


case("standardised weights (F.batch_norm without running statistics), cumsum along any axis and a repeat by a "
     "count from the batch size train as PyTorch's", timm_spellings)


# nn.Unfold / F.unfold (im2col: HaloNet's, VOLO's and research code's patches): PyTorch gathers each window's
# rows and columns by known index tables, over a batch of symbolic size: runs of consecutive indices
# become slices, concatenated (overlapping windows' gradients add); and Tensor.unfold's patches, along
# positive and negative dimensions, and along an axis whose size the exporter lost.
class Unfolded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 1)
        self.head = torch.nn.Linear(18 * 9 + 2 * 2 * 6 * 4 + 2 * 6 * 2 * 3 * 3 + 3 * 6 * 4, 5)

    def forward(self, x):  # x [N, 2, 6, 6]
        h = torch.tanh(self.conv(x))
        windows = F.unfold(h, kernel_size=3, padding=1, stride=2)  # [N, 18, 9], overlapping
        dilated = F.unfold(h, kernel_size=(2, 1), dilation=(2, 1))  # [N, 4, 24]
        patches = h.unfold(3, 3, 2)  # [N, 2, 6, 2, 3]
        # negative dimensions (audio frames, PatchTST's patches): torch's own export put the windows one
        # axis off
        frames = h.unfold(-1, 3, 2)  # [N, 2, 6, 2, 3]
        rows = h.unfold(-2, 3, 2).transpose(-2, -3)  # [N, 2, 6, 2, 3]
        # an axis whose size the exporter lost (a reshape by traced sizes: HaloNet's blocks; torch refuses it)
        lost = h.reshape(h.shape[0], h.shape[1] * h.shape[2], -1).unfold(1, 4, 3)  # [N, 3, 6, 4]
        parts = [windows, dilated, patches, frames, rows, lost]
        return self.head(torch.cat([p.flatten(1) for p in parts], 1))


def unfolded():
    torch.manual_seed(46)
    return beside_torch(Unfolded(), torch.randn(batch, 2, 6, 6), torch.randint(0, 5, (batch,)), ["concat"])[:2]


case("F.unfold (overlapping, padded, dilated windows) and Tensor.unfold (negative dimensions, a lost size) train as "
     "PyTorch's", unfolded)


# F.fold / nn.Fold (col2im: VOLO's outlook attention, overlap-add of patches): unfold's adjoint, each patch
# element added where unfold took it; its output size from the traced shape (VOLO's x.shape) or fixed, with
# stride, padding and dilation, and sizes the blocks do not reach to the end (zeros there).
class Folded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 1)
        self.head = torch.nn.Linear(2 * 36 + 2 * 4 * 5 + 2 * 5 * 5 + 2 * 36, 5)

    def forward(self, x):  # x [N, 2, 6, 6]
        h = torch.tanh(self.conv(x))
        height, width = h.shape[2:]
        windows = F.unfold(h, kernel_size=3, padding=1, stride=2) * 2  # [N, 18, 9]
        back = F.fold(windows, output_size=(height, width), kernel_size=3, padding=1, stride=2)  # overlap-add
        strided = F.fold(windows[:, :8], output_size=(4, 5), kernel_size=2, stride=2, padding=1)  # [N, 2, 4, 5]
        dilated = F.fold(F.unfold(h, kernel_size=2)[:, :, :6], output_size=(5, 5), kernel_size=2,
                         dilation=(2, 1), stride=(1, 2))  # [N, 2, 5, 5]: its last column reached by no block
        unit = torch.nn.Fold(output_size=(6, 6), kernel_size=1)(h.flatten(2))  # [N, 2, 6, 6]
        parts = [back, strided, dilated, unit]
        return self.head(torch.cat([p.flatten(1) for p in parts], 1))


def folded():
    torch.manual_seed(47)
    return beside_torch(Folded(), torch.randn(batch, 2, 6, 6), torch.randint(0, 5, (batch,)), [])[:2]


case("F.fold and nn.Fold (overlap-add; an output size traced from the shape; stride, padding, dilation) train as "
     "PyTorch's", folded)


# F.grid_sample (ONNX's GridSample: a spatial transformer's warp): a localisation head predicts an affine
# transform per sample, its grid the base grid times it (F.affine_grid's arithmetic, written out), and the image
# is sampled four ways; the weights of the localisation head train through the grid (the bilinear weights'
# gradient), the convolution's through the samples. Under PyTorch 1.13 (default opset 14) from_torch exports
# again at opset 17, since GridSample is opset 16's.
class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.locate = torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.Linear(2 * 6 * 7, 6)
        torch.nn.init.normal_(self.locate.weight, std=0.05)
        self.locate.bias.data = torch.tensor([1.1, 0.2, 0.1, -0.1, 0.9, 0.05])
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, 5), torch.linspace(-1, 1, 4), indexing="ij")
        self.register_buffer("base", torch.stack([xs, ys, torch.ones_like(xs)], -1).reshape(20, 3))
        self.head = torch.nn.Linear(4 * 3 * 20, 5)

    def forward(self, x):  # x [N, 2, 6, 7]
        theta = self.locate(x.flatten(1)).reshape(-1, 2, 3)
        grid = torch.matmul(self.base, theta.transpose(1, 2)).reshape(-1, 5, 4, 2) * 1.3  # partly outside
        h = torch.tanh(self.conv(x))
        samples = [F.grid_sample(h, grid, mode="bilinear", padding_mode="zeros", align_corners=False),
                   F.grid_sample(h, grid, mode="bilinear", padding_mode="border", align_corners=True),
                   F.grid_sample(h, grid, mode="bilinear", padding_mode="reflection", align_corners=False),
                   F.grid_sample(h, grid, mode="nearest", padding_mode="zeros", align_corners=False)]
        return self.head(torch.cat([t.flatten(1) for t in samples], 1))


def grid_sampled():
    torch.manual_seed(28)
    model = Transformer()
    xs, labels = torch.randn(batch, 2, 6, 7), torch.randint(0, 5, (batch,))
    problem, seen, _ = beside_torch(model, xs, labels, ["matmul", "floor", "round"])
    return problem, seen


case("F.grid_sample (bilinear with zeros, border and reflection padding, align_corners both ways, and nearest) "
     "of a learned affine grid trains as PyTorch's", grid_sampled)


# ConvTranspose with auto_pad, output_shape or pads that differ at an axis's two ends (tf2onnx writes them;
# PyTorch's exporter writes symmetric pads and output_padding), each written by a Function's symbolic beside
# PyTorch's equivalent: the full transposed convolution, each axis cut to ONNX's window of it (from the start
# ONNX's formulas give, zeros past the full output), then the bias. Three forms: SAME_UPPER at stride 2
# (one more cropped at the end), an output_shape longer than the full output (negative total paddings,
# split by floor division), uneven 1-d pads [3, 1].
def onnx_window(y, axis, start, length, size):
    """y's `axis` (of `size`, given: a size read from y would be traced) from `start` (negative: zeros before),
    `length` long (zeros past y's end)."""
    lo, hi = max(start, 0), min(start + length, size)
    y = y.narrow(axis, lo, hi - lo)
    pads = [0, 0] * (y.dim() - axis - 1) + [lo - start, start + length - hi]
    return F.pad(y, pads)


def transposed_windowed(x, w, b, stride, window):
    """ONNX's ConvTranspose of windows [(start, length, the full output's size) per spatial axis]."""
    y = (F.conv_transpose1d if x.dim() == 3 else F.conv_transpose2d)(x, w, None, stride)
    for i, (start, length, size) in enumerate(window):
        y = onnx_window(y, 2 + i, start, length, size)
    return y + b.reshape(-1, *[1] * (x.dim() - 2))


def split_total(total, upper):
    """ONNX's reference split of a total padding: the start's share (floor division, as its Python does)."""
    return total // 2 if upper else total - total // 2


class TransposedForms(torch.autograd.Function):
    """Three ConvTransposes of (x [N, 2, 4, 4], w2, b2, s [N, 2, 5], w1, b1): auto_pad SAME_UPPER stride 2
    (4 * 2 = 8 of the full 9), output_shape [13, 14] at stride 3 (the full 12 and total paddings -1 and -2:
    a zero row at the end, zero columns at both ends), and 1-d pads [3, 1] at stride 2 (the full 12 less 3 at
    the start and 1 at the end)."""

    @staticmethod
    def compute(x, w2, b2, s, w1, b1):
        same = transposed_windowed(x, w2, b2, 2, [(split_total(9 - 8, True), 8, 9)] * 2)
        shaped = transposed_windowed(x, w2, b2, 3, [(split_total(12 - 13, False), 13, 12),
                                                    (split_total(12 - 14, False), 14, 12)])
        uneven = transposed_windowed(s, w1, b1, 2, [(3, 2 * 4 + 4 - 3 - 1, 12)])
        return torch.cat([same.flatten(1), shaped.flatten(1), uneven.flatten(1)], 1)

    @staticmethod
    def forward(ctx, *inputs):
        ctx.save_for_backward(*inputs)
        return TransposedForms.compute(*inputs)

    @staticmethod
    def backward(ctx, dy):
        with torch.enable_grad():
            inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
            return torch.autograd.grad(TransposedForms.compute(*inputs), inputs, dy)

    @staticmethod
    def symbolic(g, x, w2, b2, s, w1, b1):
        same = g.op("ConvTranspose", x, w2, b2, strides_i=[2, 2], auto_pad_s="SAME_UPPER")
        shaped = g.op("ConvTranspose", x, w2, b2, strides_i=[3, 3], output_shape_i=[13, 14])
        uneven = g.op("ConvTranspose", s, w1, b1, strides_i=[2], pads_i=[3, 1])
        flat = [g.op("Flatten", y, axis_i=1) for y in (same, shaped, uneven)]
        return g.op("Concat", *flat, axis_i=1)


class TransposedModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w2, self.b2 = torch.nn.Parameter(torch.randn(2, 3, 3, 3) * 0.3), torch.nn.Parameter(torch.randn(3))
        self.w1, self.b1 = torch.nn.Parameter(torch.randn(2, 3, 4) * 0.3), torch.nn.Parameter(torch.randn(3))
        self.head = torch.nn.Linear(3 * 64 + 3 * 13 * 14 + 3 * 8, 5)

    def forward(self, x):  # x [N, 2, 4, 4]; its first rows, [N, 2, 5], the 1-d input
        s = x.flatten(2)[:, :, :5]
        return self.head(torch.tanh(TransposedForms.apply(x, self.w2, self.b2, s, self.w1, self.b1)))


def transposed_forms():
    torch.manual_seed(27)
    model = TransposedModel()
    xs, labels = torch.randn(batch, 2, 4, 4), torch.randint(0, 5, (batch,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # from_torch names the Function: its backward is autograd's here
        problem, seen, _ = beside_torch(model, xs, labels, ["conv_transpose2d", "slice", "concat"])
    return problem, seen


case("ConvTranspose with auto_pad SAME_UPPER, an output_shape past the full output and uneven 1-d pads (tf2onnx's "
     "forms) trains as PyTorch's", transposed_forms)


finish("from_torch_convolution")
