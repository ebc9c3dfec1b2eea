#!/usr/bin/python3
"""Plan memory of a bf16 PyTorch language model, its loss head fused or not.

A bf16 module from `tightfit.from_torch` as PyTorch code writes one: an embedding of GPT-2's 50,257
tokens (width 256), a LayerNorm, a tanh-GELU Linear with a residual, and a Linear head whose logits
are viewed as [rows, V] (`logits.view(-1, V)`) before the cross-entropy; 4 x 256 tokens, AdamW.
Compiled for each target with `--fuse-loss off` and with the default (`auto`: the head fuses when it
has 8192 classes or more and at least 128 MiB of f32 logits). Compiles only (no device needed).

    PYTHONPATH=python /usr/bin/python3 bench/bf16_lm_memory.py [--targets cpu,vulkan,cuda]
"""
import argparse

import torch
import tightfit


class LM(torch.nn.Module):
    def __init__(self, vocabulary=50257, width=256):
        super().__init__()
        self.vocabulary = vocabulary
        self.emb = torch.nn.Embedding(vocabulary, width)
        self.ln = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocabulary, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        h = h + torch.nn.functional.gelu(self.fc(self.ln(h)), approximate="tanh")
        return self.head(h).view(-1, self.vocabulary)


parser = argparse.ArgumentParser(description="Plan memory of a bf16 LM, loss head fused or not.")
parser.add_argument("--targets", default="cpu,vulkan,cuda")
targets = parser.parse_args().targets.split(",")
torch.manual_seed(0)
graph = tightfit.from_torch(LM().to(torch.bfloat16), (torch.randint(0, 50257, (4, 256)),), loss="cross_entropy")
for target in targets:
    arenas = {}
    for fuse in ("off", "auto"):
        plan = tightfit.compile(graph, target=target, optimizer="adamw", fuse_loss=fuse)
        report = plan.report()
        arenas[fuse] = report["regions"]["arena"]
        print(f"{target:7} --fuse-loss {fuse:5} arena {report['regions']['arena']:>13,} B  device total "
              f"{plan.device_total_bytes:>14,} B")
    print(f"{target:7} fused head: arena {100.0 * (arenas['auto'] / arenas['off'] - 1):+.1f}%")
