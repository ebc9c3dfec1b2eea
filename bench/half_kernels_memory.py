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


def transformer():
    return Transformer().to(torch.bfloat16), torch.randn(8, 256, 512).to(torch.bfloat16)


parser = argparse.ArgumentParser(description="Plan memory of bf16 models with and without half kernels.")
parser.add_argument("--target", default="vulkan", choices=("cpu", "vulkan", "cuda"))
target = parser.parse_args().target
torch.manual_seed(0)
print(f"target {target}")
for name, make in (("mlp", mlp), ("transformer", transformer)):
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
