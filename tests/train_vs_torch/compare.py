#!/usr/bin/python3
"""Whole models against PyTorch: the same initial weights and data, 20 AdamW steps with gradient
accumulation (k=2) and global-norm clipping, per-step losses and final weights compared.

For each configuration: numpy writes the micro-batches; train_driver (C, tightfit's CPU backend)
trains and saves its initial and final weights; PyTorch (the zoo's reference modules, float32,
one thread) trains from those initial weights on the same data. Passes when every per-step loss
and every final weight agrees to 1e-4 relative.

usage: compare.py TRAIN_DRIVER        exits 77 (ctest skip) without torch
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"compare.py: skipped, cannot import torch ({error})")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
import torch_reference  # noqa: E402

STEPS, ACCUMULATE, LR, WEIGHT_DECAY, CLIP = 20, 2, 1e-3, 0.01, 1.0
# AdamW's epsilon: 1e-6 rather than 1e-8. The key bias of attention has a gradient that is exactly
# zero in exact arithmetic (softmax ignores a constant added to every score of a row), so both
# implementations feed Adam pure rounding noise there; with eps = 1e-8, Adam rescales that noise to
# full-size steps that differ between any two implementations. 1e-6 keeps such noise negligible.
EPSILON = 1e-6
TOLERANCE = 1e-4

# config words, symbol bindings, inputs: name -> (shape, kind, bound)
CONFIGS = [
    ("mlp", "N=8", {"x": ((8, 64), "normal", 0), "labels": ((8,), "int", 10)}),
    ("cnn", "N=4", {"x": ((4, 1, 8, 8), "normal", 0), "labels": ((4,), "int", 10)}),
    ("gpt layers=2 d_model=64 heads=4 vocab=64 ctx=32 seq=16", "N=4,T=16",
     {"tokens": ((4, 16), "int", 64), "labels": ((4, 16), "int", 64)}),
]


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


def make_data(directory, inputs, rng):
    """Learnable data: class labels from a fixed random projection of x; next tokens = tokens + 1."""
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    projection = rng.standard_normal((64, 10)).astype(np.float32)
    batches = []
    for index in range(STEPS * ACCUMULATE):
        batch = {}
        for name, (shape, kind, bound) in inputs.items():
            if kind == "normal":
                batch[name] = rng.standard_normal(shape).astype(np.float32)
            elif name == "tokens":
                batch[name] = rng.integers(0, bound, size=shape).astype(np.int32)
        for name, (shape, kind, bound) in inputs.items():
            if name == "labels" and "tokens" in batch:
                batch[name] = ((batch["tokens"] + 1) % bound).astype(np.int32)
            elif name == "labels":
                batch[name] = np.argmax(batch["x"].reshape(shape[0], -1) @ projection, axis=1).astype(np.int32)
        for name, value in batch.items():
            np.save(os.path.join(directory, "data", f"{name}_{index}.npy"), value)
        batches.append(batch)
    return batches


def torch_loss(model, family, batch):
    if family == "gpt":
        logits = model(torch.from_numpy(batch["tokens"]).long())
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(batch["labels"]).long().reshape(-1),
                               ignore_index=-100)
    logits = model(torch.from_numpy(batch["x"]))
    return F.cross_entropy(logits, torch.from_numpy(batch["labels"]).long(), ignore_index=-100)


def train_torch(config, initial, batches):
    model = torch_reference.build(config)
    state = {name: torch.from_numpy(initial[name]) for name, _ in model.named_parameters()}
    model.load_state_dict(state, strict=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=EPSILON, weight_decay=WEIGHT_DECAY)
    family = config.split()[0]
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad()
        total = 0.0
        for micro in range(ACCUMULATE):
            loss = torch_loss(model, family, batches[step * ACCUMULATE + micro])
            (loss / ACCUMULATE).backward()
            total += loss.item() / ACCUMULATE
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        losses.append(total)
    return np.array(losses), {name: p.detach().numpy() for name, p in model.named_parameters()}


def relative(a, b):
    return float(np.max(np.abs(a - b)) / max(1e-6, float(np.max(np.abs(b)))))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    passed = failed = 0
    for config, bindings, inputs in CONFIGS:
        with tempfile.TemporaryDirectory() as directory:
            batches = make_data(directory, inputs, np.random.default_rng(11))
            words = config.split()
            run = subprocess.run([sys.argv[1], directory, str(STEPS), str(ACCUMULATE), bindings] + words,
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL {config}: train_driver exited {run.returncode}: {run.stderr.strip()} {run.stdout.strip()}")
                failed += 1
                continue
            print(f"{config}: {run.stdout.strip()}")
            initial = read_safetensors(os.path.join(directory, "initial.safetensors"))
            final = read_safetensors(os.path.join(directory, "final.safetensors"))
            initial = {name: value for name, value in initial.items() if not name.startswith("adam_")}
            ours = np.load(os.path.join(directory, "losses.npy"))
            theirs, weights = train_torch(config, initial, batches)
        loss_error = relative(ours, theirs)
        weight_error = max(relative(final[name], value) for name, value in weights.items())
        print(f"{config}: losses {ours[0]:.6f} -> {ours[-1]:.6f} (torch {theirs[0]:.6f} -> {theirs[-1]:.6f}); "
              f"worst relative difference: losses {loss_error:.2e}, final weights {weight_error:.2e}")
        for name, value in weights.items():
            error = relative(final[name], value)
            if error > TOLERANCE:
                print(f"FAIL {config}: weight {name} differs by {error:.2e}")
        moved = max(relative(final[name], initial[name]) for name in weights)
        ok = loss_error <= TOLERANCE and weight_error <= TOLERANCE and ours[-1] < ours[0] and moved > 1e-3
        passed += ok
        failed += not ok
        if not ok:
            print(f"FAIL {config}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
