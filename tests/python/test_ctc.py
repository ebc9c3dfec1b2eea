"""ctc_loss against PyTorch (issue 44): F.ctc_loss(log_softmax(x), reduction='mean') and its gradient
with respect to the logits, on the cpu and vulkan backends (lavapipe here), in f64 on PyTorch's side.

Cases: several N/T/S/C, repeated labels (a blank forced between them), empty targets, input lengths
below T, i32 and i64 labels, a blank other than 0, an impossible alignment (a target longer than its
input allows) with zero_infinity on (loss and gradient 0 for it) and off (an infinite loss; training
stops before the update); and a model that already outputs log-probabilities gives the same loss
(log_softmax is idempotent). The zoo's asr preset with ctc=1 (a CTC head on the encoder) trains. The gradient is read as one SGD step (lr 1, no momentum) of a bias b
added to the logits: b = -dloss/dlogits.
usage: test_ctc.py   (PYTHONPATH=python, TIGHTFIT_LIBRARY=the built libtightfit.so)"""

import numpy as np
import torch
import torch.nn.functional as F

import tightfit
from tally import finish, ok



def graph(n, t, c, s, dtype, lengths, blank, zero_infinity, log_softmax_first=False):
    g = tightfit.Graph("ctc")
    x = g.input("x", [n, t, c])
    b = g.parameter("b", [n, t, c], init="zeros")
    z = g.add(x, b)
    if log_softmax_first:
        z = g.log_softmax(z, 2)
    y = g.label("labels", [n, s], dtype)
    length = g.input("input_lengths", [n], dtype) if lengths else None
    g.finish(z, g.ctc_loss(z, y, length, blank=blank, zero_infinity=zero_infinity), optimizer="sgd",
             learning_rate=1.0, momentum=0.0, weight_decay=0.0)
    return g


