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
- a graph network's aggregations by edge indices given as data (python/tightfit/_scatter_symbolics.py):
  index_add (torch refuses any index that may repeat), scatter_reduce "sum", "mean", "amax", "amin" with
  self included or not (1.13 has no symbolic; 2.x refuses "mean" and include_self=False), a GAT softmax;
- order statistics, lookups, running forms, layout and reductions torch has no symbolic for
  (python/tightfit/_order_symbolics.py): kthvalue, median, quantile, take_along_dim, searchsorted,
  logcumsumexp, cummax, cummin, diff, trapezoid, rot90, channel_shuffle, affine_grid, nanmean, renorm, pdist;
- frac, atan2, logaddexp, logaddexp2, sinc, signbit, addcdiv, nansum, trace, fftshift, ifftshift, slice_scatter,
  select_scatter, diagonal_scatter, F.multi_margin_loss (python/tightfit/_pointwise_symbolics.py) and
  F.avg_pool2d's divisor_override, which torch has no symbolic for or (2.x) exported without the divisor;
  index_fill and index_copy by known indices (torch scattered to positions computed from Shape);
- linear algebra on small matrices (python/tightfit/_linalg_symbolics.py: LU with partial pivoting, Cholesky
  and substitution, unrolled): det, slogdet, logdet, linalg.solve, inverse, cholesky, solve_triangular,
  cholesky_solve (torch writes Det or nothing);
- torch.lgamma, torch.digamma and torch.erfinv (no symbolic in torch): torch.distributions' log_prob of Gamma,
  Beta, Poisson, StudentT and Dirichlet, Normal.icdf;
- torch.diagonal at a symbolic batch (torch's symbolic gathered it by indices computed from the batch
  size, which the import refused);
