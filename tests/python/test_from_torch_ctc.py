"""CTC and a model's own loss through from_torch and `tightfit import` (issue 44):

- a small speech model (conv1d over feature frames, a per-frame linear head -> [N, T, C] logits) brought
  in by from_torch(loss="ctc", label_length=S) trains 10 AdamW steps within 1e-5 of PyTorch's losses with
  F.ctc_loss(log_softmax(logits), reduction='mean') (targets of several lengths, padded with -1, repeats);
- the same model exported by torch.onnx.export and imported by `tightfit import --loss ctc --label-length S`
  trains with `tightfit train` from a data folder of .npy files: its losses are the Python session's on the
  same plan, seed and data, and fall;
- a module whose output already is its loss (from_torch(loss="output")) trains as PyTorch does, with no
  labels input added; a non-scalar output is refused with loss="output" (`tightfit import --loss output`
  too).
usage: test_from_torch_ctc.py TIGHTFIT-CLI   (PYTHONPATH=python, TIGHTFIT_LIBRARY=the built libtightfit.so)"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

import tightfit
from tally import finish, ok, relative_apart

cli = sys.argv[1]
torch.manual_seed(44)
torch.set_num_threads(1)
N, T, FEATURES, CLASSES, S, STEPS, LR = 4, 16, 8, 7, 5, 10, 1e-2


class Speech(torch.nn.Module):
    """x [N, T, F] -> per-frame logits [N, T, C]."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(FEATURES, 16, 3, padding=1)
        self.head = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2))


def ctc_reference(logits, labels):
    lengths = torch.tensor([int((row >= 0).sum()) for row in labels])
    return F.ctc_loss(F.log_softmax(logits, 2).transpose(0, 1), labels.clamp(min=0), torch.full((N,), T), lengths,
                      reduction="mean")


def torch_losses(model, x, loss_of):
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        value = loss_of(model, x)
        value.backward()
        optimizer.step()
        losses.append(value.item())
    return losses


x = torch.randn(N, T, FEATURES)
labels = torch.full((N, S), -1, dtype=torch.long)
for i, target in enumerate([[1, 2, 2, 3, 6], [4, 4, 1], [5], []]):
    labels[i, :len(target)] = torch.tensor(target, dtype=torch.long)

# ---- from_torch(loss="ctc"): 10 AdamW steps as PyTorch's ----
model = Speech()
start = {k: v.clone() for k, v in model.state_dict().items()}
graph = tightfit.from_torch(model, (x,), loss="ctc", label_length=S)
session = tightfit.Session(tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0))
losses = [session.step({"x": x.numpy(), "labels": labels.numpy()}) for _ in range(STEPS)]
expected = torch_losses(model, x, lambda m, v: ctc_reference(m(v), labels))
worst = relative_apart(losses, expected)
ok(worst < 1e-5, f"from_torch(loss='ctc'): {STEPS} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch "
   f"{expected[0]:.6f} -> {expected[-1]:.6f}), worst loss difference {worst:.1e} relative", f"{losses} vs {expected}")
model.load_state_dict(start)

# ---- tightfit import --loss ctc, tightfit train from a data folder ----
with tempfile.TemporaryDirectory() as folder:
    onnx_path, tfg, plan_path = (os.path.join(folder, f) for f in ("speech.onnx", "speech.tfg", "speech.tfplan"))
    torch.onnx.export(model, (x,), onnx_path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, training=torch.onnx.TrainingMode.PRESERVE)
    subprocess.run([cli, "import", onnx_path, "-o", tfg, "--loss", "ctc", "--label-length", str(S)], check=True,
                   capture_output=True)
    subprocess.run([cli, "compile", tfg, "-o", plan_path, "--set", f"N={N}", "--optimizer", "adamw", "--lr", str(LR)],
                   check=True, capture_output=True)
    data = os.path.join(folder, "data")
    os.mkdir(data)
    samples = 3 * N
    np.save(os.path.join(data, "x.npy"), torch.randn(samples, T, FEATURES).numpy())
    np.save(os.path.join(data, "labels.npy"), np.tile(labels.numpy(), (3, 1)))
    out = subprocess.run([cli, "train", plan_path, "--data", data, "--steps", str(STEPS), "--seed", "0", "--log-every",
                          "1", "--json"], capture_output=True, text=True, check=True).stdout
    cli_losses = [json.loads(line)["loss"] for line in out.splitlines() if line.startswith('{"step"')]
    python_losses = tightfit.Session(tightfit.Plan(plan_path), seed=0).train(data, STEPS)
    ok(len(cli_losses) == STEPS and all(abs(a - b) < 1e-6 for a, b in zip(cli_losses, python_losses))
       and cli_losses[-1] < cli_losses[0],
       f"tightfit import --loss ctc, tightfit train --data: {cli_losses[0]:.6f} -> {cli_losses[-1]:.6f}, the "
       "Python session's losses on the same plan, seed and data", f"{cli_losses} vs {python_losses}")
    refused = subprocess.run([cli, "import", onnx_path, "-o", tfg, "--loss", "output"], capture_output=True, text=True)
    ok(refused.returncode != 0 and "not a scalar loss" in refused.stderr,
       f"tightfit import --loss output on [N, T, C] logits is refused: {refused.stderr.strip()}")


# ---- from_torch(loss="output"): the module computes its own loss ----
class OwnLoss(torch.nn.Module):
    """mean squared error of a linear layer against a target it is given: returns the scalar loss."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(6, 3)

    def forward(self, x, target):
        return ((self.layer(x) - target) ** 2).mean()


own = OwnLoss()
xs, targets = torch.randn(N, 6), torch.randn(N, 3)
start = {k: v.clone() for k, v in own.state_dict().items()}
graph = tightfit.from_torch(own, (xs, targets), loss="output", input_names=["x", "target"])
session = tightfit.Session(tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0))
losses = [session.step({"x": xs.numpy(), "target": targets.numpy()}) for _ in range(STEPS)]
own.load_state_dict(start)
expected = torch_losses(own, xs, lambda m, v: m(v, targets))
worst = relative_apart(losses, expected)
ok(worst < 1e-5 and "labels" not in session.plan.inputs,
   f"from_torch(loss='output'): {STEPS} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[0]:.6f} "
   f"-> {expected[-1]:.6f}), worst {worst:.1e} relative; inputs {sorted(session.plan.inputs)}")
try:
    tightfit.from_torch(Speech(), (x,), loss="output")
    ok(False, "from_torch(loss='output') on [N, T, C] logits raises")
except tightfit.TightfitError as error:
    ok("not a scalar loss" in str(error), f"from_torch(loss='output') on [N, T, C] logits raises: {error}")

finish()
