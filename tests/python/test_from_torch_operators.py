"""tightfit.from_torch on single operators and indexing as PyTorch code writes them, each trained beside
PyTorch from the same weights: detach() as a stop-gradient, F.pad of data, slice assignments (ScatterND),
== and comparisons of data, torch.gather and indexing by known and by computed indices, repeat and
repeat_interleave, torch.arange and torch.eye of traced sizes, writes counted from the end, 1-d MatMul
operands, sin and cos, torch.flip, argmin/argmax, Pow by any exponent, statistics over the batch axis,
a zero row's norm, rounding, nn.EmbeddingBag of bags of one length; an embedding with max_norm refused.
Fails, not skips, without the ONNX importer.
usage: test_from_torch_operators.py   (PYTHONPATH=python)"""
import json

import numpy as np
import torch
import torch.nn.functional as F

import tightfit
from from_torch_cases import (adamw_both, batch, beside_torch, case, dumped, finish, own_loss_both,
                              own_loss_everywhere, require_importer)
from tally import relative_apart
from torch_training import adamw_losses

require_importer()


# detach() is PyTorch's stop-gradient, which torch's ONNX export drops: from_torch writes it as
# tightfit's StopGradient. A straight-through estimator (tanh's value forward, the identity's gradient
# backward: a quantiser's trick) and a detached gate; without the op both train as if not detached.
class StraightThrough(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.gate, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16), torch.nn.Linear(16, 5)

    def forward(self, x):
        h = self.a(x)
        h = h + (torch.tanh(h) - h).detach()
        return self.b(h * torch.sigmoid(self.gate(x)).detach() + h)


def detached():
    torch.manual_seed(7)
    problem, seen, ops = beside_torch(StraightThrough(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)),
                                      ["stop_gradient"])
    return (f"expected 2 stop_gradient nodes: {ops}" if ops.count("stop_gradient") != 2 else problem), seen


case("detach() (a straight-through estimator, a detached gate) trains as PyTorch's", detached)


# F.pad of data in constant mode (MobileBERT's trigram embeddings shift the sequence by a zero row each
# way): concats with constants, a negative pad a crop; torch's export reverses the pads with a Slice of
# step -1, which the importer folds.
class Shifted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(24, 5)

    def forward(self, x):
        h = self.a(x)
        before = F.pad(h[:, 1:], [0, 0, 0, 1])
        after = F.pad(h, [0, 0, 1, -1], value=0.5)
        return self.b(torch.cat([before, h, after], dim=2).mean(dim=1))


def padded():
    torch.manual_seed(8)
    return beside_torch(Shifted(), torch.randn(batch, 6, 8), torch.randint(0, 5, (batch,)), ["concat", "slice"])[:2]


case("F.pad of data (zeros, a value, a negative pad) trains as PyTorch's", padded)


# Slice assignments of data export as ScatterND whose indices are a Range reshaped, expanded and
# concatenated; the importer reads them back as a box of the data and writes slices and concats: a
# shift right (BART's decoder ids), a single position, a box over two axes with its updates transposed,
# and an assignment into a zero tensor; gradients reach both the kept data and the updates.
class SliceAssigned(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 5)

    def forward(self, x):  # x [N, 6, 8]
        h = self.a(x)
        shifted = torch.zeros_like(h)
        shifted[:, 1:] = h[:, :-1]
        shifted[:, 0] = 0.5 * h[:, 5]
        g = h.clone()
        g[:, 2:5, 1:3] = x[:, 1:3, 4:7].transpose(1, 2) * 2
        g[:, :, 7] = shifted[:, :, 0]
        return self.b((shifted * g).mean(dim=1))


def slice_assigned():
    torch.manual_seed(10)
    problem, seen, ops = beside_torch(SliceAssigned(), torch.randn(batch, 6, 8), torch.randint(0, 5, (batch,)),
                                      ["concat", "slice", "transpose"])
    return (f"expected no ScatterND left: {ops}" if "scatter" in " ".join(ops) else problem), seen


case("slice assignments of data (x[:, 1:] = y, a position, a transposed box) train as PyTorch's", slice_assigned)


# == of float data with a number (BLOOM's padding mask) and of two data tensors: exact, and no
# gradient through the mask; torch.where with both branches data blends them by the mask.
class FloatEqual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 5)
        self.register_buffer("keep", torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]))

    def forward(self, x):
        h = self.a(x)
        same = torch.relu(h) == torch.relu(h * self.keep)  # == of two data tensors
        both = torch.where(same, h, 2 * h)  # Where with both branches data
        return self.b(h.masked_fill(torch.relu(h) == 0, 0.25) * (h.abs() == 0.5).float() + both)


def float_equal():
    torch.manual_seed(11)
    x = torch.randn(batch, 8)
    x[0, :4] = 0.5
    model = FloatEqual()
    with torch.no_grad():  # h[0, :4] = 0.5 exactly: the weights of row 0 of x's first four inputs
        model.a.weight[:4], model.a.bias[:4] = 0.0, 0.5
    problem, seen, ops = beside_torch(model, x, torch.randint(0, 5, (batch,)), ["stop_gradient"], steps=3)
    return (f"expected 3 stop_gradient nodes: {ops}" if ops.count("stop_gradient") != 3 else problem), seen


case("== of float data (with a number, of two tensors) and where() of two tensors train as PyTorch's", float_equal)


# torch.gather by known indices (DeBERTa's relative positions, expanded over the batch; Funnel's
# position table) is an embedding lookup: an index read twice sums its gradients, as torch's does;
# x.repeat(N, 1) of a tensor of two rows is an expand of a new axis merged with the rows.
class Gathered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 12), torch.nn.Linear(6, 5)
        self.table = torch.nn.Parameter(torch.randn(4, 6) * 0.5)
        self.heads = torch.nn.Parameter(torch.randn(2, 3) * 0.5)
        self.register_buffer("columns", torch.tensor([[5, 0, 3, 3, 11, 2]]))
        self.register_buffer("rows", torch.tensor([[3, 0, 1, 1, 2, 0], [0, 0, 3, 2, 1, 1]]))

    def forward(self, x):  # x [N, 8]
        h = self.a(x)
        picked = torch.gather(h, 1, self.columns.expand(x.shape[0], 6))  # [N, 6]
        # DeBERTa-v2's repeat over the batch of a tensor whose first axis is not 1: [2N, 3]
        repeated = self.heads.repeat(x.shape[0], 1).reshape(x.shape[0], 6)
        return self.b(picked * torch.gather(self.table, 0, self.rows).sum(0) * repeated)


