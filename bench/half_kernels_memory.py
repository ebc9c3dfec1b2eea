#!/usr/bin/python3
"""Plan memory of bf16 PyTorch models with and without the target's half kernels.

Two bf16 models from `tightfit.from_torch`, AdamW, compiled for one target (vulkan by default,
`--target cpu|vulkan|cuda`) twice: with the target's half kernels (Vulkan: ops on bf16 data run
f16/bf16 shader variants; CPU: f32 kernels over half slices; CUDA: kernels templated on 16-bit
storage, 16-bit cuBLAS GEMMs) and with `--no-half-kernels` (every op
on bf16 data between f32 casts). Compiles only (no device needed).
- mlp: 4 blocks of Linear 1024->4096, tanh GELU, Linear 4096->1024, then LayerNorm and a 10-class
  head; 2,048 rows.
- transformer: 4 pre-norm blocks of width 512 (8-head attention with the scale computed
  as (w // heads) ** 0.5, MLP 4x), a 10-class head per token; 8 x 256 tokens.
- cnn: a VGG-style net on 64 x 3 x 32 x 32 images: 3x3 convolutions 3->64, 64->64, stride 2
  64->128, 128->128, stride 2 128->256, a 1x1 256->256 (ReLU after each), average pooling, a
  10-class head (no batch norm: the importer refuses it).

    PYTHONPATH=python /usr/bin/python3 bench/half_kernels_memory.py [--target cpu]
"""
import argparse

import torch
import tightfit


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x):
        n, t, w = x.shape
        u = self.qkv(self.ln1(x))
        q, k, v = [a.reshape(n, t, self.heads, w // self.heads).transpose(1, 2)
                   for a in (u[:, :, :w], u[:, :, w:2 * w], u[:, :, 2 * w:])]
        a = torch.softmax(q @ k.transpose(-1, -2) / (w // self.heads) ** 0.5, -1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(n, t, w))
        return x + self.mlp(self.ln2(x))


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(*[Block(512, 8) for _ in range(4)])
        self.head = torch.nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.blocks(x)).reshape(-1, 10)


def mlp():
    blocks = []
    for _ in range(4):
        blocks += [torch.nn.Linear(1024, 4096), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(4096, 1024)]
    module = torch.nn.Sequential(*blocks, torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 10))
    return module.to(torch.bfloat16), torch.randn(2048, 1024).to(torch.bfloat16)


def cnn():
    def conv(cin, cout, stride=1, kernel=3):
        return [torch.nn.Conv2d(cin, cout, kernel, stride, kernel // 2), torch.nn.ReLU()]
    module = torch.nn.Sequential(*conv(3, 64), *conv(64, 64), *conv(64, 128, 2), *conv(128, 128), *conv(128, 256, 2),
                                 *conv(256, 256, 1, 1), torch.nn.AvgPool2d(8), torch.nn.Flatten(),
                                 torch.nn.Linear(256, 10))
    return module.to(torch.bfloat16), torch.randn(64, 3, 32, 32).to(torch.bfloat16)


def transformer():
    return Transformer().to(torch.bfloat16), torch.randn(8, 256, 512).to(torch.bfloat16)


parser = argparse.ArgumentParser(description="Plan memory of bf16 models with and without half kernels.")
parser.add_argument("--target", default="vulkan", choices=("cpu", "vulkan", "cuda"))
target = parser.parse_args().target
torch.manual_seed(0)
print(f"target {target}")
for name, make in (("mlp", mlp), ("transformer", transformer), ("cnn", cnn)):
    module, example = make()
    graph = tightfit.from_torch(module, (example,), loss="cross_entropy")
    totals = {}
    for label, off in (("--no-half-kernels", True), ("half kernels", False)):
        plan = tightfit.compile(graph, target=target, optimizer="adamw", no_half_kernels=off)
        report = plan.report()
        note = next(line for line in report["notes"].splitlines() if line.startswith("precision"))
        totals[label] = (report["regions"]["arena"], plan.device_total_bytes)
        print(f"{name:12} {label:18} arena {report['regions']['arena']:>13,} B  device total "
              f"{plan.device_total_bytes:>13,} B")
        print(f"{'':31} {note}")
    (arena_off, total_off), (arena_on, total_on) = totals["--no-half-kernels"], totals["half kernels"]
    print(f"{name:12} half kernels: arena {100.0 * (arena_on / arena_off - 1):+.1f}%, device total "
          f"{100.0 * (total_on / total_off - 1):+.1f}%")
