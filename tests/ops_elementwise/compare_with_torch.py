#!/usr/bin/python3
"""ctest ops_elementwise_vs_torch: the element-wise family's f64 kernels against PyTorch float64.

Runs DUMP (dump_torch_cases) into a temporary directory, recomputes every entry of its manifest with
torch float64 (forward ops, gradients through autograd or ATen's backward ops, optimizer steps with
torch.optim.SGD / AdamW and clip_grad_norm_, dropout masks through an independent Philox port) and
compares: max |ours - torch| / max(max |torch|, 1e-3) <= 1e-10 (the floor matters only where the
exact result is 0 and torch returns rounding noise, e.g. layer_norm over one feature). Casts are
compared bit for bit with torch (f32 build) or numpy (double -> f16). Prints the worst error per op.
Exits 77 (skip) when torch is missing.

usage: compare_with_torch.py DUMP
"""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"skip: {error}")
    sys.exit(77)

TOLERANCE = 1e-10
M32 = 0xFFFFFFFF


def philox_uniform(seed, step, stream, n):
    """tf_rng_uniform for elements 0..n-1 (Philox4x32-10 as in Salmon et al., SC'11)."""
    index = np.arange(n, dtype=np.uint64)
    mixed = ((step * 0x9E3779B97F4A7C15) & (2**64 - 1)) ^ stream
    mask = np.uint64(M32)
    c0, c1 = index & mask, index >> np.uint64(32)
    c2 = np.full(n, mixed & M32, dtype=np.uint64)
    c3 = np.full(n, mixed >> 32, dtype=np.uint64)
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & mask,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & mask)
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return (c0 >> np.uint64(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def vjp(function, inputs, dy, wrt):
    leaves = [t.clone().requires_grad_(i in wrt) for i, t in enumerate(inputs)]
    out = function(*leaves)
    grads = torch.autograd.grad(out, [leaves[i] for i in wrt], dy, allow_unused=True)
    return [g if g is not None else torch.zeros_like(leaves[i]) for g, i in zip(grads, wrt)]


def dims(x, axes):
    return [a % x.dim() for a in axes] if axes else list(range(x.dim()))


def index_of(x, a):
    index = [slice(None)] * x.dim()
    index[a["axis"] % x.dim()] = slice(a["start"], a["end"], a["step"])
    return tuple(index)


def cross_entropy(logits, labels, ignore):
    classes = logits.shape[-1]
    flat, targets = logits.reshape(-1, classes), labels.reshape(-1)
    valid = (targets != ignore) & (targets >= 0) & (targets < classes)
    if int(valid.sum()) == 0:
        return (flat * 0).sum()  # our rule: 0 when no label counts (torch would give nan)
    targets = torch.where(valid, targets, torch.full_like(targets, ignore))
    return F.cross_entropy(flat, targets, ignore_index=ignore)


def rms_norm(x, gamma, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


def optimizer_step(op, a, param, grad, states, norm_sq, step):
    """One sgd/adamw kernel call replayed with torch.optim; returns [param, states...] after it."""
    p = param.clone().requires_grad_(True)
    g = grad * a["grad_scale"]
    if a["clip_norm"] > 0 and norm_sq is not None:
        total = math.sqrt(float(norm_sq)) * a["grad_scale"]
        g = g * min(1.0, a["clip_norm"] / (total + 1e-6))
    p.grad = g
    if op == "sgd":
        opt = torch.optim.SGD([p], lr=a["lr"], momentum=a["momentum"], weight_decay=a["weight_decay"])
        if a["momentum"] != 0:
            opt.state[p]["momentum_buffer"] = states[0].clone()
        opt.step()
        return [p.detach(), opt.state[p]["momentum_buffer"] if a["momentum"] != 0 else states[0]]
    opt = torch.optim.AdamW([p], lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["epsilon"],
                            weight_decay=a["weight_decay"])
    opt.state[p] = {"step": torch.tensor(float(step - 1)), "exp_avg": states[0].clone(),
                    "exp_avg_sq": states[1].clone()}
    opt.step()
    return [p.detach(), opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]]


def reference(op, a, context, ins):
    x = ins[0]
    unary = {"neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
             "relu": torch.relu, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
             "softplus": F.softplus, "abs": torch.abs, "erf": torch.erf, "stop_gradient": torch.Tensor.detach,
             "sin": torch.sin, "cos": torch.cos, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
             "sign": torch.sign, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "tan": torch.tan,
             "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh}
    if op in ("add", "sub", "mul", "div"):
        return [getattr(torch, op)(x, ins[1])]
    if op == "keep":
        return [torch.where(ins[1] != 0, x, torch.zeros((), dtype=x.dtype))]
    if op in unary:
        return [unary[op](x)]
    gelu = lambda t: F.gelu(t, approximate="tanh" if a.get("approximate") else "none")
    if op == "gelu":
        return [gelu(x)]
    if op == "leaky_relu":
        return [F.leaky_relu(x, a["alpha"])]
    if op == "leaky_relu_grad":
        return vjp(lambda t: F.leaky_relu(t, a["alpha"]), [x], ins[1], [0])
    if op == "clip":
        return [torch.clamp(x, a["lo"], a["hi"])]
    if op == "clip_grad":  # PyTorch's hardtanh rule: 0 at a bound (no value here lies on one)
        return vjp(lambda t: F.hardtanh(t, a["lo"], a["hi"]), [x], ins[1], [0])
    if op in ("relu_grad", "gelu_grad", "silu_grad", "abs_grad", "erf_grad"):
        function = {"relu_grad": torch.relu, "gelu_grad": gelu, "silu_grad": F.silu, "abs_grad": torch.abs,
                    "erf_grad": torch.erf}[op]
        return vjp(function, [x], ins[1], [0])
    if op == "sigmoid_grad":
        return [torch.ops.aten.sigmoid_backward(ins[1], x)]
    if op == "tanh_grad":
        return [torch.ops.aten.tanh_backward(ins[1], x)]
    if op in ("sum", "mean"):
        return [getattr(torch, op)(x, dim=dims(x, a["axes"]), keepdim=a["keepdims"])]
    if op == "max":
        return [torch.amax(x, dim=dims(x, a["axes"]), keepdim=a["keepdims"])]
    if op == "max_grad":
        return vjp(lambda t: torch.amax(t, dim=dims(t, a["axes"]), keepdim=a["keepdims"]), [x], ins[2], [0])
    if op == "sum_to":
        return [x.sum_to_size(ins[1].shape)]
    if op == "global_norm_sq":
        return [sum((g * g).sum() for g in ins)]
    if op in ("softmax", "log_softmax"):
        return [getattr(torch, op)(x, a["axis"])]
    if op == "softmax_grad":
        return [torch.ops.aten._softmax_backward_data(ins[1], x, a["axis"] % x.dim(), torch.float64)]
    if op == "log_softmax_grad":
        return [torch.ops.aten._log_softmax_backward_data(ins[1], x, a["axis"] % x.dim(), torch.float64)]
    if op == "layer_norm":
        beta = ins[2] if len(ins) > 2 else None
        return [F.layer_norm(x, (x.shape[-1],), ins[1], beta, a["epsilon"])]
    if op == "rms_norm":
        return [rms_norm(x, ins[1], a["epsilon"])]
    if op == "layer_norm_grad":
        beta = torch.zeros_like(ins[1])
        return vjp(lambda t, g, b: F.layer_norm(t, (t.shape[-1],), g, b, a["epsilon"]), [x, ins[1], beta], ins[2],
                   [0, 1, 2])
    if op == "batch_norm":
        return [F.batch_norm(x, None, None, ins[1], ins[2], True, 0.0, a["epsilon"])]
    if op == "batch_norm_grad":
        beta = torch.zeros_like(ins[1])
        return vjp(lambda t, g, b: F.batch_norm(t, None, None, g, b, True, 0.0, a["epsilon"]), [x, ins[1], beta],
                   ins[2], [0, 1, 2])
    if op == "rms_norm_grad":
        return vjp(lambda t, g: rms_norm(t, g, a["epsilon"]), [x, ins[1]], ins[2], [0, 1])
    if op == "reshape":
        return [x.reshape(a["shape"])]
    if op == "transpose":
        return [x.permute(*a["perm"])]
    if op == "concat":
        return [torch.cat(ins, dim=a["axis"])]
    if op == "slice":
        return [x[index_of(x, a)]]
    if op == "slice_grad":
        out = torch.zeros_like(ins[1])
        out[index_of(out, a)] = x
        return [out]
    if op == "expand":
        return [x.expand(*a["shape"])]
    if op == "dropout":
        if a["rate"] == 0:
            return [x.clone()]
        u = philox_uniform(context["seed"], context["micro_step"], a["seed"], x.numel())
        keep = torch.from_numpy(u >= np.float32(a["rate"])).reshape(x.shape)
        return [torch.where(keep, x * (1.0 / (1.0 - a["rate"])), torch.zeros_like(x))]
    if op == "cross_entropy":
        return [cross_entropy(x, ins[1], a["ignore_index"])]
    if op == "cross_entropy_grad":
        return vjp(lambda t: cross_entropy(t, ins[1], a["ignore_index"]), [x], ins[2], [0])
    if op == "mse":
        return [F.mse_loss(x, ins[1])]
    if op == "mse_grad":
        return vjp(lambda t: F.mse_loss(t, ins[1]), [x], ins[2], [0])
    if op == "bce_with_logits":
        return [F.binary_cross_entropy_with_logits(x, ins[1])]
    if op == "bce_with_logits_grad":
        return vjp(lambda t: F.binary_cross_entropy_with_logits(t, ins[1]), [x], ins[2], [0])
    if op == "accumulate":
        return [x + ins[1]]
    if op == "zero":
        return [torch.zeros_like(x)]
    if op in ("sgd", "adamw"):
        states = 1 if op == "sgd" else 2
        norm_sq = ins[states + 2] if len(ins) > states + 2 else None
        return optimizer_step(op, a, x, ins[1], ins[2:2 + states], norm_sq, context["optimizer_step"])
    raise ValueError(f"no reference for op {op}")


def sequence_reference(entry, load):
    """Replays zero/accumulate/global_norm_sq/sgd|adamw: torch.optim with clip_grad_norm_ per step."""
    a = entry["attrs"]
    params = [torch.from_numpy(load(p["init"])).clone().requires_grad_(True) for p in entry["params"]]
    grads = [load(p["grads"]) for p in entry["params"]]
    if entry["op"] == "sgd":
        opt = torch.optim.SGD(params, lr=a["lr"], momentum=a["momentum"], weight_decay=a["weight_decay"])
    else:
        opt = torch.optim.AdamW(params, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["epsilon"],
                                weight_decay=a["weight_decay"])
        for p in params:  # the session's step counter starts at first_step; the moments at zero
            opt.state[p] = {"step": torch.tensor(float(entry["first_step"] - 1)), "exp_avg": torch.zeros_like(p),
                            "exp_avg_sq": torch.zeros_like(p)}
    for step in range(grads[0].shape[0]):
        for p, g in zip(params, grads):
            total = g[step][0].copy()
            for micro in range(1, g.shape[1]):
                total += g[step][micro]
            p.grad = torch.from_numpy(total) * a["grad_scale"]
        if entry["clip"]:
            torch.nn.utils.clip_grad_norm_(params, a["clip_norm"])
        opt.step()
    results = []
    for p in params:
        state = opt.state[p]
        if entry["op"] == "sgd":
            buffer = state.get("momentum_buffer")
            results.append([p.detach(), buffer if buffer is not None else torch.zeros_like(p)])
        else:
            results.append([p.detach(), state["exp_avg"], state["exp_avg_sq"]])
    return results


def relative_error(ours, ref):
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        return math.inf
    if ours.size == 0:
        return 0.0
    scale = max(float(np.max(np.abs(ref))), 1e-3)
    diff = np.abs(ours - ref)
    return math.inf if np.isnan(diff).any() else float(np.max(diff)) / scale


def cast_errors(entry, load):
    """Number of elements whose bits differ from the reference conversion (NaN: only NaN-ness)."""
    x, ours = load(entry["input"]), load(entry["output"])
    frm, to, build = entry["from"], entry["to"], entry["build"]
    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32,
                   "i64": torch.int64, "u8": torch.uint8}
    if frm in ("f16", "bf16"):
        halves = torch.from_numpy(x.view(np.int16)).view(torch_dtype[frm])
        ref = halves.to(torch.float64 if build == "f64" else torch.float32).numpy()
    elif to in ("f16", "bf16"):
        if build == "f64":
            with np.errstate(over="ignore"):  # overflow to infinity is the expected result
                ref = x.astype(np.float16).view(np.uint16)  # numpy rounds double -> half directly
        else:
            ref = torch.from_numpy(x).to(torch_dtype[to]).view(torch.int16).numpy().view(np.uint16)
    elif to == "f32":
        ref = torch.from_numpy(x).to(torch.float64 if build == "f64" else torch.float32).numpy()
    else:
        ref = torch.from_numpy(x).to(torch_dtype[to]).numpy()
    if to in ("f16", "bf16"):
        infinity = 0x7C00 if to == "f16" else 0x7F80
        ours_nan, ref_nan = (ours & 0x7FFF) > infinity, (ref & 0x7FFF) > infinity
    elif to == "f32":
        ours_nan, ref_nan = np.isnan(ours), np.isnan(ref)
        bits = np.uint64 if build == "f64" else np.uint32
        ours, ref = ours.view(bits), ref.astype(ours.dtype).view(bits)
    else:
        ours_nan = ref_nan = np.zeros(x.shape, dtype=bool)
    return int(np.sum(ours_nan != ref_nan) + np.sum((ours != ref) & ~ours_nan & ~ref_nan))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        run = subprocess.run([sys.argv[1], directory], capture_output=True, text=True)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            sys.stderr.write(run.stderr)
            print(f"FAIL: {sys.argv[1]} exited with {run.returncode}")
            return 1
        with open(os.path.join(directory, "manifest.json")) as f:
            entries = json.load(f)
        load = lambda name: np.load(os.path.join(directory, name))
        worst, failures = {}, 0
        for entry in entries:
            kind = entry["kind"]
            if kind == "cast":
                key, error = entry["name"], cast_errors(entry, load)
                ok = error == 0
            elif kind == "sequence":
                key = entry["name"]
                refs = sequence_reference(entry, load)
                error = max(relative_error(load(name), ref)
                            for p, r in zip(entry["params"], refs)
                            for name, ref in zip([p["final"]] + p["states"], r))
                ok = error <= TOLERANCE
            else:
                key = entry["op"]
                ins = [torch.from_numpy(load(name)) for name in entry["inputs"]]
                refs = reference(entry["op"], entry["attrs"], entry["context"], ins)
                outs = [load(name) for name in entry["outputs"]]
                error = math.inf if len(refs) != len(outs) else \
                    max([relative_error(o, r.detach().numpy()) for o, r in zip(outs, refs)], default=0.0)
                ok = error <= TOLERANCE
            if not ok:
                failures += 1
                print(f"FAIL {entry['name']}: error {error:.3g}")
            worst[key] = max(worst.get(key, 0 if kind == "cast" else 0.0), error)
        print(f"torch {torch.__version__} float64 reference, {len(entries)} entries; worst "
              f"max|ours-torch|/max(max|torch|,1e-3) per op (limit {TOLERANCE:g}); casts: differing elements")
        for key, error in worst.items():
            print(f"  {key:70s} {error:9d}" if isinstance(error, int) else f"  {key:70s} {error:9.2e}")
        print(f"ops_elementwise vs torch: {len(entries) - failures} passed, {failures} failed")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