- random draws (torch.rand_like, randn_like, bernoulli of probabilities, exponential_, gumbel_softmax:
  tightfit's own numbers, import/onnx_random.c): their distributions, Vulkan's the CPU's, and a VAE that
  trains, draws anew each step and the same under recompute;
- F.kl_div(log_softmax(student), softmax(teacher), "batchmean"): its zeros_like branch, which the
  export folds to a constant of the traced shape, fills as one value.

Runs under Debian's PyTorch 1.13 and PyTorch 2.x (.venv-torch2). Fails, not skips, without the ONNX
importer. usage: test_from_torch_math.py   (PYTHONPATH=python)"""
import warnings

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


class MessagePassing(torch.nn.Module):
    """A graph network's aggregations over incoming edges, the edges given as data (one graph, its rows
    repeated over the batch): index_add (with alpha), index_add_, scatter_add, scatter_reduce with "sum",
    "mean", "amax" and "amin", self included or not, and a GAT layer's softmax over each node's incoming
    edges (a LeakyReLU of the edge scores, their per-node maximum subtracted, sums by index_add)."""

    def __init__(self, nodes):
        super().__init__()
        self.nodes, self.lin, self.att = nodes, torch.nn.Linear(4, 4), torch.nn.Linear(8, 1)

    def forward(self, x, edges):
        h = self.lin(x)  # [N, nodes, 4]
        src, dst = edges[0, 0], edges[0, 1]  # [E] each
        msg = h[:, src]
        spread = dst.view(1, -1, 1).expand_as(msg)
        zeros = torch.zeros_like(h)
        total = zeros.index_add(1, dst, msg, alpha=0.5) + h.clone().index_add_(1, dst, msg)
        total = total + zeros.scatter_add(1, spread, msg)
        for reduce in ("sum", "mean", "amax", "amin"):
            for include_self in (True, False):
                total = total + h.scatter_reduce(1, spread, msg * 1.5, reduce=reduce, include_self=include_self)
        e = F.leaky_relu(self.att(torch.cat([h[:, src], h[:, dst]], -1)).squeeze(-1), 0.2)  # [N, E]
        top = torch.full((x.shape[0], self.nodes), -1e4).scatter_reduce(1, dst.expand_as(e), e, reduce="amax")
        w = torch.exp(e - top[:, dst])
        weight = w / torch.zeros(x.shape[0], self.nodes).index_add(1, dst, w)[:, dst]
        attended = zeros.index_add(1, dst, msg * weight.unsqueeze(-1))
        return (total.tanh() * attended).mean() + total.pow(2).mean() * 1e-2


def message_passing():
    torch.manual_seed(9)
    nodes = 6
    # node 5 has no incoming edge (its position keeps self's value); nodes 0 and 2 several
    src, dst = torch.tensor([1, 2, 3, 4, 0, 5, 2, 1]), torch.tensor([0, 0, 2, 2, 1, 3, 4, 2])
    edges = torch.stack([src, dst]).expand(batch, 2, 8).clone()
    return trains_as_torch(MessagePassing(nodes), {"x": torch.randn(batch, nodes, 4), "edges": edges})


case("index_add, scatter_add, scatter_reduce (sum, mean, amax, amin; self included or not) by edges given as data, "
     "and a GAT softmax over incoming edges, train as PyTorch's", message_passing)


class OrderAndLayout(torch.nn.Module):
    """Each op of _order_symbolics in a term of one loss: unflatten, kthvalue, median (along a dim and of every
    element of one sample: of the whole batch, (12 N + 1) // 2 has no fixed size),
    quantile (one q and several, keepdim), take_along_dim by argsort, searchsorted (a 1-d and a batched
    sequence, right), logcumsumexp (an early term 1e3 below the rest: a max-shifted cumsum would give -inf),
    cummax and cummin (values, and indices read as numbers), diff (n 2, prepend), trapezoid (dx), rot90 (k 1, 2,
    3), channel_shuffle (PyTorch 2.x only: 1.13 has no derivative for it), affine_grid beside grid_sample,
    nanmean (of a log, NaN below its domain), renorm (p 2 and 1) and pdist."""

    def __init__(self, shuffle):
        super().__init__()
        self.lin, self.theta, self.shuffle = torch.nn.Linear(12, 12), torch.nn.Linear(12, 6), shuffle

    def forward(self, x):
        h = self.lin(x.flatten(1)).unflatten(1, (2, 6))  # [N, 2, 6]
        terms = [torch.kthvalue(h, 2, -1).values, torch.median(h, 1, keepdim=True).values.flatten(1),
                 torch.median(h[0]).reshape(1, 1), torch.quantile(h, 0.3, dim=-1),
                 torch.quantile(h, torch.tensor([0.25, 0.9]), dim=2, keepdim=True).permute(1, 0, 2, 3).flatten(1),
                 torch.take_along_dim(h, torch.argsort(h, -1), -1).flatten(1)]
        edges = torch.tensor([-0.5, 0.0, 0.5])
        terms += [h[:, 0] * torch.searchsorted(edges, h[:, 1].detach()).float(),
                  h[:, 1] * torch.searchsorted(h[:, 0].detach().sort(-1).values, h[:, 1].detach(), right=True).float()]
        far = torch.cat([h[:, :, :1] - 1e3, h[:, :, 1:]], -1)
        terms += [torch.logcumsumexp(far, -1).flatten(1), torch.cummax(h, -1).values.flatten(1),
                  torch.cummin(h, 1).values.flatten(1), h.flatten(1) * torch.cummax(h, -1).indices.flatten(1).float(),
                  torch.diff(h, n=2, dim=-1, prepend=h[:, :, :1]).flatten(1), torch.trapezoid(h, dx=0.5, dim=-1),
                  torch.rot90(h, 1, (1, 2)).flatten(1), torch.rot90(h, 2, (1, 2)).flatten(1),
                  torch.rot90(h, 3, (1, 2)).flatten(1)]
        image = h.reshape(-1, 2, 2, 3)
        if self.shuffle:
            terms.append(F.channel_shuffle(torch.cat([image, image * 2], 1), 2).flatten(1))
        grid = F.affine_grid(self.theta(x.flatten(1)).view(-1, 2, 3), [x.shape[0], 2, 3, 4], align_corners=False)
        terms.append(F.grid_sample(image, grid, align_corners=False).flatten(1))
        holes = torch.log(h + 1)  # NaN where h < -1
        terms += [torch.nanmean(holes, -1), torch.renorm(h, 2, 1, 1.0).flatten(1), torch.renorm(h, 1, 2, 0.5).flatten(1),
                  F.pdist(self.lin(x.flatten(1))[0].view(3, 4)).unsqueeze(0).expand(x.shape[0], -1)]
        # each element weighed by its position: a loss that a permutation of a term (a wrong rot90) changes
        return sum((t.flatten(1).tanh() * (1 + torch.arange(t.flatten(1).shape[1]))).pow(2).mean() for t in terms)


def order_and_layout():
    torch.manual_seed(10)
    return trains_as_torch(OrderAndLayout(not torch.__version__.startswith("1.")), {"x": torch.randn(batch, 2, 6)})


case("kthvalue, median, quantile, take_along_dim, searchsorted, logcumsumexp, cummax, cummin, diff, trapezoid, rot90, "
     "channel_shuffle, affine_grid, nanmean, renorm and pdist (no symbolic in torch) train as PyTorch's",
     order_and_layout)


def position_weighted(terms):
    """A loss of [N, k] terms that changes with any term's value, its sign, or a permutation of its elements."""
    return sum(((t.tanh() + 0.3) * (1 + torch.arange(t.shape[1]))).pow(2).mean() for t in terms)


class EinsumDiagonals(torch.nn.Module):
    """torch.einsum with a label twice in one operand (its diagonal: "bcii->bci", a batched trace "bcii->b",
    "bcij,jj->bci" against a weight's diagonal, a weight's trace "ii" by the implicit output, and over
    non-adjacent axes "bici->bc"), each weighed by position."""

    def __init__(self):
        super().__init__()
        self.lin, self.w = torch.nn.Linear(8, 18), torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        m = self.lin(x).view(x.shape[0], 2, 3, 3)
        terms = [torch.einsum("bcii->bci", m).flatten(1), torch.einsum("bcii->b", m)[:, None],
                 torch.einsum("bcij,jj->bci", m, self.w).flatten(1),
                 torch.einsum("ii", self.w).reshape(1, 1).expand(x.shape[0], 1),
                 torch.einsum("bici->bc", m.permute(0, 2, 1, 3))]
        return position_weighted(terms)


def einsum_diagonals():
    torch.manual_seed(17)
    return trains_as_torch(EinsumDiagonals(), {"x": torch.randn(batch, 8)})


case("torch.einsum with a label twice in one operand (diagonals, traces, the implicit output's count) trains as "
     "PyTorch's", einsum_diagonals)


class Pointwise(torch.nn.Module):
    """Each elementwise op of _pointwise_symbolics in a term of one loss: frac, atan2 (all four quadrants),
    logaddexp (operands 30 apart: exp would overflow at 90) and logaddexp2, sinc through exact zeros,
    signbit, addcdiv, nansum of a log (NaN below its domain), special.entr of probabilities, an isclose
    mask, each weighed by position."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        a, b = h[:, :4], h[:, 4:]
        zeros = torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
        terms = [torch.frac(h * 3), torch.atan2(a, b), torch.logaddexp(a * 30, b), torch.logaddexp2(b, a),
                 torch.sinc(h * zeros), h * torch.signbit(h).float(), torch.addcdiv(a, b, a.abs() + 1, value=0.5),
                 torch.nansum(torch.log(h + 0.5).view(-1, 2, 4), -1), torch.nansum(torch.log(h)).reshape(1, 1),
                 torch.special.entr(torch.sigmoid(h)), h * torch.isclose(h, h.round(), atol=0.2).float()]
        return position_weighted(terms)


def pointwise():
    torch.manual_seed(14)
    return trains_as_torch(Pointwise(), {"x": torch.randn(batch, 8)})


case("frac, atan2, logaddexp, logaddexp2, sinc, signbit, addcdiv, nansum, special.entr and isclose (no symbolic in "
     "torch) train as PyTorch's", pointwise)


class Placements(torch.nn.Module):
    """Each placement of _pointwise_symbolics in a term of one loss: trace of a weight, fftshift and ifftshift
    (one axis, two, and every axis of an odd size), slice_scatter (steps 1 and 3), select_scatter from the end,
    diagonal_scatter (offsets 1, -1 and 0 across transposed axes), F.multi_margin_loss (p 1 and 2, class
    weights, each reduction), F.avg_pool2d with divisor_override (padded too), index_fill (a number, a value
    of data) and index_copy by known indices, tile (by a traced batch size too: ViViT's class token) and
    broadcast_to, each weighed by position.
    Under 1.13 without slice_scatter (its eager op refuses a step of 1 there)."""

    def __init__(self, scatter_slices):
        super().__init__()
        self.lin, self.w, self.scatter_slices = torch.nn.Linear(8, 8), torch.nn.Parameter(torch.randn(4, 5)), \
            scatter_slices

    def forward(self, x, labels):
        h = self.lin(x)
        grid = h.view(h.shape[0], 2, 4)
        terms = [torch.trace(self.w) * h, torch.fft.fftshift(grid, dim=-1).flatten(1),
                 torch.fft.ifftshift(grid, dim=(1, 2)).flatten(1), torch.fft.fftshift(self.w[:3]).flatten().unsqueeze(0),
                 torch.select_scatter(h, h[:, 0] * 2, 1, -1),
                 torch.diagonal_scatter(grid, h[:, :2] * 5, 1, dim1=1, dim2=2).flatten(1),
                 torch.diagonal_scatter(grid, h[:, 2:3] - 1, -1, dim1=1, dim2=2).flatten(1),
                 torch.diagonal_scatter(grid, h[:, :2] * 3, 0, dim1=-1, dim2=1).flatten(1),
                 F.multi_margin_loss(h, labels, reduction="none").unsqueeze(-1),
                 F.multi_margin_loss(h, labels, p=2, margin=0.5, weight=torch.arange(1.0, 9.0)).reshape(1, 1),
                 F.multi_margin_loss(h, labels, reduction="sum").reshape(1, 1),
                 F.avg_pool2d(grid.unsqueeze(1), 2, divisor_override=3).flatten(1),
                 F.avg_pool2d(grid.unsqueeze(1), 3, stride=1, padding=1, divisor_override=5).flatten(1),
                 h.index_fill(1, torch.tensor([1, 3]), 0.5), grid.index_fill(2, torch.tensor([0]), h[0, 0]).flatten(1),
                 h.index_copy(1, torch.tensor([1, 6]), h[:, 4:6] * 2), torch.tile(h[:, :2], (1, 3)),
                 self.w[:1].tile([h.shape[0], 1]) * h[:, :5], torch.broadcast_to(h[:, :1], (h.shape[0], 4))]
        if self.scatter_slices:
            terms += [torch.slice_scatter(h, h[:, :2] * 3, dim=1, start=4, end=6),
                      torch.slice_scatter(h, h[:, :3] * 2, dim=1, start=1, end=8, step=3)]
        return position_weighted(terms)


def placements():
    torch.manual_seed(15)
    return trains_as_torch(Placements(not torch.__version__.startswith("1.")),
                           {"x": torch.randn(batch, 8), "labels": torch.randint(0, 8, (batch,))})


case("trace, fftshift, ifftshift, slice_scatter, select_scatter, diagonal_scatter, multi_margin_loss, avg_pool2d's "
     "divisor_override (no symbolic in torch; 2.x's export left the divisor out), index_fill and index_copy (torch's "
     "scatter by positions from Shape), tile and broadcast_to train as PyTorch's", placements)


class LinearAlgebra(torch.nn.Module):
    """Each op of _linalg_symbolics in a term of one loss, on [N, 3, 3] matrices from the data and on 5 x 5
    weights: det, slogdet (sign and log), logdet, solve (a vector and a matrix right side), inverse, inv,
    cholesky (lower, upper), solve_triangular, cholesky_solve; a weight whose first column starts at 0 (a row
    swap is needed: without pivoting its elimination divides by zero) through det and solve, a Glow layer's
    log |det W| of an orthogonal start. Each weighed by position."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 9)
        swap = torch.eye(5)[[1, 0, 2, 3, 4]] + 0.1 * torch.randn(5, 5)  # det near -1
        swap[0, 0] = 0.0
        self.swap = torch.nn.Parameter(swap)
        self.glow = torch.nn.Parameter(torch.linalg.qr(torch.randn(5, 5))[0])

    def forward(self, x):
        h = self.lin(x)
        m = h.view(h.shape[0], 3, 3) + torch.eye(3) * 2  # [N, 3, 3]
        spd = m @ m.transpose(1, 2) + torch.eye(3)
        lower = torch.linalg.cholesky(spd)
        right = h[:, :6].reshape(h.shape[0], 3, 2)
        terms = [torch.det(m).unsqueeze(-1), torch.linalg.slogdet(m)[1].unsqueeze(-1),
                 torch.slogdet(m)[0].unsqueeze(-1) * h[:, :1], torch.logdet(spd).unsqueeze(-1),
                 torch.linalg.solve(m, h[:, :3]), torch.linalg.solve(m, right).flatten(1), torch.inverse(m).flatten(1),
                 torch.linalg.inv(spd).flatten(1), lower.flatten(1), torch.linalg.cholesky(spd, upper=True).flatten(1),
                 torch.linalg.solve_triangular(lower, right, upper=False).flatten(1),
                 torch.linalg.solve_triangular(lower.transpose(1, 2), right, upper=True, unitriangular=True).flatten(1),
                 torch.cholesky_solve(right, lower).flatten(1),
                 torch.det(self.swap).reshape(1, 1), torch.linalg.solve(self.swap, h[:, :5].t()).t(),
                 torch.linalg.slogdet(self.glow)[1] + h[:, :1]]
        return position_weighted(terms)


def linear_algebra():
    torch.manual_seed(16)
    return trains_as_torch(LinearAlgebra(), {"x": torch.randn(batch, 8)})


case("det, slogdet, logdet, solve, inverse, cholesky, solve_triangular and cholesky_solve (LU with partial pivoting, "
     "unrolled) train as PyTorch's", linear_algebra)


class Likelihoods(torch.nn.Module):
    """Negative log-likelihoods of torch.distributions whose log_prob reads lgamma (Gamma, Beta, Poisson,
    StudentT, Dirichlet), parameters from a Linear, digamma of data below and above 0.5 (its reflection), and
    Normal.icdf (erfinv) of probabilities near 0 and 1."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 8)

    def forward(self, x, y):
        h = self.lin(x)
        a, b = F.softplus(h[:, :4]) + 0.1, F.softplus(h[:, 4:]) + 0.1
        D = torch.distributions
        terms = [D.Gamma(a, b).log_prob(y.abs() + 0.1), D.Beta(a, b).log_prob(torch.sigmoid(y)),
                 D.Poisson(a).log_prob((y.abs() * 3).floor()), D.StudentT(3.0, h[:, :4], b).log_prob(y),
                 D.Dirichlet(a).log_prob(torch.softmax(y, -1)).unsqueeze(-1)]
        quantiles = D.Normal(h[:, :4], b).icdf(torch.sigmoid(y * 3))  # erfinv
        return -sum(t.mean() for t in terms) + torch.digamma(h * 2).tanh().mean() + torch.lgamma(h * 3).mean() * 0.1 + \
            quantiles.tanh().pow(2).mean()


def likelihoods():
    torch.manual_seed(12)
    return trains_as_torch(Likelihoods(), {"x": torch.randn(batch, 4), "y": torch.randn(batch, 4)})


case("torch.distributions' Gamma, Beta, Poisson, StudentT and Dirichlet log_prob (lgamma), digamma of data on "
     "both sides of 0.5 and Normal.icdf (erfinv) train as PyTorch's", likelihoods)


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


class Draws(torch.nn.Module):
    """Each random draw from_torch imports, of a [N, 4] shape: torch.rand_like, randn_like, bernoulli of a
    tensor of probabilities, exponential_ and F.gumbel_softmax."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x) * 0
        return torch.stack([torch.rand_like(h), torch.randn_like(h), torch.bernoulli(torch.full_like(h, 0.3)),
                            torch.empty_like(h).exponential_(), F.gumbel_softmax(h, tau=1.0)], 0)


def ks_distance(values, cdf):
    """The Kolmogorov-Smirnov distance of `values` from the distribution of `cdf`."""
    import numpy as np
    v = np.sort(values.reshape(-1).astype(np.float64))
    n = len(v)
    c = cdf(v)
    return float(max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n)))


