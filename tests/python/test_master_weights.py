"""bf16 parameters with f32 master weights (`compile --param-dtype bf16`, compiler/master_weights.c)
against PyTorch doing the same by hand, as DeepSpeed's bf16 mode does: an f32 master per parameter,
the model's weights its rounding to bf16, the forward and backward passes in f32 on those weights, each
gradient rounded to bf16 (the gradient of a bf16 tensor), summed in f32 over micro-batches, and the
optimizer stepping the masters. Checked: the losses and the trained masters (state_dict) within
tolerance of that reference, every parameter bit for bit the rounding of its master after every step,
and the plan's bytes (parameters 2 B, masters 4 B per element). A plan that skipped writing the
parameters from the masters, or drew the masters from the rounded parameters, fails."""
import json
import os
import struct
import sys
import tempfile

import numpy as np
import torch

import tally
import tightfit

BATCH, STEPS, LR = 8, 10, 1e-2


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(torch.tanh(self.norm(self.fc1(x))))


def bf16(x):
    """x (f32) rounded to nearest even bf16, as f32."""
    return x.to(torch.bfloat16).to(torch.float32)


def reference(model, xs, ys, optimizer, accumulate):
    """PyTorch's master-weight training of `model` (its f32 weights are the masters): the loss of each
    step (the mean over its micro-batches) and the masters after STEPS steps."""
    masters = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    step = torch.optim.AdamW(masters, lr=LR, weight_decay=0) if optimizer == "adamw" else \
        torch.optim.SGD(masters, lr=LR)
    rows = BATCH // accumulate
    losses = []
    for _ in range(STEPS):
        with torch.no_grad():
            for p, m in zip(model.parameters(), masters):
                p.copy_(bf16(m))
        sums = [torch.zeros_like(m) for m in masters]
        loss_sum = 0.0
        for k in range(accumulate):
            model.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs[k * rows:(k + 1) * rows]), ys[k * rows:(k + 1) * rows])
            loss.backward()
            loss_sum += loss.item()
            for s, p in zip(sums, model.parameters()):
                s += bf16(p.grad)
        for m, s in zip(masters, sums):
            m.grad = s / accumulate
        step.step()
        losses.append(loss_sum / accumulate)
    return losses, {name: m.detach().numpy() for (name, _), m in zip(model.named_parameters(), masters)}


def bf16_bits(x):
    """The bf16 bits of f32 array x rounded to nearest even, widened back to f32."""
    return bf16(torch.from_numpy(np.ascontiguousarray(x))).numpy()


