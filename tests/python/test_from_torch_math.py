"""tightfit.from_torch on PyTorch math that its exporter writes wrongly for training or not at all
(python/tightfit/_math_symbolics.py), and a distillation loss: each module computes its own loss
(loss="output") and trains 4 AdamW steps beside PyTorch from the same weights, within 1e-5 of its losses,
then on Vulkan within 1e-5 of the CPU's (lavapipe in CI; skipped, saying so, without a device).

- torch.cdist with p = 2, 1, 3 and inf where a point meets itself (a zero distance: torch's symbolic made
  the gradient NaN there, where PyTorch's is 0, and left out |d|: p = 1 summed signed differences);
- adaptive average and max pooling to sizes that do not divide the input's (torch refuses them), at a
  batch size bound when compiling;
- trunc, logit, xlogy, hypot, copysign, heaviside, count_nonzero, diag_embed, kron, nn.Bilinear,
  cumprod (through exact zeros) and F.threshold with a nonzero threshold (no symbolic in torch);
- writes by index tensors computed from data (index_put_ with and without accumulate, x[idx] = v):
  ScatterND by computed indices, which the import refused;
- torch.diagonal at a symbolic batch (torch's symbolic gathered it by indices computed from the batch
  size, which the import refused);
- F.kl_div(log_softmax(student), softmax(teacher), "batchmean"): its zeros_like branch, which the
  export folds to a constant of the traced shape, fills as one value.

Runs under Debian's PyTorch 1.13 and PyTorch 2.x (.venv-torch2). Fails, not skips, without the ONNX
importer. usage: test_from_torch_math.py   (PYTHONPATH=python)"""
import torch
import torch.nn.functional as F

import tightfit
from from_torch_cases import batch, case, finish, own_loss_everywhere, require_importer

require_importer()
STEPS = 4


def trains_as_torch(model, inputs, dynamic=True):
    """own_loss_everywhere of `model` imported with its own loss, the batch symbolic when `dynamic`."""
    graph = tightfit.from_torch(model, tuple(inputs.values()), loss="output", input_names=list(inputs),
                                dynamic_batch=dynamic)
    return own_loss_everywhere(graph, model, inputs, STEPS, {"N": batch} if dynamic else None)


class Distances(torch.nn.Module):
    """Pairwise distances of points to themselves and to others: cdist's diagonal is exactly 0."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(6, 8)

    def forward(self, x):
        h = self.embed(x)
        points = h.reshape(-1, 4, 2)
        return (torch.cdist(points, points).mean() + torch.cdist(points, points, p=1).pow(2).mean() +
                torch.cdist(h, h.flip(1)).mean() + torch.cdist(points, points, p=3).mean() +
                torch.cdist(points, points.flip(1), p=float("inf")).mean())


def distances():
    torch.manual_seed(1)
    return trains_as_torch(Distances(), {"x": torch.randn(batch, 6)})


case("torch.cdist (p 2, 1, 3 and inf) through zero distances (a point beside itself) trains as PyTorch's, no NaN",
     distances)


class AdaptivePools(torch.nn.Module):
    """A small CNN head pooled to sizes that do not divide 5 x 7 (and one that does)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        h = self.conv(x)  # [N, 3, 5, 7]
        rows = h.mean(2)  # [N, 3, 7]
        return (F.adaptive_avg_pool2d(h, (2, 4)).pow(2).mean() + F.adaptive_max_pool2d(h, (3, 3)).pow(2).mean() +
                torch.nn.AdaptiveAvgPool1d(5)(rows).pow(2).mean() + F.adaptive_max_pool1d(rows, 4).mean() +
                F.adaptive_avg_pool2d(h, (5, 1)).pow(2).mean())


def adaptive_pools():
    torch.manual_seed(2)
    return trains_as_torch(AdaptivePools(), {"x": torch.randn(batch, 2, 5, 7)})


case("adaptive average and max pooling (1-d, 2-d) to sizes that do not divide the input's train as PyTorch's",
     adaptive_pools)