def draws():
    """16,384 draws of each kind from an inference plan (which draws, as PyTorch's eval mode does): their
    statistics (a Kolmogorov-Smirnov distance below 0.02 from the uniform, normal and exponential
    distributions; 1.1% is 5%'s critical value at this size), the same uniform, normal and Bernoulli
    numbers on Vulkan as on the CPU (one RNG), and two sessions of other seeds apart."""
    import math
    import numpy as np
    torch.manual_seed(7)
    x = torch.randn(4096, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the check skips a module whose output changes between runs)
        graph = tightfit.from_torch(Draws(), (x,), loss="mse", dynamic_batch=False)
    plan = tightfit.compile(graph, inference=True)
    feed = {"x": x.numpy(), "labels": np.zeros((5, 4096, 4), np.float32)}
    outputs = {}
    for device, seed in (("cpu", 0), ("cpu", 1), ("vulkan", 0)):
        try:
            with tightfit.Session(plan, device=device, seed=seed) as session:
                session.forward(feed)
                outputs[(device, seed)] = session.read("output", shape=(5, 4096, 4))
        except tightfit.TightfitError as error:
            if "no Vulkan" not in str(error):
                raise
    u, n, b, e, g = outputs[("cpu", 0)]
    normal_cdf = np.vectorize(lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2))))
    ks_uniform, ks_normal = ks_distance(u, lambda v: v), ks_distance(n, normal_cdf)
    ks_exponential = ks_distance(e, lambda v: 1 - np.exp(-v))
    seen = (f"uniform in [{u.min():.2e}, {u.max():.6f}], KS {ks_uniform:.4f}; normal mean {n.mean():.4f} var "
            f"{n.var():.4f}, KS {ks_normal:.4f}; bernoulli(0.3) mean {b.mean():.4f}; exponential KS "
            f"{ks_exponential:.4f}; gumbel_softmax rows sum to 1 within {float(np.abs(g.sum(-1) - 1).max()):.1e}")
    if not (0 < u.min() and u.max() < 1 and max(ks_uniform, ks_normal, ks_exponential) < 0.02 and
            abs(b.mean() - 0.3) < 0.01 and np.abs(g.sum(-1) - 1).max() < 1e-5 and g.min() >= 0):
        return "draws unlike their distributions", seen
    if np.array_equal(outputs[("cpu", 0)], outputs[("cpu", 1)]):
        return "sessions of seeds 0 and 1 drew the same numbers", seen
    if ("vulkan", 0) not in outputs:
        return None, seen + "; Vulkan skipped: no device"
    # the uniform and Bernoulli draws bit for bit; the normal ones within 1e-5 (3e-6 seen: sqrt(-2 ln u) near
    # u = 1, where a shader's log is exact to 2^-21 absolute only). The exponential's -log(u) and gumbel's
    # -log(-log(u)) magnify that further near u = 1: Vulkan's are held to their distributions instead
    ours, theirs = outputs[("cpu", 0)][:3].astype(np.float64), outputs[("vulkan", 0)][:3]
    apart = [float(np.max(np.abs(theirs[k] - ours[k]))) for k in range(3)]
    if apart[0] != 0 or apart[2] != 0 or not apart[1] <= 1e-5:
        return f"Vulkan drew other numbers than the CPU: worst differences {apart} (uniform, normal, Bernoulli)", seen
    e_vk, g_vk = outputs[("vulkan", 0)][3:]
    if not (ks_distance(e_vk, lambda v: 1 - np.exp(-v)) < 0.02 and np.abs(g_vk.sum(-1) - 1).max() < 1e-5):
        return "Vulkan's exponential or gumbel_softmax draws unlike their distributions", seen
    return None, seen + f"; Vulkan's uniform and Bernoulli draws the CPU's, normal within {apart[1]:.1e}"


