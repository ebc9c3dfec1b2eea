"""Losses a PyTorch module computes itself (from_torch(loss="output")), as F.cross_entropy and F.nll_loss
write them: PyTorch's default ignore_index -100 (the padding label of every Hugging Face model), any number
of classes, class weights, reduction 'none' and 'sum', [N, C, T] scores. Each trains 4 AdamW steps beside
PyTorch from the same weights on labels with ignored positions; the plain mean (F.cross_entropy's default,
and nll_loss of log_softmax over the classes) imports as one cross_entropy op, with no one-hot table. A label
that is neither a class nor ignored is refused at run (the data check) or makes the loss non-finite.
The losses PyTorch's exporter has no symbolic for (mse, l1, smooth L1, Huber, binary cross-entropy, margin,
Poisson, triplet) and cross-entropy with label smoothing (which it refuses) train as PyTorch's too.
usage: test_from_torch_losses.py   (PYTHONPATH=python:tests/python)"""
import copy
import json
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

import tightfit
from tally import case, finish
from torch_training import adamw_losses

torch.set_num_threads(1)
N, STEPS, LR = 16, 4, 1e-2


def ops_of(graph):
    """The op of every node of `graph` (its `tightfit dump`)."""
    with tempfile.TemporaryDirectory() as folder:
        graph.save(os.path.join(folder, "graph.tfg"))
        return [node["op"] for node in json.loads(tightfit._run("dump", [os.path.join(folder, "graph.tfg")])[1])["nodes"]]


class OwnLoss(torch.nn.Module):
    """A linear layer (and for sequences, a second over time) whose forward returns `loss(scores, y)`."""

    def __init__(self, features, classes, loss, sequence=False):
        super().__init__()
        self.layer, self.loss, self.sequence = torch.nn.Linear(features, classes), loss, sequence

    def forward(self, x, y):
        scores = self.layer(x)  # [N, C], or [N, T, C] for sequences, given to the loss as [N, C, T]
        return self.loss(scores.transpose(1, 2) if self.sequence else scores, y)


def trained(model, x, y):
    """4 AdamW steps in tightfit (from_torch(loss="output")) and in PyTorch from the same weights:
    (tightfit's losses, PyTorch's, the worst relative difference, the graph's ops)."""
    start = copy.deepcopy(model)
    graph = tightfit.from_torch(model, (x, y), loss="output", input_names=["x", "y"])
    plan = tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0)
    losses = [session.step({"x": x.numpy(), "y": y.numpy()}) for _ in range(STEPS)]
    expected = adamw_losses(start, (x, y), None, STEPS, LR, criterion=lambda loss, _: loss)
    worst = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, expected))
    return losses, expected, worst, ops_of(graph)


def beside_torch(loss, classes, plain, sequence=False, features=8, ignored=True):
    """A case: OwnLoss(loss) on labels of which a third are -100 (none unless `ignored`) trains as PyTorch's;
    `plain` says whether the graph must be one cross_entropy op (no embedding) or the composite (an
    embedding); None: either."""

    def run():
        torch.manual_seed(classes)
        model = OwnLoss(features, classes, loss, sequence)
        x = torch.randn(N, 6, features) if sequence else torch.randn(N, features)
        y = torch.randint(0, classes, (N, 6) if sequence else (N,))
        if ignored:
            y[torch.rand(y.shape) < 0.34] = -100
            y.view(-1)[0] = -100
        losses, expected, worst, ops = trained(model, x, y)
        seen = f"{ops.count('cross_entropy')} cross_entropy, {ops.count('embedding')} embedding; {STEPS} AdamW " \
            f"steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[0]:.6f} -> {expected[-1]:.6f}), worst " \
            f"relative difference {worst:.1e}"
        form = plain is None or (ops.count("cross_entropy") == 1 and "embedding" not in ops if plain else
                                 "cross_entropy" not in ops and "embedding" in ops)
        if not form:
            return f"expected {'one cross_entropy op' if plain else 'the one-hot composite'}: {ops}", seen
        return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen

    return run


WEIGHTS = torch.tensor([0.5, 2.0, 1.0, 0.25, 3.0])
case("F.cross_entropy as it is (ignore_index -100), 3,000 classes: one cross_entropy op, trains as PyTorch's",
     beside_torch(F.cross_entropy, 3000, True))