class Functions(torch.nn.Module):
    """Each op of _math_symbolics in a term of one loss."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.bilinear = torch.nn.Bilinear(6, 6, 3)

    def forward(self, x):
        h = self.lin(x)
        p = torch.sigmoid(h)
        terms = [
            (h - torch.trunc(3 * h.detach())).pow(2).mean() + (torch.trunc(3 * h) * h).mean(),
            torch.logit(p, eps=1e-3).pow(2).mean() + torch.logit(p).pow(3).mean(),
            torch.xlogy(torch.relu(h), h.abs() + 1).mean(),
            torch.hypot(h, h.flip(1) + 0.5).mean(),
            torch.copysign(h, h.flip(1)).pow(3).mean(),
            (h * torch.heaviside(h.detach(), torch.tensor(0.5))).mean(),
            (h * torch.count_nonzero(torch.relu(h), 1).unsqueeze(1)).mean(),
            (torch.diag_embed(h) @ h.unsqueeze(-1)).pow(2).mean(),
            torch.kron(h[:2, :3], h[2:, 3:]).pow(2).mean(),
            self.bilinear(h, h.flip(1)).pow(2).mean(),
            torch.cumprod(torch.relu(h), 1).mean() + torch.cumprod(h.reshape(-1, 2, 3), 1).pow(2).mean(),
            (F.threshold(h, 0.1, 2.0) + torch.nn.Threshold(-0.2, -1.0)(h)).pow(2).mean(),
        ]
        return sum(terms)


def functions():
    torch.manual_seed(3)
    # kron of fixed slices: the batch is fixed at export
    return trains_as_torch(Functions(), {"x": torch.randn(batch, 6)}, dynamic=False)


case("trunc, logit, xlogy, hypot, copysign, heaviside, count_nonzero, diag_embed, kron, nn.Bilinear, cumprod and "
     "F.threshold train as PyTorch's", functions)


class Correlations(torch.nn.Module):
    """Barlow Twins' loss (the diagonal of a cross-correlation toward 1, the rest toward 0) and diagonals
    of batched matrices at offsets 0, 1 and -1."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = self.embed(x)
        c = h.T @ h / h.shape[0]
        on = (torch.diagonal(c) - 1).pow(2).sum()
        off = c.flatten()[:-1].view(5, 7)[:, 1:].pow(2).sum()
        m = h.reshape(-1, 2, 3)
        return (on + 0.1 * off + torch.diagonal(m @ m.transpose(1, 2), dim1=1, dim2=2).pow(2).mean() +
                m.diagonal(offset=1, dim1=1, dim2=2).pow(2).mean() + m.diagonal(-1, 2, 1).pow(3).mean())


def correlations():
    torch.manual_seed(5)
    return trains_as_torch(Correlations(), {"x": torch.randn(batch, 6)})


case("torch.diagonal (Barlow Twins' loss; batched, offsets 0, 1 and -1) trains as PyTorch's at a symbolic batch",
     correlations)


class Writes(torch.nn.Module):
    """Writes by index tensors computed from data: index_put_ with accumulate (a mixture of experts'
    outputs summed back per token, two index tensors), rows replaced (x[idx] = v) and index_put without."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.table = torch.nn.Parameter(torch.randn(5, 6))

    def forward(self, x, ids):
        h = self.lin(x)
        summed = torch.zeros(5, 6).index_put((ids % 5,), h, accumulate=True)
        replaced = self.table.clone()
        replaced[(ids * 3) % 5] = h
        pairs = torch.zeros(3, 4).index_put((ids % 3, (ids * 2) % 4), h[:, 0], accumulate=True)
        put = self.table.index_put((ids % 5,), 2 * h)
        return summed.pow(2).mean() + replaced.pow(2).mean() + pairs.pow(2).mean() + (put * self.table).mean()


def writes():
    torch.manual_seed(6)
    # distinct rows where values are written, repeated pairs where they are summed; at twice the batch
    # (from_torch's check at N=8) every write repeats with equal values, which PyTorch writes once
    ids = torch.tensor([3, 9, 5, 12])
    return trains_as_torch(Writes(), {"x": torch.randn(batch, 6), "ids": ids})


case("index_put_ (accumulate or not, one or two index tensors) and x[idx] = v by computed indices train as PyTorch's",
     writes)


def repeated_writes_checked():
    """x[idx] = v where idx repeats with different values: PyTorch keeps one of them, the import writes
    their mean, and from_torch's check against the module refuses it rather than train another model."""
    torch.manual_seed(6)
    try:
        tightfit.from_torch(Writes(), (torch.randn(batch, 6), torch.tensor([3, 8, 5, 11])), loss="output",
                            input_names=["x", "ids"])
    except tightfit.TightfitError as error:
        text = str(error)
        if "computes another output than the module" in text:
            return None, text[:110] + "..."
        return f"refused otherwise: {text}", ""
    return "imported: repeated writes of different values went unnoticed", ""


case("a write by repeated indices of different values (PyTorch keeps one) is refused by the check",
     repeated_writes_checked)


class Distilled(torch.nn.Module):
    """A student trained toward a teacher's softened outputs (given as an input), by F.kl_div."""

    def __init__(self):
        super().__init__()
        self.student = torch.nn.Linear(6, 5)

    def forward(self, x, teacher):
        return F.kl_div(F.log_softmax(self.student(x) / 2, -1), F.softmax(teacher / 2, -1), reduction="batchmean")


def distillation():
    torch.manual_seed(4)
    return trains_as_torch(Distilled(), {"x": torch.randn(batch, 6), "teacher": torch.randn(batch, 5)})


case("F.kl_div(log_softmax, softmax(teacher), 'batchmean') (a distillation loss) trains as PyTorch's", distillation)

finish("from_torch_math")