case("torch.rand_like, randn_like, bernoulli, exponential_ and gumbel_softmax draw from their distributions, "
     "the same on Vulkan", draws)


class Variational(torch.nn.Module):
    """A VAE: the reparameterised sample mu + exp(logvar / 2) eps, eps = randn_like, under a
    reconstruction and a KL term."""

    def __init__(self):
        super().__init__()
        self.encode, self.decode = torch.nn.Linear(8, 2 * 3), torch.nn.Linear(3, 8)

    def forward(self, x):
        mu, logvar = self.encode(x).chunk(2, dim=-1)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        return F.mse_loss(self.decode(z), x) + 0.1 * kl


def variational():
    """A VAE trains (20 AdamW steps lower its loss; each step draws anew: the same step twice from the same
    weights gives two losses), and recomputing its activations draws the same numbers (every step's loss
    with recompute is the loss without)."""
    torch.manual_seed(8)
    x = torch.randn(batch, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = tightfit.from_torch(Variational(), (x,), loss="output", dynamic_batch=False)
    runs = {}
    for remat in ("none", "checkpoints"):
        plan = tightfit.compile(graph, optimizer="adamw", lr=3e-2, weight_decay=0, clip=0, remat=remat)
        with tightfit.Session(plan, seed=3) as session:
            runs[remat] = [session.step({"x": x.numpy()}) for _ in range(20)]
    losses = runs["none"]
    seen = f"20 AdamW steps {losses[0]:.4f} -> {losses[-1]:.4f}; with recompute {runs['checkpoints'][-1]:.4f}"
    if runs["checkpoints"] != losses:
        return "recompute drew other numbers (the losses differ)", seen
    if not losses[-1] < losses[0]:
        return "the loss did not fall", seen
    plan = tightfit.compile(graph, optimizer="sgd", lr=1e-30)
    with tightfit.Session(plan, seed=3) as session:
        twice = [session.step({"x": x.numpy()}) for _ in range(2)]
    if twice[0] == twice[1]:
        return "two steps drew the same numbers", seen
    return None, seen + f"; two steps from the same weights: {twice[0]:.6f}, {twice[1]:.6f}"


case("a VAE (randn_like's reparameterised sample) trains, draws anew each step and the same under recompute",
     variational)


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