def gathered():
    torch.manual_seed(12)
    return beside_torch(Gathered(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["embedding"])[:2]


case("torch.gather by known indices, and a repeat over the batch, train as PyTorch's", gathered)


# Indexing by indices computed at run time (not known at import): x[:, idx] by an argmax of a
# parameter and index_select along the last axis by a model input (Gather along axes other than a 2-d
# table's rows), torch.gather by a per-row index tensor (GatherElements by data).
class GatheredByData(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 12), torch.nn.Linear(20, 5)
        self.choice = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x, rows):  # x [N, 8], rows [N, 2] in [0, 3)
        h = self.a(x).reshape(x.shape[0], 3, 4)
        picked = h[:, self.choice.argmax(0)]  # [N, 4, 4]: rows of h chosen at run time
        last = torch.index_select(torch.tanh(h), 2, rows[0])  # [N, 3, 2]
        per_row = torch.gather(h[:, :, 0], 1, rows)  # [N, 2]
        return self.b(torch.cat([picked.reshape(x.shape[0], 16) * 0.5, last.sum(1), per_row], 1))


def gathered_by_data():
    torch.manual_seed(29)
    model = GatheredByData()
    xs, ys, rows = torch.randn(batch, 8), torch.randint(0, 5, (batch,)), torch.randint(0, 3, (batch, 2))
    inputs = {"x": xs, "rows": rows}
    graph = tightfit.from_torch(model, (xs, rows), loss="cross_entropy", input_names=list(inputs))
    sessions = []
    losses, expected, worst = adamw_both(graph, model, xs, ys, 5, sessions=sessions, inputs=inputs)
    seen = f"5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative " \
        f"difference {worst:.1e}"
    outside = rows.numpy().copy()
    outside[1, 0] = 3  # not a position of h[:, :, 0]: torch.gather raises; tightfit's loss is +inf
    try:
        loss = sessions[0].step({"x": xs.numpy(), "rows": outside, "labels": ys.numpy().astype(np.int32)})
        return f"an index outside the axis gave the loss {loss}", seen
    except tightfit.TightfitError as error:
        seen += f"; an index outside the axis: {str(error)[:80]}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("x[:, idx], index_select and torch.gather by indices computed at run time train as PyTorch's",
     gathered_by_data)


# torch.repeat_interleave by a constant (GPT-J's rotary tables): torch's own export writes a Loop over
# slices when a size is dynamic (the batch here); from_torch writes Unsqueeze, Expand and Reshape.
class Interleaved(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 12), torch.nn.Linear(48, 5)

    def forward(self, x):  # x [N, 8]
        h = self.a(x).reshape(x.shape[0], 3, 4)
        middle = torch.repeat_interleave(h, 2, dim=1)  # [N, 6, 4]: rows 0 0 1 1 2 2
        last = torch.repeat_interleave(torch.tanh(middle), 2, -1)  # [N, 6, 8]
        return self.b(last.reshape(x.shape[0], 48))


