#!/usr/bin/python3
"""ctest dense_vs_torch: the dense CPU kernels' float64 results equal PyTorch's.

Runs DUMP_EXECUTABLE (dense_torch_dump) into a temporary directory; it writes each case's inputs,
the upstream gradient dy, and the kernels' forward output and gradients as .npy files, listed in
manifest.json. This script recomputes every case with torch in float64 (F.conv1d, F.conv2d,
F.conv_transpose2d, F.max_pool2d, F.avg_pool2d, softmax(q kᵀ scale) v per head, F.embedding,
torch.matmul, gradients by autograd) and requires max |ours - torch| / max |torch| < 1e-10 for
every tensor. Exits 77 (skip) when torch is missing.

usage: compare_dense_with_torch.py DUMP_EXECUTABLE
"""
import json
import os
import subprocess
import sys
import tempfile

TOLERANCE = 1e-10

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"skipping: {error}")
    sys.exit(77)


def conv(case, t):
    a, is_1d = case["attrs"], case["op"] == "conv1d"
    x = t["x"].requires_grad_()
    w = t["w"].requires_grad_()
    pick = (lambda v: v[0]) if is_1d else tuple
    fn = F.conv1d if is_1d else F.conv2d
    y = fn(x, w, t.get("bias"), stride=pick(a["stride"]), padding=pick(a["padding"]),
           dilation=pick(a["dilation"]), groups=a["groups"])
    y.backward(t["dy"])
    return {"y": y, "dx": x.grad, "dw": w.grad}


def conv_transpose(case, t):
    a = case["attrs"]
    x = t["x"].requires_grad_()
    w = t["w"].requires_grad_()
    y = F.conv_transpose2d(x, w, t["bias"], stride=tuple(a["stride"]), padding=tuple(a["padding"]),
                           output_padding=tuple(a["output_padding"]), groups=a["groups"],
                           dilation=tuple(a["dilation"]))
    y.backward(t["dy"])
    return {"y": y, "dx": x.grad, "dw": w.grad}


def pool(case, t):
    a = case["attrs"]
    x = t["x"].requires_grad_()
    if case["op"] == "max_pool2d":
        y = F.max_pool2d(x, tuple(a["kernel"]), tuple(a["stride"]), tuple(a["padding"]))
    else:
        y = F.avg_pool2d(x, tuple(a["kernel"]), tuple(a["stride"]), tuple(a["padding"]), count_include_pad=True)
    y.backward(t["dy"])
    return {"y": y, "dx": x.grad}


def attention(case, t):
    a = case["attrs"]
    q, k, v = (t[name].requires_grad_() for name in ("q", "k", "v"))
    n, tq, width = q.shape
    tk, heads = k.shape[1], a["num_heads"]
    depth = width // heads
    scale = a["scale"] if a["scale"] != 0 else 1.0 / depth ** 0.5

    def split(x, length):  # [N, T, H*D] -> [N, H, T, D]
        return x.reshape(n, length, heads, depth).permute(0, 2, 1, 3)

    scores = split(q, tq) @ split(k, tk).transpose(-1, -2) * scale
    if a["causal"]:  # top-left aligned, as scaled_dot_product_attention(is_causal=True)
        allowed = torch.ones(tq, tk, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    y = (torch.softmax(scores, dim=-1) @ split(v, tk)).permute(0, 2, 1, 3).reshape(n, tq, width)
    y.backward(t["dy"])
    return {"y": y, "dq": q.grad, "dk": k.grad, "dv": v.grad}


def embedding(case, t):
    ids, table = t["ids"].long(), t["table"].requires_grad_()
    rows = table.shape[0]
    valid = (ids >= 0) & (ids < rows)  # tightfit: an id outside [0, V) is a zero row, no gradient
    y = F.embedding(ids.clamp(0, rows - 1), table) * valid.unsqueeze(-1).double()
    y.backward(t["dy"])
    return {"y": y, "dtable": table.grad}


def matmul(case, t):
    a, b = t["a"].requires_grad_(), t["b"].requires_grad_()
    left = a.transpose(-1, -2) if case["attrs"]["transpose_a"] else a
    right = b.transpose(-1, -2) if case["attrs"]["transpose_b"] else b
    y = torch.matmul(left, right)
    y.backward(t["dy"])
    return {"y": y, "da": a.grad, "db": b.grad}


REFERENCES = {"conv1d": conv, "conv2d": conv, "conv_transpose2d": conv_transpose, "max_pool2d": pool,
              "avg_pool2d": pool, "attention": attention, "embedding": embedding, "matmul": matmul}
INPUTS = {"x", "w", "bias", "dy", "q", "k", "v", "ids", "table", "a", "b"}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tf_dense_torch_") as directory:
        dump = subprocess.run([sys.argv[1], directory], capture_output=True, text=True)
        sys.stdout.write(dump.stdout)
        sys.stderr.write(dump.stderr)
        if dump.returncode != 0:
            print(f"dense_torch_dump failed with exit code {dump.returncode}")
            return 1
        with open(os.path.join(directory, "manifest.json")) as f:
            manifest = json.load(f)
        passed, failures, worst_by_op = 0, 0, {}
        for case in manifest["cases"]:
            arrays = {role: np.load(os.path.join(directory, name)) for role, name in case["tensors"].items()}
            inputs = {role: torch.from_numpy(array.copy()) for role, array in arrays.items() if role in INPUTS}
            reference = REFERENCES[case["op"]](case, inputs)
            for role, expected in reference.items():
                expected = expected.detach().numpy()
                ours = arrays[role]
                if ours.shape != expected.shape:
                    print(f"FAIL {case['name']:44} {role:6} shape {ours.shape} != torch {expected.shape}")
                    failures += 1
                    continue
                error = np.max(np.abs(ours - expected)) / max(np.max(np.abs(expected)), 1e-300)
                worst_by_op[case["op"]] = max(worst_by_op.get(case["op"], 0.0), error)
                ok = error < TOLERANCE
                passed += ok
                failures += not ok
                print(f"{'ok' if ok else 'FAIL':4} {case['name']:44} {role:6} {str(list(ours.shape)):18} "
                      f"error {error:.2e}")
        print("\nworst relative error per op against torch "
              f"{torch.__version__} (tolerance {TOLERANCE:.0e}):")
        for op, error in worst_by_op.items():
            print(f"  {op:18} {error:.2e}")
        print(f"dense_vs_torch: {passed} passed, {failures} failed")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
