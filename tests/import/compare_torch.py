#!/usr/bin/python3
"""ONNX import against PyTorch: torch.onnx.export of zoo reference modules (tests/zoo/
torch_reference.py, dynamic axes), `tightfit import --loss cross_entropy`, then the same inputs in
both. Checks, per model: the imported parameters are the module's (names, shapes, count), the
forward outputs agree to 1e-5 and the cross-entropy gradients w.r.t. every parameter to 1e-4
(absolute, after scaling by max(1, max |torch value|)). tightfit runs through import_driver (C API,
CPU backend).

usage: compare_torch.py TIGHTFIT IMPORT_DRIVER       exits 77 (ctest skip) without torch
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"compare_torch.py: skipped, cannot import torch ({error})")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
import torch_reference  # noqa: E402

FORWARD_TOLERANCE, GRADIENT_TOLERANCE = 1e-5, 1e-4

# (config, opset, bindings, inputs {name: (shape, kind, bound)}, dynamic axes, classes)
MODELS = [
    ("ops", 14, "N=3", {"x": ((3, 2, 8, 8), "normal", 0)}, {"x": {0: "N"}}),
    ("cnn", 14, "N=3", {"x": ((3, 1, 8, 8), "normal", 0)}, {"x": {0: "N"}}),
    ("residual", 14, "N=3", {"x": ((3, 2, 8, 8), "normal", 0)}, {"x": {0: "N"}}),
    ("vocoder", 14, "N=3", {"x": ((3, 4, 16), "normal", 0)}, {"x": {0: "N"}}),
    ("norms", 14, "N=3", {"x": ((3, 2, 8, 8), "normal", 0)}, {"x": {0: "N"}}),
    ("upsampler", 14, "N=3", {"x": ((3, 2, 4, 4), "normal", 0)}, {"x": {0: "N"}}),
    ("bert", 14, "N=3,T=9", {"tokens": ((3, 9), "int", 40), "mask": ((3, 9), "mask", 0)},
     {"tokens": {0: "N", 1: "T"}, "mask": {0: "N", 1: "T"}}),
    ("padded", 14, "N=3,T=7", {"tokens": ((3, 7), "int", 50), "mask": ((3, 7), "mask", 0)},
     {"tokens": {0: "N", 1: "T"}, "mask": {0: "N", 1: "T"}}),
    ("gpt layers=2 d_model=32 heads=2 ctx=64", 14, "N=2,T=12",
     {"tokens": ((2, 12), "int", 128)}, {"tokens": {0: "N", 1: "T"}}),
    ("gpt layers=2 d_model=32 heads=2 ctx=64", 17, "N=2,T=12",
     {"tokens": ((2, 12), "int", 128)}, {"tokens": {0: "N", 1: "T"}}),
    ("gpt2-small layers=2 vocab=1000", 14, "N=1,T=8",
     {"tokens": ((1, 8), "int", 1000)}, {"tokens": {0: "N", 1: "T"}}),
    ("asr-128-6-3 vocab=300 enc_layers=1 dec_layers=2", 14, "N=2,T=6",
     {"mel": ((2, 80, 16), "normal", 0), "tokens": ((2, 6), "int", 300)},
     {"mel": {0: "N"}, "tokens": {0: "N", 1: "T"}}),
]


class Ops(torch.nn.Module):
    """Operators the zoo models do not use: ConvTranspose, AveragePool, Sigmoid, Tanh, Concat, Slice,
    Gather of one index, Flatten, ReduceSum, Pow 0.5 and 2, Unsqueeze/Squeeze, tanh GELU, LogSoftmax,
    LeakyRelu (alpha 0.2), Softplus, Erf (torch.erf, outside a GELU)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.deconv = torch.nn.ConvTranspose2d(4, 3, 2, stride=2)
        self.fc = torch.nn.Linear(4 * 8 * 8, 16)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        h = torch.sigmoid(F.leaky_relu(self.conv(x), 0.2))
        h = torch.tanh(self.deconv(F.avg_pool2d(h, 3, stride=2, padding=1)))
        h = torch.cat([h, x[:, :1]], dim=1).flatten(1)
        h = torch.erf(F.softplus(self.fc(h)) - 1)
        h = h - h.sum(dim=1, keepdim=True) / 16 + h[:, 0].unsqueeze(1)
        h = h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + 1).squeeze(-1).unsqueeze(-1)
        return F.log_softmax(self.head(F.gelu(h, approximate="tanh")), dim=-1)