def interleaved():
    torch.manual_seed(13)
    return beside_torch(Interleaved(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["reshape"])[:2]


case("torch.repeat_interleave by a constant, along a middle and the last axis, trains as PyTorch's", interleaved)


# torch.repeat_interleave by a tensor of counts, one of them 0 (a length regulator's fixed durations), and
# torch.split by sizes of which one is 0: the parts of no elements are left out (they once reached the
# graph as a size-0 Expand, whose gradient slice the compiler refused).
class ZeroCounts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(16 + 8, 5)

    def forward(self, x):  # x [N, 8]
        h = torch.tanh(self.a(x))
        counts = torch.tensor([1, 3, 0, 2, 2, 1, 2, 5])  # 16 columns, the third left out
        repeated = torch.repeat_interleave(h, counts, dim=1)
        left, none, right = torch.split(h, [3, 0, 5], dim=1)
        return self.b(torch.cat([repeated, right * 2, none, left], 1))


def zero_counts():
    torch.manual_seed(14)
    return beside_torch(ZeroCounts(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), [])[:2]


case("torch.repeat_interleave by counts with a 0 and torch.split with a part of size 0 train as PyTorch's",
     zero_counts)


# DLRM's dot interaction: the pairwise products of feature embeddings, Z[:, li, lj] by tril_indices (two
# index tensors on adjacent axes: torch moves them first, flattens [4, 4, N] at 2 to [16, N], gathers).
class DotInteraction(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.head = torch.nn.Linear(8, 4 * 3), torch.nn.Linear(6 + 3, 5)

    def forward(self, x):  # x [N, 8]
        features = self.embed(x).reshape(x.shape[0], 4, 3)  # 4 features of 3
        z = torch.bmm(features, features.transpose(1, 2))  # [N, 4, 4]
        li, lj = torch.tril_indices(4, 4, offset=-1)
        return self.head(torch.cat([z[:, li, lj], features[:, 0]], 1))


def dot_interaction():
    torch.manual_seed(17)
    return beside_torch(DotInteraction(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), [])[:2]


case("z[:, li, lj] by tril_indices (DLRM's dot interaction: two index tensors) trains as PyTorch's", dot_interaction)


# A batch stacked k times and taken apart again (SimCLR's two views through one encoder, classifier-free
# guidance's conditional and unconditional halves, TimeSformer's first frame of [batch x frames]): slices
# at multiples of the symbolic batch, chunk, and a view as [k, N, ...]; the import reshapes the axis of k N
# to [k, N] and takes whole rows of the k (a symbolic start or end was refused).
class StackedBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encode, self.head = torch.nn.Linear(8, 6), torch.nn.Linear(6 * 4, 5)

    def forward(self, x):  # x [N, 8]
        n = x.shape[0]
        z = torch.tanh(self.encode(torch.cat([x, x.flip(1), x * 2], 0)))  # [3N, 6]
        first, second, third = z[:n], z[n:2 * n], z[2 * n:]
        a, b, c = z.chunk(3)
        frames = z.reshape(n, 3, 6).reshape(n * 3, 6)[:n]  # the first N rows of [N x 3, 6]
        views = z.view(3, n, 6).unbind(0)
        return self.head(torch.cat([first * second + third, a - b * c, frames, views[2] - views[0]], 1))


def stacked_batch():
    torch.manual_seed(18)
    return beside_torch(StackedBatch(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["slice"])[:2]


case("a batch stacked 3 times taken apart by slices at multiples of N, chunk(3) and a view trains as PyTorch's",
     stacked_batch)


# Comparisons of data (XLM's padding mask arange(T) < lengths[:, None]; float data's signs): masks of 0s and
# 1s, those of floats with no gradient.
class Compared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 5)
        self.register_buffer("positions", torch.arange(8))

    def forward(self, x):  # x [N, 8]
        counts = (x[:, :1] * 4).long()  # whole numbers from the data, about -8..8
        keep = (self.positions < counts) | (self.positions >= counts + 6)
        near = (counts <= self.positions) & (self.positions > counts - 3) & (counts.sum(1, keepdim=True) > -2)
        h = self.a(x)
        signs = (h > 0).float() - (h <= x[:, 1:2]).float() + 0.5 * (x >= 0.25).float() - (h < -0.5).float()
        return self.b(torch.tanh(h) * keep + 0.5 * near + signs)


def compared():
    torch.manual_seed(14)
    return beside_torch(Compared(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["relu"])[:2]


case("comparisons of integer and float data (<, <=, >, >=, summed counts) make masks that train as PyTorch's",
     compared)


class FloatPositions(torch.nn.Module):
    """torch.arange over the batch axis in floats (a Range to a symbolic size cast to f32)."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 5)

    def forward(self, x):  # x [N, 8]
        rows = torch.arange(x.shape[0], dtype=torch.float32)
        return self.a(x) + 0.1 * rows[:, None]


def float_positions():
    torch.manual_seed(20)
    return beside_torch(FloatPositions(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), [])[:2]


case("torch.arange(x.shape[0], dtype=torch.float32) of the symbolic batch trains as PyTorch's", float_positions)


# Writes at positions counted from the end (XGLM's shift_labels[:, -1] = pad_token_id: a ScatterND at
# index -1) and an identity of a traced size (Nystromformer's torch.eye(mat.size(-1)): EyeLike).
class FromTheEnd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 5)
        self.w = torch.nn.Parameter(torch.randn(8, 8) * 0.3)

    def forward(self, x):  # x [N, 6, 8]
        h = self.a(x)
        h[:, -1] = 0.5
        h[:, -3] = h[:, 0] * 2
        identity = torch.eye(h.size(-1))
        return self.b((h @ (7 * identity + self.w)).mean(1))


def from_the_end():
    torch.manual_seed(18)
    return beside_torch(FromTheEnd(), torch.randn(batch, 6, 8), torch.randint(0, 5, (batch,)), ["concat"])[:2]


case("writes at positions counted from the end (x[:, -1] = v) and torch.eye of a traced size train as PyTorch's",
     from_the_end)


# A contrastive loss over the batch (SigLIP's): torch.eye(N) of the batch size, an EyeLike of a
# symbolic [N, N], computed in the graph; exported at batch 4, trained at 6.
class PairwiseSigmoid(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.image, self.text = torch.nn.Linear(8, 6), torch.nn.Linear(8, 6)

    def forward(self, x):  # x [N, 8]
        logits = torch.tanh(self.image(x)) @ torch.tanh(self.text(x.flip(-1))).t() * 3.0  # [N, N]
        labels = 2 * torch.eye(logits.size(0)) - 1  # 1 on the pairs, -1 elsewhere
        return -F.logsigmoid(labels * logits).sum() / logits.size(0)


def pairwise_sigmoid():
    torch.manual_seed(26)
    model = PairwiseSigmoid()
    graph = tightfit.from_torch(model, (torch.randn(4, 8),), loss="output")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    losses, expected, worst = own_loss_both(graph, model, {"x": torch.randn(6, 8)}, 4, {"N": 6})
    seen = f"{ops.count('abs')} abs (the eye's distance); 4 AdamW steps at N=6 {losses[0]:.6f} -> {losses[-1]:.6f} " \
        f"(PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    return (None if worst <= 1e-5 and "abs" in ops else f"tightfit {losses} vs PyTorch {expected}, ops {set(ops)}"), seen


case("torch.eye of the batch size (a contrastive loss over [N, N], SigLIP's) is computed at any batch", pairwise_sigmoid)


# numpy's 1-d MatMul operands (x @ w for a vector w, torch.mv, torch.dot): a [K] as [1, K], b [K] as
# [K, 1], that axis dropped after; trains as PyTorch's.
class VectorProducts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.w, self.p = torch.nn.Parameter(torch.randn(8) * 0.3), torch.nn.Parameter(torch.randn(8) * 0.3)
        self.u, self.m = torch.nn.Parameter(torch.randn(5) * 0.3), torch.nn.Parameter(torch.randn(5, 8) * 0.3)

    def forward(self, x):  # x [N, 6, 8]
        h = torch.tanh(self.a(x))
        per_step = h @ self.w  # [N, 6]: b 1-d, batched
        mixed = self.u @ self.m  # [8]: a 1-d
        dot = torch.dot(self.w, self.p)  # []: both 1-d
        return ((h * mixed + dot) @ self.m.t()).mean(1) + per_step[:, :5]


def vector_products():
    torch.manual_seed(17)
    return beside_torch(VectorProducts(), torch.randn(batch, 6, 8), torch.randint(0, 5, (batch,)), ["matmul"])[:2]


case("1-d MatMul operands (x @ vector, vector @ matrix, torch.dot) train as PyTorch's", vector_products)


# Sin and Cos of data (the sin and cos ops): a diffusion model's sinusoidal timestep embedding of a
# float input t, and a SIREN layer (sin(30 (W x + b))) whose gradient runs through cos; trains as
# PyTorch's.
class TimestepSiren(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("frequencies", torch.exp(-torch.arange(4.0) * 0.7))
        self.siren, self.mix = torch.nn.Linear(8, 8), torch.nn.Linear(16, 5)

    def forward(self, x, t):  # x [N, 8], t [N]
        angles = t[:, None] * self.frequencies[None, :]
        embedding = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
        return self.mix(torch.cat([torch.sin(30 * self.siren(x)) / 30, embedding], dim=1))


def sinusoids_of_data():
    torch.manual_seed(19)
    model = TimestepSiren()
    xs, ts, ys = torch.randn(batch, 8), torch.rand(batch) * 1000, torch.randint(0, 5, (batch,))
    graph = tightfit.from_torch(model, (xs, ts), loss="cross_entropy", input_names=["x", "t"])
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    losses, expected, worst = adamw_both(graph, model, xs, ys, 5, inputs={"x": xs, "t": ts})
    seen = f"{ops.count('sin')} sin, {ops.count('cos')} cos; 5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} " \
        f"(PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    if ops.count("sin") != 2 or ops.count("cos") != 1:
        return f"expected 2 sin and 1 cos nodes: {ops}", seen
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("Sin and Cos of data (a timestep embedding, a SIREN layer) train as PyTorch's", sinusoids_of_data)


# torch.flip (Slice with step -1: the flows of VITS and Glow-TTS flip their channels between coupling
# layers) imports as one-element slices concatenated in reverse; a coupling flow in miniature trains as
# PyTorch's.
class FlippedCoupling(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre, self.post = torch.nn.Conv1d(3, 8, 3, padding=1), torch.nn.Conv1d(8, 3, 3, padding=1)
        self.head = torch.nn.Linear(6 * 5, 5)

    def forward(self, x):  # x [N, 6, 5]: two halves of 3 channels
        for _ in range(2):
            a, b = x[:, :3], x[:, 3:]
            b = b + self.post(torch.tanh(self.pre(a)))
            x = torch.flip(torch.cat([a, b], dim=1), [1])
        return self.head(torch.flatten(torch.flip(x, [2]), 1))


def flipped_coupling():
    torch.manual_seed(20)
    problem, seen, ops = beside_torch(FlippedCoupling(), torch.randn(batch, 6, 5), torch.randint(0, 5, (batch,)),
                                      ["slice", "concat"])
    return (f"expected the flips' slices: {ops}" if not problem and ops.count("slice") < 17 else problem), seen


case("torch.flip (a flow's channel flips) trains as PyTorch's", flipped_coupling)


# argmin/argmax of data (ONNX ArgMin/ArgMax, composed exactly of max, abs, relu and a cast): a VQ-VAE's
# nearest codebook entry (distances.argmin(1)), looked up, with the straight-through estimator
# (z + (zq - z).detach()); and a prediction's argmax fed back as an embedding; train as PyTorch's.
class Quantizer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encode, self.codebook = torch.nn.Linear(8, 4), torch.nn.Embedding(6, 4)
        self.guess, self.head = torch.nn.Linear(8, 3), torch.nn.Linear(4, 5)
        self.hint = torch.nn.Embedding(3, 4)

    def forward(self, x):  # x [N, 8]
        z = self.encode(x)
        e = self.codebook.weight
        distances = (z ** 2).sum(1, keepdim=True) + (e ** 2).sum(1) - 2 * z @ e.t()
        quantized = self.codebook(distances.argmin(1))
        z = z + (quantized - z).detach()
        return self.head(z + self.hint(self.guess(x).argmax(-1)))


def argmin_quantizer():
    torch.manual_seed(21)
    problem, seen, ops = beside_torch(Quantizer(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)),
                                      ["embedding", "stop_gradient"])
    return (f"expected 2 embedding lookups: {ops}" if not problem and ops.count("embedding") != 2 else problem), seen


case("argmin/argmax of data (a VQ codebook lookup, straight-through) train as PyTorch's", argmin_quantizer)


# Pow by any constant exponent: whole ones by multiplications (negative x keeps its sign), others as
# exp(p log x), and an f32 exponent within 2^-20 of 1/2 as the square root (pairwise_distance's 2-norm
# exports 1/p rounded, 0.49999976); each trains as PyTorch's.
class Powers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = torch.nn.Linear(8, 8), torch.nn.Linear(5, 5)

    def forward(self, x):  # x [N, 8]
        h = torch.tanh(self.a(x))
        positive = h.abs() + 0.5
        distance = F.pairwise_distance(h[:, :4], h[:, 4:]).unsqueeze(1)
        parts = [h.pow(4).sum(1, keepdim=True), h.pow(5).sum(1, keepdim=True), positive.pow(-2).sum(1, keepdim=True),
                 positive.pow(1.5).sum(1, keepdim=True) + positive.pow(-0.75).sum(1, keepdim=True), distance]
        return self.head(torch.cat(parts, dim=1))


def powers():
    torch.manual_seed(25)
    return beside_torch(Powers(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["exp", "log", "sqrt"])[:2]


case("Pow by whole, fractional and negative exponents, pairwise_distance, trains as PyTorch's", powers)


# Pow of an exponent that trains (GeM pooling: x.clamp(min=eps).pow(p) with p a parameter, mean over the
# positions, then ^(1/p)) and of two tensors (x ** y, a negative base to whole powers, zeros to a
# positive power): both the base's and the exponent's gradients as PyTorch's.
class LearnedPowers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = torch.nn.Conv2d(3, 4, 3), torch.nn.Linear(8, 5)
        self.p = torch.nn.Parameter(torch.ones(1) * 3)

    def forward(self, x, k):  # x [N, 3, 8, 8]; k [N, 4]: whole exponents 1 to 3
        features = F.relu(self.conv(x))
        gem = features.clamp(min=1e-6).pow(self.p).mean((2, 3)).pow(1.0 / self.p)
        signed = torch.tanh(features.mean((2, 3)) - 0.2) ** k  # negative bases, whole exponents
        zeros = F.relu(features[:, :, 0, 0] - 0.3) ** (k * 0.5 + 0.5)  # zeros to positive powers
        return self.head(torch.cat([gem, signed + zeros], dim=1))


def learned_powers():
    torch.manual_seed(32)
    model = LearnedPowers()
    x, k = torch.randn(batch, 3, 8, 8), torch.randint(1, 4, (batch, 4)).float()
    labels = torch.randint(0, 5, (batch,))
    graph = tightfit.from_torch(model, (x, k), loss="cross_entropy", input_names=["x", "k"])
    losses, expected, worst = adamw_both(graph, model, x, labels, 5, inputs={"x": x, "k": k})
    p_after = model.p.item()
    seen = f"5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative " \
        f"difference {worst:.1e}; PyTorch's p 3 -> {p_after:.6f}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("Pow of a learned exponent (GeM pooling) and of two tensors (x ** y) trains as PyTorch's", learned_powers)


# ONNX's LRN and MeanVarianceNormalization, which PyTorch's exporter never writes (F.local_response_norm
# exports as its parts): a torch.autograd.Function whose symbolic writes each node and whose forward and
# backward are PyTorch's (AlexNet's LRN: size 5, odd, where PyTorch's window and ONNX's agree).
def _onnx_node(forward, symbolic):
    """A torch.autograd.Function computing `forward` (its backward by autograd on a recomputation) that
    the export writes as `symbolic` (g, x) -> ONNX node."""
    class Node(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx, dy):
            x, = ctx.saved_tensors
            with torch.enable_grad():
                x = x.detach().requires_grad_()
                return torch.autograd.grad(forward(x), x, dy)[0]

    Node.symbolic = staticmethod(symbolic)
    return Node


def _lrn(x):
    return F.local_response_norm(x, 5, alpha=1e-2, beta=0.75, k=2.0)


def _mvn(x):
    centred = x - x.mean((0, 2, 3), keepdim=True)
    return centred / (centred.pow(2).mean((0, 2, 3), keepdim=True).sqrt() + 1e-9)


OnnxLrn = _onnx_node(_lrn, lambda g, x: g.op("LRN", x, size_i=5, alpha_f=1e-2, beta_f=0.75, bias_f=2.0))
OnnxMvn = _onnx_node(_mvn, lambda g, x: g.op("MeanVarianceNormalization", x, axes_i=[0, 2, 3]))


class LrnMvn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = torch.nn.Conv2d(3, 7, 3), torch.nn.Linear(14, 5)

    def forward(self, x):
        h = self.conv(x)
        return self.head(torch.cat([OnnxLrn.apply(h).mean((2, 3)), OnnxMvn.apply(h).pow(2).mean((2, 3))], dim=1))


def lrn_mvn():
    torch.manual_seed(33)
    model = LrnMvn()
    x, labels = torch.randn(batch, 3, 8, 8) * 2, torch.randint(0, 5, (batch,))
    return beside_torch(model, x, labels, ["matmul", "sqrt"])[:2]


case("ONNX's LRN and MeanVarianceNormalization (written by a Function's symbolic) train as PyTorch's", lrn_mvn)


# MaxPool and AveragePool with auto_pad="SAME_UPPER" (as tf2onnx writes them; PyTorch's exporter writes
# explicit pads): 3 x 3 windows, stride 2 over 8 x 8: 4 x 4 windows need one element of padding, after
# (SAME_UPPER: floor(1 / 2) = 0 before) or before (SAME_LOWER's max). PyTorch's side: -inf padding for
# the max, and for the average (count_include_pad=0, ONNX's default) the sum over the input's positions
# divided by their count.
def _max_same(x, before):
    return F.max_pool2d(F.pad(x, (before, 1 - before, before, 1 - before), value=float("-inf")), 3, 2)


def _avg_same(x):
    padded = F.pad(x, (0, 1, 0, 1))
    counts = F.avg_pool2d(F.pad(torch.ones_like(x[:1, :1]), (0, 1, 0, 1)), 3, 2, divisor_override=1)
    return F.avg_pool2d(padded, 3, 2, divisor_override=1) / counts


def _same_pools(g, x):
    pools = [g.op(op, x, kernel_shape_i=[3, 3], strides_i=[2, 2], auto_pad_s=pad)
             for op, pad in (("MaxPool", "SAME_UPPER"), ("AveragePool", "SAME_UPPER"), ("MaxPool", "SAME_LOWER"))]
    return g.op("Add", g.op("Add", pools[0], pools[1]), pools[2])


SamePools = _onnx_node(lambda x: _max_same(x, 0) + _avg_same(x) + _max_same(x, 1), _same_pools)


class SamePooled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = torch.nn.Conv2d(3, 4, 2), torch.nn.Linear(64, 5)

    def forward(self, x):  # x [N, 3, 9, 9]: 8 x 8 after the conv, 4 x 4 after the pools
        return self.head(SamePools.apply(self.conv(x)).flatten(1))


def same_pools():
    torch.manual_seed(34)
    model = SamePooled()
    x, labels = torch.randn(batch, 3, 9, 9), torch.randint(0, 5, (batch,))
    return beside_torch(model, x, labels, ["max_pool2d", "avg_pool2d"])[:2]


case("MaxPool and AveragePool with auto_pad SAME_UPPER (and a max's SAME_LOWER) train as PyTorch's", same_pools)


# Statistics over the batch axis (x.std(0), x.var(0): a hand-written batch normalisation): torch's
# export counts the elements as ReduceProd of the shape, a symbolic size cast to a float, which becomes
# a tensor the bound plan computes (sum(expand(1, [N]))); exported at batch 4 and trained at batch 6,
# it divides by the bound batch, as PyTorch does.
class BatchStatistics(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 5)

    def forward(self, x):
        h = self.a(x)
        return self.head((h - h.mean(0)) / (h.std(0) + 1e-3) + h.var(0, unbiased=False))


def batch_axis_statistics():
    torch.manual_seed(26)
    model, example = BatchStatistics(), torch.randn(batch, 8)
    graph = tightfit.from_torch(model, (example,), loss="cross_entropy")
    xs, ys = torch.randn(6, 8), torch.randint(0, 5, (6,))
    plan = tightfit.compile(graph, set={"N": 6}, optimizer="adamw", lr=1e-2, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0)
    losses = [session.step({"x": xs.numpy(), "labels": ys.numpy().astype(np.int32)}) for _ in range(5)]
    expected = adamw_losses(model, (xs,), ys, 5, 1e-2)
    worst = relative_apart(losses, expected)
    seen = f"exported at N={batch}, trained at N=6: 5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} " \
        f"(PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("std and var over the batch axis count the bound batch, as PyTorch's", batch_axis_statistics)


# A zero row's 2-norm (a masked row through F.normalize and x.norm(dim)): PyTorch's norm backward gives
# it the gradient 0, where a square root's would be 0.5 / 0 and the row's gradient NaN; ReduceL2 (which
# from_torch has PyTorch 1.x write for x.norm(dim) too) imports as a norm differentiated as PyTorch's.
# Trains as PyTorch's (before: "the loss is nan" at the second step).
class MaskedNormalize(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 5)

    def forward(self, x, keep):
        z = self.a(x) * keep
        return self.head(F.normalize(z, dim=-1) + z.norm(dim=-1, keepdim=True))


def zero_row_norms():
    torch.manual_seed(27)
    model = MaskedNormalize()
    xs, keep, ys = torch.randn(batch, 8), torch.tensor([[1.0], [0.0], [1.0], [1.0]]), torch.randint(0, 5, (batch,))
    graph = tightfit.from_torch(model, (xs, keep), loss="cross_entropy", input_names=["x", "keep"])
    losses, expected, worst = adamw_both(graph, model, xs, ys, 5, inputs={"x": xs, "keep": keep})
    seen = f"5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative " \
        f"difference {worst:.1e}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("a masked zero row through F.normalize and x.norm trains as PyTorch's (norm's gradient 0 at 0)", zero_row_norms)


# Rounding of data: a straight-through quantizer (finite scalar quantization: x + (round(x) - x).detach()),
# torch.floor, a float remainder (x % 0.75: Floor of data in the export), torch.sign and torch.fmod; each
# step's gradient is 0, as PyTorch's (refused before: "Floor of data is not supported", Round unknown).
class Rounded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 12), torch.nn.Linear(24, 5)

    def forward(self, x):  # x [N, 8]
        h = 3 * torch.tanh(self.a(x))
        quantized = h + (torch.round(h) - h).detach()
        steps = torch.floor(h) * 0.1 + torch.sign(h) * h + h % 0.75 + torch.fmod(h, 0.6)
        return self.b(torch.cat([quantized, steps], 1))


def rounded():
    torch.manual_seed(30)
    problem, seen, ops = beside_torch(Rounded(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)),
                                      ["round", "floor", "sign"])
    return problem, seen


case("torch.round through a straight-through estimator, floor, sign, % and fmod of data train as PyTorch's", rounded)


# Boolean indexing reduced to a number (a TTS loss over the frames that are not padding): x[mask] with a
# mask of the data's shape into F.l1_loss, rows by a frame mask squared and averaged, masked_select into a
# BCE; computed densely (the mask as 0/1 weights), trained as PyTorch's, on the CPU and on Vulkan.
class PaddedFramesLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mel, self.stop = torch.nn.Linear(6, 8), torch.nn.Linear(6, 1)

    def forward(self, x, target):  # x [N, T, 6], target [N, T, 8], -100 on the padded frames
        mel = self.mel(x)
        mask = target != -100.0
        frames = mask[:, :, 0]
        l1 = F.l1_loss(mel[mask], target[mask])
        energy = (mel[frames] ** 2).mean()
        stop = self.stop(x).squeeze(-1)
        bce = F.binary_cross_entropy_with_logits(stop.masked_select(frames), frames.float().masked_select(frames))
        return l1 + 0.1 * energy + bce + (mel[frames] - 0.5).abs().sum() * 1e-3


def padded_frames():
    torch.manual_seed(27)
    model = PaddedFramesLoss()
    x, target = torch.randn(batch, 5, 6), torch.randn(batch, 5, 8)
    target[0, 3:], target[2, 4:] = -100.0, -100.0
    graph = tightfit.from_torch(model, (x, target), loss="output", input_names=["x", "target"])
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    if "gather_nd" in ops:
        return f"a gather_nd left: {ops}", f"{len(ops)} ops"
    inputs = {"x": x, "target": target}
    return own_loss_everywhere(graph, model, inputs, 4, {"N": batch}, f"{len(ops)} ops, no gather; ")


case("boolean indexing into a loss over the frames that are not padding (x[mask], masked_select) computes "
     "densely and trains as PyTorch's", padded_frames)


class SelectedTokens(torch.nn.Module):
    """F.cross_entropy over the tokens a mask keeps (an ASR or masked-LM loss written by indexing)."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 7)

    def forward(self, x, classes, keep):  # x [N, T, 6], classes [N, T], keep [N, T] of 0/1
        logits = self.a(x)
        m = keep > 0
        return F.cross_entropy(logits[m], classes[m]) + F.cross_entropy(logits[m], classes[m], ignore_index=3)


def selected_tokens():
    torch.manual_seed(28)
    model = SelectedTokens()
    x, classes = torch.randn(batch, 5, 6), torch.randint(0, 7, (batch, 5))
    keep = (torch.rand(batch, 5) > 0.3).to(torch.uint8)
    classes[0, 0], keep[0, 0] = 3, 1
    inputs = {"x": x, "classes": classes, "keep": keep}
    graph = tightfit.from_torch(model, tuple(inputs.values()), loss="output", input_names=list(inputs))
    losses, expected, worst = own_loss_both(graph, model, inputs, 4, {"N": batch})
    seen = f"4 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative " \
        f"difference {worst:.1e}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("F.cross_entropy(logits[mask], labels[mask]) (and with an ignore_index among the classes) trains as PyTorch's",
     selected_tokens)
# Values that are not finite where nothing takes them: a log of padding's zeros selected away
# (log(target[mask])), torch.where(h > 0, h.log(), h) and h.log().masked_fill(h <= 0, 0.5) (log's NaN
# where not taken), and an additive mask torch.where(keys, 0.0, -inf) of two constants. PyTorch never uses those values; the
# import selects (keep), never multiplies by a 0/1 mask (NaN * 0 is NaN), forward and backward.
class NonFiniteNotTaken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.q = torch.nn.Linear(6, 8), torch.nn.Linear(6, 6)

    def forward(self, x, target, keys):  # x [N, T, 6], target [N, T, 8] >= 0 (0: padding), keys [N, T] 0/1
        pred = F.softplus(self.a(x))
        mask = target > 0
        log_l2 = ((torch.log(target[mask]) - torch.log((pred * target)[mask])) ** 2).mean()  # 0 / 0 in log's rule
        h = self.a(x)
        safe_log = torch.where(h > 0, h.log(), h).mean() + h.log().masked_fill(h <= 0, 0.5).mean()
        # of Python numbers, which the TorchScript exporter writes in float64 (from_torch narrows it to f32)
        bias = torch.where(keys[:, None, :] > 0, 0.0, float("-inf"))
        scores = torch.softmax(self.q(x) @ x.transpose(1, 2) + bias, dim=-1)
        return log_l2 + 0.1 * safe_log + (scores @ x).pow(2).mean()


def nonfinite_not_taken():
    torch.manual_seed(29)
    model = NonFiniteNotTaken()
    x, target = torch.randn(batch, 5, 6), torch.rand(batch, 5, 8) + 0.1
    target[0, 3:], target[2, 4:], target[1, 0, :3] = 0.0, 0.0, 0.0
    keys = torch.ones(batch, 5)
    keys[0, 3:], keys[2, 4:] = 0.0, 0.0
    inputs = {"x": x, "target": target, "keys": keys}
    graph = tightfit.from_torch(model, tuple(inputs.values()), loss="output", input_names=list(inputs))
    return own_loss_everywhere(graph, model, inputs, 4, {"N": batch})


case("values that are not finite where nothing takes them (a log of padding selected away, where(h > 0, "
     "h.log(), h), masked_fill of a log, a -inf additive mask) train as PyTorch's", nonfinite_not_taken)
# torch.nan_to_num, torch.isfinite, torch.isinf and torch.isnan of a computed value (a log of targets with
# zeros and negatives: -inf and NaN): IsNaN and IsInf as masks composed of keep, clip and sign.
class NanGuards(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)

    def forward(self, x, target):  # target [N, T, 8] with zeros and negatives
        pred = self.a(x)
        log_target = torch.log(target)
        clean = torch.nan_to_num(log_target, nan=0.0, neginf=-5.0)
        finite = torch.isfinite(log_target)
        bad = torch.isnan(log_target) | torch.isinf(log_target)
        return ((pred - clean) ** 2).mean() + (pred * finite).mean() + bad.float().mean()


def nan_guards():
    torch.manual_seed(30)
    model = NanGuards()
    x, target = torch.randn(batch, 5, 6), torch.rand(batch, 5, 8) * 2
    target[0, 3:], target[2, 4:], target[1, 0, :3] = 0.0, 0.0, -0.5
    graph = tightfit.from_torch(model, (x, target), loss="output", input_names=["x", "target"])
    return own_loss_everywhere(graph, model, {"x": x, "target": target}, 4, {"N": batch})


case("torch.nan_to_num, isfinite, isinf and isnan of a log with -inf and NaN train as PyTorch's", nan_guards)
# The inverse trigonometric and hyperbolic functions of data (one op each): a CIoU box loss's aspect
# term (atan of width / height), a tanh-squashed policy's log-probability (atanh of its actions), the
# angle between embeddings (acos of a clamped cosine), asinh's symlog, and sinh, cosh, tan, asin and
# acosh of bounded activations (sinh to atanh through from_torch's own symbolics: torch's exporter has
# none for them).
class InverseAndHyperbolic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 8), torch.nn.Linear(6, 8)

    def forward(self, x, boxes):  # boxes [N, 4]: widths and heights > 0
        h, g = self.a(x), self.b(x)
        w = F.softplus(h[:, :4]) + 0.1
        aspect = (torch.atan(boxes[:, :2] / boxes[:, 2:]) - torch.atan(w[:, :2] / w[:, 2:])).pow(2).mean()
        action = torch.tanh(h) * 0.99
        log_prob = (torch.atanh(action) - torch.log(1 - action.pow(2) + 1e-6)).mean()
        cosine = F.cosine_similarity(h, g, dim=1).clamp(-0.99, 0.99)
        angle = torch.acos(cosine).mean() + torch.asin(cosine * 0.5).mean()
        bounded = torch.tanh(g)
        hyperbolic = (torch.sinh(bounded) * torch.cosh(bounded) + torch.tan(bounded)).mean()
        return aspect + log_prob + angle + 0.1 * hyperbolic + torch.asinh(10 * h).mean() + torch.acosh(
            1 + F.softplus(g)).mean()


def inverse_and_hyperbolic():
    torch.manual_seed(31)
    model = InverseAndHyperbolic()
    x, boxes = torch.randn(batch, 6), torch.rand(batch, 4) + 0.2
    graph = tightfit.from_torch(model, (x, boxes), loss="output", input_names=["x", "boxes"])
    ops = {node["op"] for node in json.loads(dumped(graph))["nodes"]}
    missing = {"atan", "atanh", "acos", "asin", "sinh", "cosh", "tan", "asinh", "acosh"} - ops
    if missing:
        return f"no {sorted(missing)} op in the graph: {sorted(ops)}", ""
    return own_loss_everywhere(graph, model, {"x": x, "boxes": boxes}, 4, {"N": batch})


case("atan, asin, acos, tan, sinh, cosh, asinh, acosh and atanh of data (a CIoU aspect term, a squashed "
     "policy's log-probability) train as PyTorch's", inverse_and_hyperbolic)
# torch.meshgrid(indexing="xy") (SpeechT5's guided attention masks; PyTorch 1.13's own export of it fails)
# and "ij" of data (meshgrids of constants fold before the export): grids of learned vectors, trained
# beside PyTorch.
class Grids(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(12 + 24 + 4, 5)

    def forward(self, x):
        h = self.a(x)
        u, v, w = torch.tanh(h.mean(0)), h[:, :3].mean(0), h[:, 1:3].mean(0)  # [4], [3], [2]
        rows, columns = torch.meshgrid(u, v, indexing="xy")  # [3, 4] each
        ij = torch.meshgrid(w, v, u, indexing="ij")[0] * torch.meshgrid(w, v, u, indexing="ij")[2]  # [2, 3, 4]
        grid = torch.cat([(rows - 2 * columns).pow(2).flatten(), ij.flatten()])  # [36]
        return self.head(torch.cat([torch.tanh(h[:, :1] * grid), h], 1))


def grids():
    torch.manual_seed(32)
    return beside_torch(Grids(), torch.randn(batch, 4), torch.randint(0, 5, (batch,)), ["concat"])[:2]


case("torch.meshgrid with indexing='xy' and 'ij' trains as PyTorch's", grids)


# torch.bernoulli(x, p) of a number p (SpeechT5's prenet "consistent dropout", drawn in training and
# inference): 1 with probability p from tightfit's own random numbers (a Dropout's mask), so checked by
# its frequency, not against PyTorch's draw: 0.3 of 6,000 elements within 4 standard deviations, a new
# draw each step, p = 0 and 1 exact; the gradient reaches the layer through the kept elements.
class Drawn(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.lin, self.p = torch.nn.Linear(4, 4), p

    def forward(self, x):  # x [N, 500, 4]
        h = self.lin(x)
        mask = torch.bernoulli(h[0], p=self.p)  # [500, 4], shared by the batch
        return torch.where(mask.unsqueeze(0).repeat(h.size(0), 1, 1) == 1, h * 0 + 1, h * 0)


def bernoulli_masks():
    torch.manual_seed(33)
    x = torch.randn(batch, 500, 4)
    zeros = np.zeros((batch, 500, 4), np.float32)
    seen = []
    for p in (0.3, 0.0, 1.0):
        graph = tightfit.from_torch(Drawn(p), (x,), loss="mse", input_names=["x"], verify=False)
        plan = tightfit.compile(graph, set={"N": batch}, optimizer="sgd", lr=1e-3)
        session = tightfit.Session(plan, seed=0)
        fractions = [session.step({"x": x.numpy(), "labels": zeros}) for _ in range(3)]  # mse = the mask's mean
        if p in (0.0, 1.0) and any(f != p for f in fractions):
            return f"p = {p}: the mask's fractions {fractions}", ""
        spread = 4 * (p * (1 - p) / 2000) ** 0.5
        if any(abs(f - p) > spread for f in fractions) or len(set(fractions)) < (3 if 0 < p < 1 else 1):
            return f"p = {p}: the mask's fractions {fractions} (a new draw each step, within {spread:.3f})", ""
        seen.append(f"p {p}: {', '.join(f'{f:.4f}' for f in fractions)}")
    return None, "; ".join(seen)


case("torch.bernoulli(x, p) draws 1 with probability p (a new mask each step; p 0 and 1 exact)", bernoulli_masks)

# torch.prod of data (a geometric mean, a survival curve): halves multiplied along each axis, so the
# gradient is the product rule's, zeros (a ReLU's) included; odd lengths and several axes.
class Products(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = torch.nn.Linear(6, 15), torch.nn.Linear(3 + 1 + 5 + 1, 5)

    def forward(self, x):
        h = self.a(x)
        survival = torch.sigmoid(h[:, :9]).reshape(-1, 3, 3).prod(2)  # [N, 3]
        gated = torch.relu(h[:, 9:14]).prod(1, keepdim=True)  # some factors exactly 0
        plane = (1 + 0.1 * torch.tanh(h[:, :10])).reshape(-1, 2, 5)
        return self.head(torch.cat([survival, gated, plane.prod(1), torch.prod(plane.flatten(1), 1, True)], 1))


def products():
    torch.manual_seed(34)
    return beside_torch(Products(), torch.randn(batch, 6), torch.randint(0, 5, (batch,)), ["mul"])[:2]


case("torch.prod of data along odd and even axes, through exact zeros, trains as PyTorch's", products)




class Bags(torch.nn.Module):
    """nn.EmbeddingBag of bags of one length (a 2-d input, no offsets): "sum", "mean" and "max" leaving out
    padding_idx (a bag of padding only gives zeros), "mean" of every entry, "sum" by per_sample_weights.
    torch writes a Loop over the bags, which the importer refuses: from_torch writes lookups reduced over
    the bag."""

    def __init__(self):
        super().__init__()
        self.bags = torch.nn.ModuleList([torch.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=0)
                                         for mode in ("sum", "mean", "max")])
        self.plain, self.weighted = torch.nn.EmbeddingBag(10, 4), torch.nn.EmbeddingBag(10, 4, mode="sum")
        self.head = torch.nn.Linear(20, 5)

    def forward(self, ids, weights):
        pooled = [bag(ids) for bag in self.bags] + [self.plain(ids), self.weighted(ids, per_sample_weights=weights)]
        return self.head(torch.cat(pooled, 1))


def embedding_bags():
    torch.manual_seed(35)
    ids = torch.tensor([[1, 2, 0, 3], [0, 0, 0, 0], [4, 4, 9, 0], [7, 8, 8, 1]])
    inputs = {"ids": ids, "weights": torch.rand(batch, 4)}
    model = Bags()
    graph = tightfit.from_torch(model, tuple(inputs.values()), loss="cross_entropy", input_names=list(inputs))
    losses, expected, worst = adamw_both(graph, model, None, torch.randint(0, 5, (batch,)), 5, inputs=inputs)
    seen = f"5 AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst {worst:.1e}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


def embedding_max_norm_refused():
    """An embedding with max_norm rescales the rows it looks up in place at every forward pass: the first
    loss would agree and training would not. Refused, the module named; F.embedding's too."""
    problems, said = [], []
    for model in (torch.nn.Sequential(torch.nn.Embedding(10, 4, max_norm=1.0), torch.nn.Flatten(),
                                      torch.nn.Linear(12, 5)),):
        try:
            tightfit.from_torch(model, (torch.randint(0, 10, (batch, 3)),), loss="cross_entropy")
            problems.append("nn.Embedding(max_norm=1.0) imported")
        except tightfit.TightfitError as error:
            said.append(str(error)[:120])
            if "'0'" not in str(error) or "max_norm" not in str(error):
                problems.append(f"the message names no module or max_norm: {error}")

    class Functional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table, self.head = torch.nn.Parameter(torch.randn(10, 4)), torch.nn.Linear(12, 5)

        def forward(self, ids):
            return self.head(F.embedding(ids, self.table, max_norm=1.0).flatten(1))

    try:
        tightfit.from_torch(Functional(), (torch.randint(0, 10, (batch, 3)),), loss="cross_entropy")
        problems.append("F.embedding(max_norm=1.0) imported")
    except tightfit.TightfitError as error:
        said.append(str(error)[:120])
        if "max_norm" not in str(error):
            problems.append(f"the message names no max_norm: {error}")
    return ("; ".join(problems) or None), " | ".join(said)


case("nn.EmbeddingBag of a 2-d input (sum, mean, max; padding_idx, an empty bag, per_sample_weights) trains as "
     "PyTorch's", embedding_bags)
case("an embedding with max_norm (in-place renormalisation of its weights) is refused by name", embedding_max_norm_refused)
finish("from_torch_operators")
