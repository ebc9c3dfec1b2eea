#!/usr/bin/python3
"""A bf16 GPT-2 written as PyTorch users write it, through tightfit.from_torch, planned for a GPU.

nanoGPT/Hugging Face style: token and position embeddings, pre-norm blocks with `qkv.split(d, dim=2)`
(ONNX Split), causal attention from `masked_fill` of a `tril` mask, GPT-2's gelu_new written out
(0.5 x (1 + tanh(...))), a final LayerNorm, a head tied to the token embedding, and the causal LM
shift `logits[:, :-1, :].reshape(-1, V)` before the cross-entropy. Prints what the import made of it
(parameters, op counts) and the plan's memory for the cuda target at 8 x 1024 tokens (AdamW).
Compiles only (no device needed). Layers default to 2 (the export of 12 takes minutes here).

    PYTHONPATH=python /usr/bin/python3 bench/bf16_gpt2_import.py [--layers 2] [--target cuda]
"""
import argparse
import collections
import json
import os
import tempfile

import torch
import tightfit

V, W, H, T = 50257, 768, 12, 1024


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(W), torch.nn.LayerNorm(W)
        self.qkv, self.proj = torch.nn.Linear(W, 3 * W), torch.nn.Linear(W, W)
        self.fc, self.out = torch.nn.Linear(W, 4 * W), torch.nn.Linear(4 * W, W)

    def forward(self, x):
        n, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(W, dim=2)
        q, k, v = [a.view(n, t, H, W // H).transpose(1, 2) for a in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) * (1.0 / (W // H) ** 0.5)
        att = att.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))
        x = x + self.proj((torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(n, t, w))
        u = self.fc(self.ln2(x))
        u = 0.5 * u * (1.0 + torch.tanh(0.7978845608028654 * (u + 0.044715 * torch.pow(u, 3.0))))
        return x + self.out(u)


class GPT(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(V, W), torch.nn.Embedding(T, W)
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(W)
        self.head = torch.nn.Linear(W, V, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, ids):
        x = self.ln(self.blocks(self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))))
        return self.head(x)[:, :-1, :].reshape(-1, V)


parser = argparse.ArgumentParser(description="A bf16 GPT-2 from PyTorch through from_torch, planned.")
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--target", default="cuda", choices=("cpu", "vulkan", "cuda"))
args = parser.parse_args()
torch.manual_seed(0)
module = GPT(args.layers).to(torch.bfloat16)
graph = tightfit.from_torch(module, (torch.randint(0, V, (1, T)),), loss="cross_entropy")
with tempfile.TemporaryDirectory() as folder:
    graph.save(os.path.join(folder, "gpt2.tfg"))
    dump = json.loads(tightfit._run("dump", [os.path.join(folder, "gpt2.tfg")])[1])
ops = collections.Counter(node["op"] for node in dump["nodes"])
parameters = [t for t in dump["tensors"] if t.get("kind") == "parameter"]
print(f"PyTorch: {len(list(module.parameters()))} parameter tensors; imported: {len(parameters)}")
print("imported ops: " + ", ".join(f"{op} {count}" for op, count in ops.most_common()))
plan = tightfit.compile(graph, target=args.target, optimizer="adamw", set={"N": 8})
report = plan.report()
print(f"{args.target} plan at 8 x {T}: parameters {report['regions']['parameters']:,} B, arena "
      f"{report['regions']['arena']:,} B, device total {plan.device_total_bytes:,} B")