class Residual(torch.nn.Module):
    """BatchNormalization as exported in eval mode (frozen at its running statistics, set away from
    their defaults here): BatchNorm2d after convolutions in a residual block, BatchNorm1d on [N, C, L]
    after a conv1d and on [N, C] features; global average pooling (and max pooling over the plane)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(2, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8, eps=1e-3)
        self.line = torch.nn.Conv1d(8, 6, 3, padding=1)
        self.bn3 = torch.nn.BatchNorm1d(6)
        self.fc = torch.nn.Linear(6 * 16, 12)
        self.bn4 = torch.nn.BatchNorm1d(12)
        self.head = torch.nn.Linear(12, 10)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2, self.bn3, self.bn4):
                bn.running_mean.copy_(0.5 * torch.randn_like(bn.running_mean))
                bn.running_var.copy_(0.5 + torch.rand_like(bn.running_var))

    def forward(self, x):
        h = torch.relu(self.bn1(self.stem(x)))
        h = torch.relu(h + self.bn2(self.conv(h)))
        h = h + F.adaptive_avg_pool2d(h, 1) - 0.5 * F.adaptive_max_pool2d(h, 1)  # GlobalAveragePool, MaxPool
        h = F.avg_pool2d(h, 2).flatten(2)
        h = torch.relu(self.bn3(self.line(h))).flatten(1)
        return self.head(torch.relu(self.bn4(self.fc(h))))


class Vocoder(torch.nn.Module):
    """A HiFi-GAN-style generator in miniature (the vocoder of TTS models) under a classifier head:
    weight_norm (ReduceL2, Div, Mul) on Conv1d and ConvTranspose1d, 1-d transposed convolutions
    (stride 2, padding, output_padding, groups, dilation), a dilated residual Conv1d, LeakyRelu 0.1, Tanh, and
    torch.norm p=1 (ReduceL1)."""

    def __init__(self):
        super().__init__()
        norm = torch.nn.utils.weight_norm
        self.pre = norm(torch.nn.Conv1d(4, 8, 3, padding=1))
        self.up1 = norm(torch.nn.ConvTranspose1d(8, 6, 4, stride=2, padding=1))
        self.res = norm(torch.nn.Conv1d(6, 6, 3, dilation=2, padding=2))
        self.up2 = norm(torch.nn.ConvTranspose1d(6, 6, 3, stride=2, padding=2, output_padding=1, groups=2, dilation=2))
        self.post = torch.nn.Conv1d(6, 1, 7, padding=3)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        h = self.up1(F.leaky_relu(self.pre(x), 0.1))
        h = h + self.res(F.leaky_relu(h, 0.1))
        h = torch.tanh(self.post(F.leaky_relu(self.up2(h), 0.1))).flatten(1)
        return self.head(h / (1 + torch.norm(h, p=1, dim=-1, keepdim=True)))


class Norms(torch.nn.Module):
    """GroupNorm (exported as InstanceNormalization over [N, groups, -1] between reshapes, then the
    module's weight and bias), InstanceNorm2d with affine parameters, InstanceNorm1d without, SiLU:
    the normalisations of diffusion UNets and of wav2vec2's feature encoder."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 8, 3, padding=1)
        self.group = torch.nn.GroupNorm(2, 8)
        self.instance = torch.nn.InstanceNorm2d(8, affine=True)
        self.line = torch.nn.Conv1d(8, 4, 3, padding=1)
        self.plain = torch.nn.InstanceNorm1d(4)
        self.head = torch.nn.Linear(4 * 64, 10)

    def forward(self, x):
        h = F.silu(self.group(self.conv(x)))
        h = self.instance(h + 0.5 * torch.cat([x, x, x, x], dim=1)).flatten(2)
        return self.head(F.silu(self.plain(self.line(h))).flatten(1))


class Upsampler(torch.nn.Module):
    """Resize in nearest mode, as a GAN generator or a UNet decoder upsamples: nn.Upsample(2) before a
    convolution, F.interpolate by (2, 3) on a plane and by 3 on a line (asymmetric coordinates,
    floor, as PyTorch 1.13 writes them; it cannot export nearest-exact, half_pixel); and Tile
    (x.repeat), which repeats whole axes instead of each element."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.line = torch.nn.Conv1d(4, 2, 5, stride=4, padding=2)
        self.head = torch.nn.Linear(2 * 18, 10)

    def forward(self, x):
        h = torch.tanh(self.conv(self.up(x)) + x.repeat(1, 2, 2, 2))  # [N, 4, 8, 8]; Tile
        h = F.interpolate(h, scale_factor=(2, 3), mode="nearest")[:, :, ::4, ::4]  # [N, 4, 4, 6]
        h = F.interpolate(h.flatten(2), scale_factor=3, mode="nearest")  # [N, 4, 72]
        return self.head(self.line(h).flatten(1))


class Padded(torch.nn.Module):
    """A padding mask from data (an int64 [N, T] input of 1s then 0s): Equal of the mask with 0 into
    masked_fill(-inf) before a softmax (key padding, as BERT-style encoders), torch.where(mask.bool(),
    scores, -1e4) (Cast to BOOL, the data branch first), ~mask (Not) into masked_fill(0.0), and a
    mean over the tokens that count."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.qkv = torch.nn.Linear(16, 48)
        self.qkv2 = torch.nn.Linear(16, 48)
        self.head = torch.nn.Linear(16, 10)

    @staticmethod
    def attend(x, qkv, fill):
        q, k, v = qkv(x).split(16, dim=-1)
        return torch.softmax(fill(q @ k.transpose(1, 2) / 4.0), dim=-1) @ v

    def forward(self, tokens, mask):
        x = self.embed(tokens)
        keys = mask[:, None, :]
        x = x + self.attend(x, self.qkv, lambda s: s.masked_fill(keys == 0, float("-inf")))
        x = x + self.attend(x, self.qkv2, lambda s: torch.where(keys.bool(), s, torch.tensor(-1e4)))
        x = x.masked_fill(~mask.bool()[:, :, None], 0.0)
        return self.head(x.sum(1) / mask.to(x.dtype).sum(1, keepdim=True))


class BertMini(torch.nn.Module):
    """Hugging Face BERT's layout in miniature (its code, not the package): word, position and
    token-type embeddings, the additive mask (1 - mask) * finfo.min, heads split by view/permute,
    exact GELU, post-LayerNorms, a tanh pooler on the first token and a classifier."""

    def __init__(self, vocab=40, d=16, heads=2, ffn=32, classes=5):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.word, self.position, self.token_type = (torch.nn.Embedding(vocab, d), torch.nn.Embedding(32, d),
                                                     torch.nn.Embedding(2, d))
        self.norm0, self.norm1, self.norm2 = (torch.nn.LayerNorm(d, eps=1e-12) for _ in range(3))
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.up, self.down = torch.nn.Linear(d, ffn), torch.nn.Linear(ffn, d)
        self.pool, self.classify = torch.nn.Linear(d, d), torch.nn.Linear(d, classes)

    def split(self, x):
        n, t, _ = x.shape
        return x.view(n, t, self.heads, self.dh).permute(0, 2, 1, 3)

    def forward(self, tokens, mask):
        n, t = tokens.shape
        positions = torch.arange(t).unsqueeze(0).expand(n, t)
        x = self.norm0(self.word(tokens) + self.position(positions) + self.token_type(torch.zeros_like(tokens)))
        extended = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        scores = self.split(self.q(x)) @ self.split(self.k(x)).transpose(-1, -2) / self.dh ** 0.5 + extended
        context = (torch.softmax(scores, dim=-1) @ self.split(self.v(x))).permute(0, 2, 1, 3).reshape(n, t, -1)
        x = self.norm1(x + self.o(context))
        x = self.norm2(x + self.down(F.gelu(self.up(x))))
        return self.classify(torch.tanh(self.pool(x[:, 0])))


CUSTOM = {"bert": BertMini, "padded": Padded, "ops": Ops, "residual": Residual, "vocoder": Vocoder, "norms": Norms, "upsampler": Upsampler}
# Exported with training=PRESERVE (the module is in eval mode either way): the default EVAL export
# folds each BatchNorm that follows a convolution into the convolution's weight and bias (the same
# function, other parameters); PRESERVE keeps them as BatchNormalization nodes, as from_torch does.
PRESERVE = {"residual"}
# BatchNormalization nodes each model's import must report frozen (import --json: frozen_batch_norms).
FROZEN = {"residual": 4}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = {"F32": np.float32, "I32": np.int32, "I64": np.int64}[info["dtype"]]
        raw = data[8 + length + begin:8 + length + end]
        out[name] = np.frombuffer(raw, dtype=dtype).reshape(info["shape"]).copy()
    return out


def scaled_error(ours, theirs):
    return float(np.max(np.abs(ours - theirs)) / max(1.0, float(np.max(np.abs(theirs)))))


def run_model(tightfit, driver, config, opset, bindings, inputs, dynamic, folder):
    torch.manual_seed(0)
    module = (CUSTOM[config]() if config in CUSTOM else torch_reference.build(config)).eval()
    with torch.no_grad():
        # Distinct values everywhere: the exporter ties initializers with equal values (the ones
        # and zeros of fresh LayerNorms) through Identity nodes.
        for p in module.parameters():
            p.add_(0.02 * torch.randn_like(p))
    rng = np.random.default_rng(1)
    arrays = {}
    for name, (shape, kind, bound) in inputs.items():
        if kind == "mask":  # each row: 1s for a random length of at least one, then 0s (padding)
            lengths = rng.integers(1, shape[1] + 1, shape[0])
            arrays[name] = (np.arange(shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        else:
            arrays[name] = (rng.standard_normal(shape).astype(np.float32) if kind == "normal"
                            else rng.integers(0, bound, shape).astype(np.int64))
        np.save(os.path.join(folder, name + ".npy"), arrays[name])
    tensors = tuple(torch.from_numpy(arrays[name]) for name in inputs)
    onnx_path = os.path.join(folder, "model.onnx")
    torch.onnx.export(module, tensors, onnx_path, input_names=list(inputs), output_names=["logits"],
                      dynamic_axes=dict(dynamic, logits={0: "N"}), opset_version=opset,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE if config in PRESERVE else torch.onnx.TrainingMode.EVAL)
    started = time.time()
    result = subprocess.run([tightfit, "import", onnx_path, "-o", os.path.join(folder, "model.tfg"),
                             "--loss", "cross_entropy", "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr)
        return [f"{config}: import failed (exit {result.returncode})"]
    report = json.loads(result.stdout)
    imported = time.time() - started

    # PyTorch: outputs, then the mean cross-entropy over the last axis and its gradients.
    logits = module(*tensors)
    classes = logits.shape[-1]
    labels = rng.integers(0, classes, logits.shape[:-1]).astype(np.int64)
    np.save(os.path.join(folder, "labels.npy"), labels)
    loss = F.cross_entropy(logits.reshape(-1, classes), torch.from_numpy(labels).reshape(-1))
    loss.backward()
    torch_grads = {name: p.grad.detach().numpy() for name, p in module.named_parameters()}
    torch_count = sum(p.numel() for p in module.parameters())

    result = subprocess.run([driver, folder, bindings], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout, result.stderr)
        return [f"{config}: import_driver failed (exit {result.returncode})"]
    ours = np.load(os.path.join(folder, "tf_logits.npy"))
    our_loss = float(np.load(os.path.join(folder, "tf_loss.npy"))[0])
    grads = read_safetensors(os.path.join(folder, "tf_grads.safetensors"))

    failures = []
    if report["frozen_batch_norms"] != FROZEN.get(config, 0):
        failures.append(f"{config}: import reports {report['frozen_batch_norms']} frozen BatchNorms, "
                        f"expected {FROZEN.get(config, 0)}")
    if report["parameters"] != torch_count:
        failures.append(f"{config}: {report['parameters']} parameters imported, PyTorch has {torch_count}")
    if set(grads) != set(torch_grads):
        failures.append(f"{config}: parameter names differ: only tightfit {sorted(set(grads) - set(torch_grads))}, "
                        f"only PyTorch {sorted(set(torch_grads) - set(grads))}")
    forward_error = scaled_error(ours, logits.detach().numpy())
    loss_error = abs(our_loss - float(loss)) / max(1.0, abs(float(loss)))
    worst_name, worst = "", 0.0
    for name, g in torch_grads.items():
        if name in grads:
            if grads[name].shape != g.shape:
                failures.append(f"{config}: gradient of {name}: shape {grads[name].shape} vs {g.shape}")
                continue
            error = scaled_error(grads[name], g)
            if os.environ.get("TF_IMPORT_VERBOSE"):
                print(f"  {name}: error {error:.2e}, |torch| max {float(np.max(np.abs(g))):.3e}, "
                      f"|tightfit| max {float(np.max(np.abs(grads[name]))):.3e}")
            if error >= worst:
                worst_name, worst = name, error
    print(f"{config} (opset {opset}, {bindings}): {report['parameters']} parameters ({torch_count} in PyTorch), "
          f"{report['nodes']} nodes, imported in {imported:.2f} s; forward error {forward_error:.2e}, "
          f"loss {our_loss:.6f} vs {float(loss):.6f}, worst gradient error {worst:.2e} ({worst_name}, "
          f"{len(grads)} gradients)")
    if forward_error > FORWARD_TOLERANCE or loss_error > FORWARD_TOLERANCE:
        failures.append(f"{config}: forward error {forward_error:.2e} or loss error {loss_error:.2e} "
                        f"over {FORWARD_TOLERANCE}")
    if worst > GRADIENT_TOLERANCE:
        failures.append(f"{config}: gradient error {worst:.2e} at {worst_name} over {GRADIENT_TOLERANCE}")
    return failures


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tightfit, driver = sys.argv[1:]
    torch.set_num_threads(1)
    # Debian's torch 1.13 oneDNN conv1d backward is not deterministic here: the same module, inputs
    # and labels gave encoder.conv1.bias gradients of max 0.022, then 2.26, 0.12, 4.06 on four calls
    # (ASR, stride-2 conv1d). The native kernels give 0.0573 every time.
    torch.backends.mkldnn.enabled = False
    only = os.environ.get("TF_IMPORT_ONLY")
    failures = []
    for config, opset, bindings, inputs, dynamic in MODELS:
        if only and only not in config:
            continue
        with tempfile.TemporaryDirectory(prefix="tf-import-") as folder:
            failures += run_model(tightfit, driver, config, opset, bindings, inputs, dynamic, folder)
    for failure in failures:
        print("FAIL:", failure)
    print("import_vs_torch:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