case("F.cross_entropy of [N, C, T] scores (ignore_index -100): one cross_entropy op, trains as PyTorch's",
     beside_torch(F.cross_entropy, 7, True, sequence=True))
case("F.nll_loss(F.log_softmax(x, -1)) (ignore_index -100): one cross_entropy op, trains as PyTorch's",
     beside_torch(lambda s, y: F.nll_loss(F.log_softmax(s, -1), y), 5, True))
case("F.nll_loss(F.log_softmax(x, 1)) of [N, C, T] scores: one cross_entropy op, trains as PyTorch's",
     beside_torch(lambda s, y: F.nll_loss(F.log_softmax(s, 1), y), 6, True, sequence=True))
case("F.cross_entropy with class weights and ignore_index -100 trains as PyTorch's",
     beside_torch(lambda s, y: F.cross_entropy(s, y, weight=WEIGHTS), 5, False))
case("F.cross_entropy(reduction='sum') with ignore_index -100 trains as PyTorch's",
     beside_torch(lambda s, y: F.cross_entropy(s, y, reduction="sum"), 5, False))
case("F.cross_entropy(reduction='none') of [N, C, T] scores, ignored positions 0, trains as PyTorch's",
     beside_torch(lambda s, y: (F.cross_entropy(s, y, reduction="none") * torch.arange(1.0, 7.0)).mean(), 5, False,
                  sequence=True))
case("F.nll_loss of log-probabilities made otherwise (log of a softmax) with ignore_index -100 trains as PyTorch's",
     beside_torch(lambda s, y: F.nll_loss(torch.log(F.softmax(s, -1)), y), 5, False))
case("F.cross_entropy(label_smoothing=0.1) (ignore_index -100; torch's exporter refuses it) trains as PyTorch's",
     beside_torch(lambda s, y: F.cross_entropy(s, y, label_smoothing=0.1), 5, None))
case("F.cross_entropy(label_smoothing=0.2, reduction='sum') trains as PyTorch's",
     beside_torch(lambda s, y: F.cross_entropy(s, y, label_smoothing=0.2, reduction="sum"), 5, None))
case("F.cross_entropy(label_smoothing=0.1, reduction='none') of [N, C, T] scores trains as PyTorch's",
     beside_torch(lambda s, y: F.cross_entropy(s, y, label_smoothing=0.1, reduction="none").sum(), 6, None,
                  sequence=True))
case("F.cross_entropy(ignore_index=2), an index among the classes, trains as PyTorch's",
     beside_torch(lambda s, y: F.cross_entropy(s, torch.where(y < 0, torch.full_like(y, 2), y), ignore_index=2,
                                               reduction="sum"), 6, False))



def smoothed_by_gather(s, y, smoothing=0.1):
    """timm's LabelSmoothingCrossEntropy: the label's log-probability by torch.gather (GatherElements by data)."""
    log_probs = F.log_softmax(s, dim=-1)
    nll = -log_probs.gather(dim=-1, index=y.unsqueeze(1)).squeeze(1)
    return ((1 - smoothing) * nll - smoothing * log_probs.mean(dim=-1)).mean()


def smoothed_by_scatter(s, y):
    """Soft targets from a one-hot made by zeros_like(x).scatter(1, y[:, None], 1.0) (ScatterElements by data)."""
    soft = torch.zeros_like(s).scatter(1, y.unsqueeze(1), 1.0) * 0.9 + 0.1 / s.shape[1]
    return torch.sum(-soft * F.log_softmax(s, -1), -1).mean()


def scattered_scores(s, y):
    """Scores written into by a scatter whose updates train (s.scatter(1, idx, 2 s[:, :2]) and scatter_add), the
    positions a function of the labels: gradients to the data where nothing was written, and to the updates."""
    idx = torch.stack([y, torch.where(y < 4, y + 1, torch.zeros_like(y))], 1)
    written = s.scatter(1, idx, 2 * s[:, :2]).scatter_add(1, idx, torch.tanh(s[:, 2:4]))
    return F.cross_entropy(written, y)


def dice(s, y):
    """A soft Dice loss against F.one_hot(labels, C) (OneHot of data, an i64 output cast to float)."""
    p, t = F.softmax(s, -1), F.one_hot(y, s.shape[-1]).float()
    return 1 - (2 * (p * t).sum() + 1) / (p.sum() + t.sum() + 1)