def reference(x, labels, lengths, blank, zero_infinity):
    """PyTorch's loss and dloss/dx in f64 (labels padded with negatives; PyTorch reads target_lengths)."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    target_lengths = torch.tensor([int(np.argmax(np.append(row, -1) < 0)) for row in labels])
    frames = torch.tensor(lengths, dtype=torch.long)
    losses = F.ctc_loss(F.log_softmax(xt, 2).transpose(0, 1), torch.tensor(np.where(labels < 0, blank, labels)),
                        frames, target_lengths, blank=blank, reduction="none", zero_infinity=zero_infinity)
    # PyTorch 1.13 reads memory it never wrote for a sequence of no frames (its loss came out anywhere from
    # -0.5 to -1.6e266 run to run): there the loss is exactly 0 for an empty target, else impossible (inf, or
    # 0 with zero_infinity). reduction='mean' as PyTorch's: each loss over its target length, then the mean.
    impossible = torch.tensor(0.0 if zero_infinity else float("inf"), dtype=torch.float64)
    exact = torch.where(target_lengths == 0, torch.tensor(0.0, dtype=torch.float64), impossible)
    losses = torch.where(frames == 0, exact, losses)
    loss = (losses / target_lengths.clamp(min=1)).mean()
    if torch.isfinite(loss):
        loss.backward()
        return loss.item(), xt.grad.numpy()
    return loss.item(), None


# (label, N, T, C, labels as a list of targets, lengths or None, dtype, blank, zero_infinity)
CASES = [
    ("N3 T12 C6, repeats, an empty target", 3, 12, 6, [[1, 2, 2, 3], [4, 1], []], None, "i64", 0, False),
    ("N4 T20 C11 S6, input lengths < T", 4, 20, 11, [[3, 3, 3, 1, 5, 9], [10, 2], [7], [1, 2, 3, 4, 5]],
     [20, 13, 5, 16], "i32", 0, False),
    ("N2 T7 C5 blank 4, i32", 2, 7, 5, [[0, 1, 1], [3, 2, 0, 1]], [7, 6], "i32", 4, False),
    ("N5 T30 C29 S10, long targets", 5, 30, 29, [list(range(1, 11)), [5] * 6, [2, 9, 2, 9], [28], []],
     [30, 30, 17, 1, 0], "i64", 0, False),
    ("N3 T6 C4, impossible alignment (zero_infinity)", 3, 6, 4, [[1, 1, 1, 1], [1, 2, 3], [2]], [6, 2, 6],
     "i64", 0, True),
]

rng = np.random.default_rng(44)
for device in ("cpu", "vulkan"):
    for label, n, t, c, targets, lengths, dtype, blank, zero_infinity in CASES:
        s = max(1, max(len(row) for row in targets))
        labels = np.full((n, s), -1, dtype=np.int64 if dtype == "i64" else np.int32)
        for i, row in enumerate(targets):
            labels[i, :len(row)] = row
        x = (2.0 * rng.standard_normal((n, t, c))).astype(np.float32)
        given = np.array(lengths if lengths else [t] * n, dtype=labels.dtype)
        session = tightfit.Session(tightfit.compile(graph(n, t, c, s, dtype, lengths, blank, zero_infinity),
                                                    target=device), device=device)
        batch = {"x": x, "labels": labels}
        if lengths:
            batch["input_lengths"] = given
        loss = session.step(batch)
        gradient = -session.read("b", shape=(n, t, c)).astype(np.float64)
        expected, expected_gradient = reference(x.astype(np.float64), labels, given, blank, zero_infinity)
        loss_error = abs(loss - expected) / max(1.0, abs(expected))
        gradient_error = np.abs(gradient - expected_gradient).max()
        ok(loss_error < 2e-6 and gradient_error < 5e-6,
           f"{device} {label}: loss {loss:.7g} (PyTorch {expected:.7g}), gradient within {gradient_error:.2g}",
           f"(loss error {loss_error:.3g})")

    # an impossible alignment without zero_infinity: PyTorch's loss is inf; training stops before the update
    # (a plan that updates after the backward pass: one that updates inside it has run them by then)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    labels = np.array([[1, 1, 1], [2, -1, -1]], dtype=np.int64)
    session = tightfit.Session(tightfit.compile(graph(2, 4, 3, 3, "i64", False, 0, False), target=device,
                                                no_update_in_backward=True), device=device)
    forward = session.forward({"x": x, "labels": labels})
    expected, _ = reference(x.astype(np.float64), labels, np.array([4, 4]), 0, False)
    try:
        session.step({"x": x, "labels": labels})
        stopped = False
    except tightfit.TightfitError as error:
        stopped = "the loss is inf" in str(error)
    ok(forward == expected == float("inf") and stopped and not session.read("b", shape=(2, 4, 3)).any(),
       f"{device}: an impossible alignment without zero_infinity: loss {forward} (PyTorch {expected}), the step "
       "stops before the update")

    # log-probabilities in: the same loss (log_softmax is idempotent)
    x = rng.standard_normal((3, 8, 5)).astype(np.float32)
    labels = np.array([[1, 2], [3, -1], [4, 4]], dtype=np.int32)
    losses = [tightfit.Session(tightfit.compile(graph(3, 8, 5, 2, "i32", False, 0, False, first), target=device),
                               device=device).forward({"x": x, "labels": labels}) for first in (False, True)]
    ok(abs(losses[0] - losses[1]) < 1e-6, f"{device}: ctc_loss of log_softmax(x) equals that of x "
       f"({losses[0]:.7g}, {losses[1]:.7g})")

# the zoo's asr preset with ctc=1: an encoder with a CTC head, no decoder; it trains
asr = tightfit.zoo("asr-128-6-3", ctc=1, enc_layers=1, vocab=30, mels=16)
plan = tightfit.compile(asr, set={"N": 2, "T": 8, "U": 5})
names = set(plan.weights)
session = tightfit.Session(plan, seed=1)
mel = rng.standard_normal((4, 16, 32)).astype(np.float32)
targets = rng.integers(1, 30, size=(4, 5)).astype(np.int32)
targets[1, 3:] = -1
losses = session.train({"mel": mel, "labels": targets}, 8)
ok(not any(n.startswith("decoder.") for n in names) and "ctc_head.weight" in names and losses[-1] < losses[0],
   f"zoo asr ctc=1: {len(names)} weights, no decoder, a ctc_head; 8 AdamW steps {losses[0]:.4f} -> {losses[-1]:.4f}")

finish()
