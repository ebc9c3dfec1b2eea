#!/usr/bin/python3
"""Plan memory of a bf16 PyTorch model on the vulkan target with and without half kernels.

A bf16 MLP stack (4 blocks of Linear 1024->4096, tanh GELU, Linear 4096->1024, then LayerNorm and a
10-class head) from `tightfit.from_torch`, 2,048 rows, AdamW, compiled for the vulkan target twice:
with the target's half kernels (matmul, elementwise, softmax, layout moves on bf16 data) and with
`--no-half-kernels` (every op on bf16 data between f32 casts). Compiles only (no device needed).

    PYTHONPATH=python /usr/bin/python3 bench/half_kernels_memory.py
"""
import torch
import tightfit

torch.manual_seed(0)
WIDTH, ROWS, LAYERS = 1024, 2048, 4
blocks = []
for _ in range(LAYERS):
    blocks += [torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(approximate="tanh"),
               torch.nn.Linear(4 * WIDTH, WIDTH)]
module = torch.nn.Sequential(*blocks, torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, 10)).to(torch.bfloat16)
graph = tightfit.from_torch(module, (torch.randn(ROWS, WIDTH).to(torch.bfloat16),), loss="cross_entropy")
totals = {}
for label, off in (("--no-half-kernels", True), ("half kernels", False)):
    plan = tightfit.compile(graph, set={"N": ROWS}, target="vulkan", optimizer="adamw", no_half_kernels=off)
    report = plan.report()
    note = next(line for line in report["notes"].splitlines() if line.startswith("precision"))
    totals[label] = (report["regions"]["arena"], plan.device_total_bytes)
    print(f"{label:18} arena {report['regions']['arena']:>13,} B  device total {plan.device_total_bytes:>13,} B")
    print(f"{'':18} {note}")
(arena_off, total_off), (arena_on, total_on) = totals["--no-half-kernels"], totals["half kernels"]
print(f"half kernels: arena {100.0 * (arena_on / arena_off - 1):+.1f}%, device total {100.0 * (total_on / total_off - 1):+.1f}%")