case("timm's label smoothing (log-probabilities by torch.gather of the labels) trains as PyTorch's",
     beside_torch(smoothed_by_gather, 5, None, ignored=False))
case("soft targets from zeros_like(x).scatter(1, labels, 1.0) train as PyTorch's",
     beside_torch(smoothed_by_scatter, 5, None, ignored=False))
case("a Dice loss against F.one_hot(labels) trains as PyTorch's", beside_torch(dice, 5, None, ignored=False))
case("scores written by scatter and scatter_add at positions computed from the labels train as PyTorch's",
     beside_torch(scattered_scores, 5, None, ignored=False))


# PyTorch's losses that its TorchScript exporter has no symbolic for (python/tightfit/_loss_symbolics.py writes
# their formulas; before, torch.onnx.export raised UnsupportedOperatorError), each computed by the module on
# float targets t [N, 4] and trained 4 AdamW steps beside PyTorch.
TARGET_LOSSES = {
    "mse_loss": lambda s, t: F.mse_loss(s, t),
    "mse_loss sum": lambda s, t: F.mse_loss(s, t, reduction="sum"),
    "l1_loss": lambda s, t: F.l1_loss(s, t),
    "smooth_l1_loss": lambda s, t: F.smooth_l1_loss(s, t, beta=0.5),
    "huber_loss": lambda s, t: F.huber_loss(s, t, delta=0.7),
    "binary_cross_entropy": lambda s, t: F.binary_cross_entropy(torch.sigmoid(s), torch.sigmoid(t)),
    "margin_ranking_loss": lambda s, t: F.margin_ranking_loss(s[:, 0], s[:, 1], torch.sign(t[:, 0]), margin=0.2),
    "soft_margin_loss": lambda s, t: F.soft_margin_loss(s, torch.sign(t)),
    "hinge_embedding_loss": lambda s, t: F.hinge_embedding_loss(s, torch.sign(t), margin=0.5),
    "cosine_embedding_loss": lambda s, t: F.cosine_embedding_loss(s, t, torch.sign(t[:, 0]), margin=0.1),
    "poisson_nll_loss": lambda s, t: F.poisson_nll_loss(s, t.abs() * 2, full=True),
    "triplet_margin_loss": lambda s, t: F.triplet_margin_loss(s, t, -0.5 * t, margin=2.0),
    "triplet_margin_loss p=1, swap": lambda s, t: F.triplet_margin_loss(s, t, 0.5 * t, p=1, swap=True),
}


def target_losses():
    seen = []
    for name, loss in TARGET_LOSSES.items():
        torch.manual_seed(11)
        model, x, t = OwnLoss(8, 4, loss), torch.randn(N, 8), torch.randn(N, 4)
        losses, expected, worst, _ = trained(model, x, t)
        if not worst <= 1e-5:
            return f"{name}: tightfit {losses} vs PyTorch {expected}", ", ".join(seen)
        seen.append(f"{name} {worst:.0e}")
    return None, "worst relative differences: " + ", ".join(seen)


case("F.mse_loss, l1, smooth_l1, huber, binary_cross_entropy and the margin, Poisson and triplet losses inside a "
     "module train as PyTorch's", target_losses)


def bad_labels():
    """A label that is neither a class nor ignored: the plain mean's data check refuses it when fed; the
    composite's loss is +inf there, and the step refuses to update on it."""
    seen = []
    for loss, plain in ((F.cross_entropy, True), (lambda s, y: F.cross_entropy(s, y, reduction="sum"), False)):
        torch.manual_seed(3)
        model, x, y = OwnLoss(8, 5, loss), torch.randn(N, 8), torch.tensor([0, -100, 4, 1] * 4)
        graph = tightfit.from_torch(model, (x, y), loss="output", input_names=["x", "y"])
        session = tightfit.Session(tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR))
        try:
            value = session.step({"x": x.numpy(), "y": np.array([0, -100, 7, 1] * 4)})
            if plain or np.isfinite(value):
                return f"label 7 of 5 classes ({'plain' if plain else 'composite'}) gave the loss {value}", seen
            seen.append(f"composite: loss {value}")
        except tightfit.TightfitError as error:
            seen.append(f"{'plain' if plain else 'composite'}: {str(error)[:160]}")
    return None, "; ".join(seen)


case("a label outside the classes that is not ignore_index is refused, never left out unnoticed", bad_labels)
finish("from_torch losses")
