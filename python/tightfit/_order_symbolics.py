"""Symbolics for PyTorch ops its TorchScript exporter (1.13 and 2.x alike) has none for, written as the
ONNX operators of PyTorch's formula, which the importer reads and autodiff differentiates as PyTorch's
backward does:

- order statistics by ONNX's TopK (the importer's: k rounds of an argmax along an axis of fixed size, at
  most 128, the gradient reaching the chosen elements): torch.kthvalue, torch.median (the lower of the two
  middles, as PyTorch's; of every element or along a dim), torch.quantile with q known when exporting
  (linear interpolation between the sorted values at q (n - 1));
- lookups: torch.take_along_dim (GatherElements), torch.searchsorted with a sorted sequence of any rank
  (the count of its elements below each value, or at most it with right=True; integer results, no
  gradient);
- running and windowed forms: torch.logcumsumexp (a ReduceLogSumExp over a lower triangle: no underflow
  for early terms far below later ones, as a max-shifted cumsum would have), torch.cummax and cummin (a
  ReduceMax/Min over the triangle; the index of the last extreme as PyTorch's), torch.diff (n, prepend,
  append), torch.trapezoid with a spacing dx;
- layout: Tensor.unflatten (under 1.13), torch.rot90, F.channel_shuffle, F.affine_grid (2-d and 3-d, align_corners either way: the
  normalised base grid times theta);
- reductions: torch.nanmean, torch.renorm (each slice along dim scaled to at most maxnorm, as PyTorch's
  with its 1e-7), F.pdist (the upper triangle of the pairwise distances, of a fixed number of rows).
"""

from . import _symbolic_registry
from ._lib import TightfitError

# The finite stand-in for -inf where a triangle masks a term out (a product with an infinity would give NaN
# gradients); a log-sum-exp or max over it never reaches it while one term is finite.
_FAR = 3.0e38