def train(optimizer, accumulate):
    torch.manual_seed(7)
    model = Mlp()
    xs, ys = torch.randn(BATCH, 16), torch.randint(0, 5, (BATCH,))
    graph = tightfit.from_torch(model, (xs[:BATCH // accumulate],), loss="cross_entropy")
    plan = tightfit.compile(graph, set={"N": BATCH // accumulate}, optimizer=optimizer, lr=LR, weight_decay=0,
                            clip=0, accumulate=accumulate,
                            param_dtype="bf16")
    session = tightfit.Session(plan, seed=0)
    start = {k: v.detach().numpy().copy() for k, v in model.named_parameters()}
    masters_at_start = session.state_dict()
    losses, rounded = [], True
    for _ in range(STEPS):
        losses.append(session.step({"x": xs.numpy(), "labels": ys.numpy().astype(np.int32)}))
        for name, (dtype, shape) in plan.weights.items():
            rounded = rounded and dtype == "bf16" and np.array_equal(
                session.read(name, shape=shape, dtype="bf16"), bf16_bits(session.read(plan.masters[name], shape)))
    expected, masters = reference(model, xs, ys, optimizer, accumulate)
    trained = session.state_dict()
    worst_loss = tally.relative_apart(losses, expected)
    # Each gradient is rounded to bf16, where the frameworks' f32 gradients (summed in other orders)
    # can round to neighbouring values: such a flip moves AdamW's step of that element by about
    # lr 2^-8 (1-beta1) ~ 4e-6 per step. A few elements may differ by that much; a gradient not
    # rounded at all, or rounded twice, moves most of them.
    differences = np.concatenate([np.abs(trained[k] - v).ravel() for k, v in masters.items()])
    worst_weight, apart = float(differences.max()), float(np.mean(differences > 1e-5))
    exact_start = all(np.array_equal(masters_at_start[k], v) for k, v in start.items())
    label = f"{optimizer}, accumulate {accumulate}"
    seen = (f"{STEPS} steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst loss "
            f"difference {worst_loss:.1e} relative, worst master difference {worst_weight:.1e}, "
            f"{100 * apart:.2f}% of the elements over 1e-5 apart")
    tally.ok(exact_start, f"{label}: the masters start as the module's f32 weights, bit for bit")
    tally.ok(rounded, f"{label}: after every step each bf16 parameter is its master rounded to nearest even")
    tally.verdict(f"{label}: as PyTorch's master-weight training",
                  worst_loss < 1e-5 and worst_weight < 2e-4 and apart <= 0.01, seen)
    return plan


def drawn_masters():
    """A zoo model's generated initial weights: each master equal bit for bit to the f32 plan's parameter
    (drawn at full precision from the parameter's own name), each bf16 parameter its rounding."""
    graph = tightfit.zoo("mlp")
    wide = tightfit.Session(tightfit.compile(graph, set={"N": 4}, optimizer="adamw"), seed=3)
    plan = tightfit.compile(graph, set={"N": 4}, optimizer="adamw", param_dtype="bf16")
    narrow = tightfit.Session(plan, seed=3)
    expected = wide.state_dict()
    masters = narrow.state_dict()
    same = sorted(expected) == sorted(masters) and all(np.array_equal(masters[k], v) for k, v in expected.items())
    rounded = all(np.array_equal(narrow.read(k, shape=shape, dtype="bf16"), bf16_bits(expected[k]))
                  for k, (_, shape) in plan.weights.items())
    tally.ok(same and rounded, f"zoo mlp: {len(masters)} masters drawn as the f32 plan's parameters, bit for bit, "
             "and the bf16 parameters their rounding")


def write_safetensors(path, tensors):
    """A safetensors file of f32 arrays (name -> array)."""
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def pretrained_masters():
    """init_from (fine-tuning from pretrained f32 weights) into a bf16 plan: each master gets the file's
    values at full precision, each parameter their rounding; then one step trains from them."""
    graph = tightfit.zoo("mlp")
    rng = np.random.default_rng(11)
    pretrained = {k: rng.standard_normal(shape).astype(np.float32) / 8
                  for k, (_, shape) in tightfit.compile(graph, set={"N": 4}).weights.items()}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "pretrained.safetensors")
        write_safetensors(path, pretrained)
        plan = tightfit.compile(graph, set={"N": 4}, optimizer="adamw", param_dtype="bf16")
        session = tightfit.Session(plan, seed=0, init_from=path)
    masters = session.state_dict()
    same = all(np.array_equal(masters[k], v) for k, v in pretrained.items())
    rounded = all(np.array_equal(session.read(k, shape=v.shape, dtype="bf16"), bf16_bits(v))
                  for k, v in pretrained.items())
    tally.ok(same and rounded, f"init_from: {len(pretrained)} masters read from the f32 file bit for bit, the bf16 "
             "parameters their rounding")


def across_dtypes():
    """Checkpoints load across parameter dtypes: an f32 plan's into a bf16 plan (each master the f32
    weight, each parameter its rounding, the moments as saved), and that plan's back into an f32 plan
    (each weight its master, at full precision)."""
    graph = tightfit.zoo("mlp")
    rng = np.random.default_rng(5)
    feed = {"x": rng.random((4, 64), dtype=np.float32), "labels": rng.integers(0, 10, 4).astype(np.int32)}
    wide = tightfit.Session(tightfit.compile(graph, set={"N": 4}, optimizer="adamw"), seed=1)
    plan = tightfit.compile(graph, set={"N": 4}, optimizer="adamw", param_dtype="bf16")
    narrow = tightfit.Session(plan, seed=2)
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(3):
            wide.step(feed)
        wide.save(os.path.join(folder, "f32.safetensors"))
        narrow.load(os.path.join(folder, "f32.safetensors"))
        expected = wide.state_dict()
        masters = narrow.state_dict()
        into_bf16 = all(np.array_equal(masters[k], v) for k, v in expected.items()) and all(
            np.array_equal(narrow.read(k, shape=shape, dtype="bf16"), bf16_bits(expected[k]))
            for k, (_, shape) in plan.weights.items())
        moments = all(np.array_equal(narrow.read(f"adam_m({k})", shape=v.shape), wide.read(f"adam_m({k})", shape=v.shape))
                      for k, v in expected.items())
        narrow.step(feed)
        narrow.save(os.path.join(folder, "bf16.safetensors"))
        back = tightfit.Session(tightfit.compile(graph, set={"N": 4}, optimizer="adamw"), seed=3)
        back.load(os.path.join(folder, "bf16.safetensors"))
        into_f32 = all(np.array_equal(back.state_dict()[k], v) for k, v in narrow.state_dict().items())
    tally.ok(into_bf16 and moments and into_f32, "checkpoints across dtypes: an f32 plan's into a bf16 plan (masters "
             "the weights bit for bit, parameters their rounding, moments as saved) and back (weights the masters)",
             f"into bf16 {into_bf16}, moments {moments}, into f32 {into_f32}")


def written_parameter():
    """tf_session_write of a bf16 parameter (the C API) writes its master too, widened: the next update
    starts from what was written."""
    from tightfit import _lib
    plan = tightfit.compile(tightfit.zoo("mlp"), set={"N": 4}, optimizer="adamw", param_dtype="bf16")
    session = tightfit.Session(plan, seed=0)
    name, (_, shape) = next(iter(plan.weights.items()))
    values = bf16_bits(np.random.default_rng(9).standard_normal(shape).astype(np.float32))
    bits = np.ascontiguousarray((values.view(np.uint32) >> 16).astype(np.uint16))
    _lib.check(_lib.lib.tf_session_write(session._s, name.encode(), bits.ctypes.data, bits.nbytes), name)
    tally.ok(np.array_equal(session.read(plan.masters[name], shape), values) and
             np.array_equal(session.read(name, shape=shape, dtype="bf16"), values),
             f"tf_session_write of bf16 '{name}': its master takes the values, widened")


def main():
    plan = train("adamw", 1)
    train("adamw", 2)
    train("sgd", 1)
    drawn_masters()
    pretrained_masters()
    across_dtypes()
    written_parameter()
    report = plan.report()
    elements = sum(int(np.prod(shape)) for _, shape in plan.weights.values())
    parameters, state = report["roles"]["parameter"], report["roles"]["optimizer_state"]
    trained = report["parameters"]["trainable_buffers"]
    tally.ok(parameters["bytes"] == 2 * elements and state["bytes"] == 12 * elements and trained == len(plan.weights)
             and f"master weights: {len(plan.weights)} bf16 parameters" in report["notes"],
             f"the plan: {elements} parameters in {parameters['bytes']} B (bf16), their masters and AdamW moments in "
             f"{state['bytes']} B (f32), {trained} parameters trainable, the notes name the masters",
             f"notes: {report['notes']}")
    sys.exit(tally.finish())


if __name__ == "__main__":
    main()