def register(torch, opset, helper, registered, symbolic_of):
    """Registers the symbolics above at every opset from 9 to `opset` (torch has none for them); returns the
    function that removes them."""

    w = _symbolic_registry.Writer(torch, helper)
    float_type, const, ints, absent, reduced = w.float_type, w.const, w.ints, w.absent, w.reduced

    def rank_of(x, what):
        rank = helper._get_tensor_rank(x)
        if rank is None:
            raise TightfitError(f"from_torch: {what} of a tensor of unknown rank is not supported")
        return rank

    def axis_of(dim, rank):
        axis = helper._get_const(dim, "i", "dim")
        return axis + rank if axis < 0 else axis

    def size_of(x, axis, what):
        size = helper._get_tensor_dim_size(x, axis)
        if size is None:
            raise TightfitError(f"from_torch: {what} along an axis whose size is not known when exporting (give "
                                "dynamic_batch=False, or fixed sizes)")
        return size

    def flat(g, x):
        return g.op("Reshape", x, ints(g, [-1]))

    def sliced(g, x, axis, start, end):
        return g.op("Slice", x, ints(g, [start]), ints(g, [end]), ints(g, [axis]))

    def fixed_sizes(size, count, what):
        """The last `count` entries of a size list (the batch before them may be computed) as numbers."""
        values = helper._maybe_get_const(size, "is")
        if not helper._is_value(values):
            return list(values)[-count:]
        entries = helper._unpack_list(size)[-count:]
        numbers = [helper._maybe_get_const(v, "i") for v in entries]
        if any(helper._is_value(v) for v in numbers):
            raise TightfitError(f"from_torch: {what} with spatial sizes computed in the graph is not supported")
        return [int(v) for v in numbers]

    # ---- order statistics ----

    def kth(g, x, k, axis, keep):
        """The k-th smallest along axis (1-based; k a number, or a 1-d int64 tensor the importer folds) and its
        index."""
        count = ints(g, [k]) if isinstance(k, int) else k
        values, indices = g.op("TopK", x, count, axis_i=axis, largest_i=0, sorted_i=1, outputs=2)
        last = g.op("Sub", count, ints(g, [1]))
        values, indices = (g.op("Slice", v, last, count, ints(g, [axis])) for v in (values, indices))
        if not keep:
            values, indices = helper._squeeze_helper(g, values, [axis]), helper._squeeze_helper(g, indices, [axis])
        return values, indices

    def kthvalue(g, x, k, dim=None, keepdim=None):
        rank = rank_of(x, "torch.kthvalue")
        axis = rank - 1 if absent(dim) else axis_of(dim, rank)
        keep = not absent(keepdim) and bool(helper._get_const(keepdim, "b", "keepdim"))
        return kth(g, x, helper._get_const(k, "i", "k"), axis, keep)

    def middle(g, x, axis):
        """(n + 1) // 2 for the size n of x's axis: the lower median's rank, from Shape (folded at import)."""
        n = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
        return g.op("Div", g.op("Add", n, ints(g, [1])), ints(g, [2]))

    def median(g, x, dim=None, keepdim=None):
        if absent(dim):  # of every element: one value
            x = flat(g, x)
            return kth(g, x, middle(g, x, 0), 0, False)[0]
        rank = rank_of(x, "torch.median")
        axis = axis_of(dim, rank)
        keep = not absent(keepdim) and bool(helper._get_const(keepdim, "b", "keepdim"))
        return kth(g, x, middle(g, x, axis), axis, keep)

    def quantile(g, x, q, dim=None, keepdim=None, interpolation=None):
        mode = "linear" if absent(interpolation) else helper._get_const(interpolation, "s", "interpolation")
        if mode != "linear":
            raise TightfitError(f"from_torch: torch.quantile with interpolation={mode!r} is not supported (linear)")
        levels = helper._maybe_get_const(q, "t")
        if helper._is_value(levels):
            raise TightfitError("from_torch: torch.quantile with q computed in the graph is not supported (a known q)")
        levels = torch.as_tensor(levels, dtype=torch.float32)
        if absent(dim):
            x, axis = flat(g, x), 0
        else:
            axis = axis_of(dim, rank_of(x, "torch.quantile"))
        rank = rank_of(x, "torch.quantile")
        # the sorted values at q (n - 1), n the axis's size from Shape: the importer folds the positions
        n = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
        ordered = g.op("TopK", x, n, axis_i=axis, largest_i=0, sorted_i=1, outputs=2)[0]
        last = g.op("Cast", g.op("Sub", n, ints(g, [1])), to_i=1)
        position = g.op("Mul", g.op("Constant", value_t=levels.reshape(-1)), last)
        low = g.op("Floor", position)
        shape = [1] * rank
        shape[axis] = -1
        weight = g.op("Reshape", g.op("Sub", position, low), ints(g, shape))
        if float_type(x) != torch.float32:
            weight = g.op("Cast", weight, to_i={torch.float16: 10, torch.bfloat16: 16, torch.float64: 11}[float_type(x)])
        a = g.op("Gather", ordered, g.op("Cast", low, to_i=7), axis_i=axis)
        b = g.op("Gather", ordered, g.op("Cast", g.op("Ceil", position), to_i=7), axis_i=axis)
        out = g.op("Add", a, g.op("Mul", g.op("Sub", b, a), weight))  # q along axis
        keep = not absent(keepdim) and bool(helper._get_const(keepdim, "b", "keepdim"))
        if levels.dim() == 0:
            return out if keep and not absent(dim) else helper._squeeze_helper(g, out, [axis])
        # PyTorch puts q's axis first
        out = g.op("Transpose", out, perm_i=[axis] + [d for d in range(rank) if d != axis])
        return helper._unsqueeze_helper(g, out, [axis + 1]) if keep and not absent(dim) else out

    # ---- lookups ----

    def take_along_dim(g, x, indices, dim=None):
        if absent(dim):
            return g.op("GatherElements", flat(g, x), flat(g, indices), axis_i=0)
        return g.op("GatherElements", x, indices, axis_i=axis_of(dim, rank_of(x, "torch.take_along_dim")))

    def searchsorted(g, sequence, values, out_int32=None, right=None, side=None, sorter=None):
        if not absent(sorter):
            raise TightfitError("from_torch: torch.searchsorted with a sorter is not supported")
        upper = (not absent(right) and bool(helper._get_const(right, "b", "right"))) or \
            (not absent(side) and helper._get_const(side, "s", "side") == "right")
        seq_rank = rank_of(sequence, "torch.searchsorted")
        if helper._get_tensor_rank(values) in (None, 0):
            raise TightfitError("from_torch: torch.searchsorted of a scalar value is not supported")
        spread_values = helper._unsqueeze_helper(g, values, [helper._get_tensor_rank(values)])
        spread_sequence = sequence if seq_rank == 1 else helper._unsqueeze_helper(g, sequence, [seq_rank - 1])
        gap = g.op("Sub", spread_values, spread_sequence)  # value - boundary, [..., M, S]
        below = g.op("Not", g.op("Less", gap, const(g, gap, 0.0))) if upper else g.op("Greater", gap, const(g, gap, 0.0))
        count = reduced(g, "ReduceSum", g.op("Cast", below, to_i=1), [-1], False)
        as_int32 = not absent(out_int32) and bool(helper._get_const(out_int32, "b", "out_int32"))
        return g.op("Cast", count, to_i=6 if as_int32 else 7)

    # ---- running and windowed forms ----

    def triangle(g, x, axis, rank):
        """x along axis spread over a lower triangle: [..., L (i), ..., L (j)] holding x_j where j <= i and
        -FAR elsewhere (j the new last axis). The triangle is Trilu of ones of L x L, L from Shape: the
        importer folds it."""
        n = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
        ones = g.op("ConstantOfShape", g.op("Concat", n, n, axis_i=0), value_t=torch.tensor([1.0], dtype=float_type(x)))
        shape = g.op("Concat", ints(g, [1] * axis), n, ints(g, [1] * (rank - axis - 1)), n, axis_i=0)
        mask = g.op("Reshape", g.op("Trilu", ones, upper_i=0), shape)
        far = g.op("Mul", g.op("Sub", mask, const(g, x, 1.0)), const(g, x, _FAR))
        spread = helper._unsqueeze_helper(g, x, [axis])  # [..., 1, L, ...]: j at axis + 1
        perm = list(range(rank + 1))
        perm.remove(axis + 1)
        perm.append(axis + 1)  # j last
        return g.op("Add", g.op("Mul", g.op("Transpose", spread, perm_i=perm), mask), far)

    def logcumsumexp(g, x, dim):
        rank = rank_of(x, "torch.logcumsumexp")
        axis = axis_of(dim, rank)
        return reduced(g, "ReduceLogSumExp", triangle(g, x, axis, rank), [rank], False)

    def running(largest):
        name = "torch.cummax" if largest else "torch.cummin"

        def symbolic(g, x, dim):
            rank = rank_of(x, name)
            axis = axis_of(dim, rank)
            # the triangle's fill is -FAR: the minimum of x is minus the maximum of -x
            masked = triangle(g, x if largest else g.op("Neg", x), axis, rank)
            values = reduced(g, "ReduceMax", masked, [rank], False)
            # the last position holding the extreme, as PyTorch's
            indices = g.op("ArgMax", masked, axis_i=rank, keepdims_i=0, select_last_index_i=1)
            return (values if largest else g.op("Neg", values)), indices
        return symbolic

    def diff(g, x, n=None, dim=None, prepend=None, append=None):
        rank = rank_of(x, "torch.diff")
        axis = rank - 1 if absent(dim) else axis_of(dim, rank)
        parts = [p for p in (prepend, x, append) if not absent(p)]
        out = g.op("Concat", *parts, axis_i=axis) if len(parts) > 1 else x
        for _ in range(1 if absent(n) else helper._get_const(n, "i", "n")):
            out = g.op("Sub", sliced(g, out, axis, 1, 2 ** 62), sliced(g, out, axis, 0, -1))
        return out

    def trapezoid(g, y, spacing=None, dim=None):
        if not absent(spacing) and helper._is_value(helper._maybe_get_const(spacing, "f")) \
                and helper._get_tensor_rank(spacing) not in (None, 0):
            raise TightfitError("from_torch: torch.trapezoid with sample points x is not supported (a spacing dx)")
        dx = 1.0 if absent(spacing) else float(helper._get_const(spacing, "f", "dx"))
        rank = rank_of(y, "torch.trapezoid")
        axis = rank - 1 if absent(dim) else axis_of(dim, rank)
        pairs = g.op("Add", sliced(g, y, axis, 1, 2 ** 62), sliced(g, y, axis, 0, -1))
        return g.op("Mul", reduced(g, "ReduceSum", pairs, [axis], False), const(g, y, dx / 2))

    # ---- layout ----

    def flipped(g, x, axis):
        return g.op("Slice", x, ints(g, [-1]), ints(g, [-(2 ** 62)]), ints(g, [axis]), ints(g, [-1]))

    def rot90(g, x, k=None, dims=None):
        rank = rank_of(x, "torch.rot90")
        turns = (1 if absent(k) else helper._get_const(k, "i", "k")) % 4
        a, b = [d + rank if d < 0 else d for d in ([0, 1] if absent(dims) else helper._get_const(dims, "is", "dims"))]
        perm = list(range(rank))
        perm[a], perm[b] = b, a
        if turns == 1:
            return g.op("Transpose", flipped(g, x, b), perm_i=perm)
        if turns == 2:
            return flipped(g, flipped(g, x, a), b)
        if turns == 3:
            return g.op("Transpose", flipped(g, x, a), perm_i=perm)
        return x

    def unflatten(g, x, dim, sizes):
        """Tensor.unflatten (1.13 has no symbolic): x's shape with axis dim replaced by `sizes` (-1 allowed)."""
        rank = rank_of(x, "Tensor.unflatten")
        axis = axis_of(dim, rank)
        known = helper._get_tensor_sizes(x)
        wanted = list(helper._get_const(sizes, "is", "sizes"))
        if known[axis] is not None and -1 in wanted:  # resolve it: the target below may hold one -1 only
            rest = 1
            for size in wanted:
                rest *= size if size != -1 else 1
            wanted[wanted.index(-1)] = known[axis] // rest
        after = known[axis + 1:]
        if axis == 0 or -1 in wanted or any(size is None for size in after):  # the sizes from Shape
            shape = g.op("Shape", x)
            parts = [sliced(g, shape, 0, 0, axis)] if axis else []
            parts += [ints(g, wanted), sliced(g, shape, 0, axis + 1, rank)]
            return g.op("Reshape", x, g.op("Concat", *parts, axis_i=0))
        # the batch -1, the axes between copied (0), the rest known: the export's shape inference keeps them
        return g.op("Reshape", x, ints(g, [-1] + [0] * (axis - 1) + wanted + after))

    def channel_shuffle(g, x, groups):
        rank = rank_of(x, "F.channel_shuffle")
        n = helper._get_const(groups, "i", "groups")
        shape = g.op("Shape", x)
        batch, channels, rest = sliced(g, shape, 0, 0, 1), sliced(g, shape, 0, 1, 2), sliced(g, shape, 0, 2, rank)
        per_group = g.op("Div", channels, ints(g, [n]))
        split = g.op("Reshape", x, g.op("Concat", batch, ints(g, [n]), per_group, rest, axis_i=0))
        perm = [0, 2, 1] + list(range(3, rank + 1))
        return g.op("Reshape", g.op("Transpose", split, perm_i=perm), shape)

    def affine_grid(g, theta, size, align_corners):
        rank = len(helper._unpack_list(size)) if helper._is_value(helper._maybe_get_const(size, "is")) else \
            len(helper._get_const(size, "is", "size"))
        corners = bool(helper._get_const(align_corners, "b", "align_corners"))
        spatial = fixed_sizes(size, rank - 2, "F.affine_grid")  # (H, W) or (D, H, W)

        def line(n):
            if n == 1:
                return torch.zeros(1, dtype=torch.float64)
            steps = torch.linspace(-1, 1, n, dtype=torch.float64)
            return steps if corners else steps * (n - 1) / n
        axes = torch.meshgrid(*[line(n) for n in spatial], indexing="ij")
        # (x, y[, z], 1) per point: x runs along the last axis (W), as PyTorch's
        base = torch.stack([a.reshape(-1) for a in reversed(axes)] + [torch.ones(axes[0].numel(), dtype=torch.float64)], 1)
        grid = g.op("MatMul", g.op("Constant", value_t=base.to(float_type(theta))), g.op("Transpose", theta, perm_i=[0, 2, 1]))
        return g.op("Reshape", grid, ints(g, [-1] + list(spatial) + [len(spatial)]))

    # ---- reductions ----

    def nanmean(g, x, dim=None, keepdim=None, dtype=None):
        rank = rank_of(x, "torch.nanmean")
        dims = list(range(rank)) if absent(dim) else helper._get_const(dim, "is", "dim")
        dims = [dims] if isinstance(dims, int) else [d + rank if d < 0 else d for d in dims]
        keep = not absent(keepdim) and bool(helper._get_const(keepdim, "b", "keepdim"))
        nan = g.op("IsNaN", x)
        present = g.op("Cast", g.op("Not", nan), to_i=1)
        total = reduced(g, "ReduceSum", g.op("Where", nan, const(g, x, 0.0), x), dims, keep)
        return g.op("Div", total, reduced(g, "ReduceSum", present, dims, keep))

    def renorm(g, x, p, dim, maxnorm):
        rank = rank_of(x, "torch.renorm")
        axis = axis_of(dim, rank)
        power = float(helper._get_const(p, "f", "p"))
        limit = float(helper._get_const(maxnorm, "f", "maxnorm"))
        others = [d for d in range(rank) if d != axis]
        if power == 2.0:
            norm = reduced(g, "ReduceL2", x, others, True)
        elif power == 1.0:
            norm = reduced(g, "ReduceL1", x, others, True)
        else:
            raise TightfitError(f"from_torch: torch.renorm with p = {power:g} is not supported (1 or 2)")
        over = g.op("Greater", norm, const(g, x, limit))
        scale = g.op("Where", over, g.op("Div", const(g, x, limit), g.op("Add", norm, const(g, x, 1e-7))),
                     const(g, x, 1.0))
        return g.op("Mul", x, scale)

    def pdist(g, x, p=None):
        power = 2.0 if absent(p) else float(helper._get_const(p, "f", "p"))
        if power not in (1.0, 2.0):
            raise TightfitError(f"from_torch: F.pdist with p = {power:g} is not supported (1 or 2)")
        n = size_of(x, 0, "F.pdist")
        pairs = g.op("Sub", helper._unsqueeze_helper(g, x, [1]), helper._unsqueeze_helper(g, x, [0]))  # [n, n, M]
        distances = reduced(g, "ReduceL2" if power == 2.0 else "ReduceL1", pairs, [2], False)
        upper = [i * n + j for i in range(n) for j in range(i + 1, n)]  # the pairs i < j in row order
        return g.op("Gather", flat(g, distances), ints(g, upper), axis_i=0)

    symbolics = {"kthvalue": kthvalue, "median": median, "quantile": quantile, "take_along_dim": take_along_dim,
                 "searchsorted": searchsorted,
                 "logcumsumexp": logcumsumexp, "cummax": running(True), "cummin": running(False), "diff": diff,
                 "trapezoid": trapezoid, "rot90": rot90, "channel_shuffle": channel_shuffle,
                 "affine_grid_generator": affine_grid, "nanmean": nanmean, "renorm": renorm, "pdist": pdist}
    if not registered("aten::unflatten", opset):  # 2.x has its own
        symbolics["unflatten"] = unflatten
    every = range(9, max(opset, 17) + 1)
    return _symbolic_registry.register(torch, {name: (symbolic, every) for name, symbolic in symbolics.items()})
