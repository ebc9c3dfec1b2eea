"""Symbolics for PyTorch ops its TorchScript exporter has none for (1.13, and 2.x where said), written as
the ONNX operators of PyTorch's formula, which the importer reads and autodiff differentiates as PyTorch's
backward does:

- torch.tile and broadcast_to (1.13 has none: ViViT's);
- elementwise: torch.frac (x - trunc(x)), torch.atan2 (1.13; atan(y / x) turned into its quadrant, as
  2.x's own), torch.logaddexp and logaddexp2 (a + softplus(b - a): no overflow, the gradient
  sigmoid(a - b)), torch.sinc (1 at 0, its gradient 0 there), torch.signbit (-0.0 included),
  torch.special.entr, torch.isclose,
  torch.addcdiv, torch.nansum (NaNs summed as 0, their gradient 0);
- placements: torch.trace, torch.fft.fftshift and ifftshift (a roll by half of each axis, of any size),
  torch.slice_scatter, select_scatter and diagonal_scatter (src placed by a gather along the axis, or a
  one-hot product for a diagonal, where a mask known when exporting says; the input elsewhere);
- Tensor.index_fill and index_copy by an index known when exporting, in place of torch's (which scatters to
  positions it computes from Shape: data the importer refuses);
- F.multi_margin_loss (p 1 or 2, a margin, class weights, each reduction);
- F.fold (col2im: ONNX's Col2Im came at opset 18) as a transposed convolution by a one-hot kernel.

Sizes along the axes these place or roll must be known when exporting; a TightfitError says so otherwise.
"""
import math

from . import _symbolic_registry
from ._lib import TightfitError

_END = 2**63 - 1  # a Slice's end past any axis


def register(torch, opset, helper, registered, symbolic_of):
    """Registers the symbolics above where torch has none at `opset` (every opset from 9 to it); returns the
    function that removes them."""

    w = _symbolic_registry.Writer(torch, helper)
    float_type, const, ints, absent, reduced = w.float_type, w.const, w.ints, w.absent, w.reduced

    def sizes_of(x, what):
        sizes = helper._get_tensor_sizes(x)
        if sizes is None or any(s is None for s in sizes):
            raise TightfitError(f"from_torch: {what} of a tensor whose sizes are not known when exporting (give "
                                f"dynamic_batch=False, or fixed sizes)")
        return [int(s) for s in sizes]

    def fixed_axis(x, dim, what):
        """The axis `dim` (a constant, negative from the end) of x and its size, which must be known."""
        rank = helper._get_tensor_rank(x)
        if rank is None:
            raise TightfitError(f"from_torch: {what} of a tensor of unknown rank is not supported")
        axis = helper._get_const(dim, "i", "dim") if not isinstance(dim, int) else dim
        axis = axis + rank if axis < 0 else axis
        size = helper._get_tensor_dim_size(x, axis)
        if size is None:
            raise TightfitError(f"from_torch: {what} along an axis whose size is not known when exporting (give "
                                f"dynamic_batch=False, or fixed sizes)")
        return axis, int(size), rank

    def trunc(g, x):
        return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Abs", x)))

    def frac(g, x):
        return g.op("Sub", x, trunc(g, x))

    def atan2(g, y, x):
        return quadrant_atan(torch, g, y, x, float_type(y))

    def logaddexp(g, a, b):
        return g.op("Add", a, g.op("Softplus", g.op("Sub", b, a)))

    def logaddexp2(g, a, b):
        ln2 = math.log(2.0)
        scaled = logaddexp(g, g.op("Mul", a, const(g, a, ln2)), g.op("Mul", b, const(g, b, ln2)))
        return g.op("Div", scaled, const(g, a, ln2))

    def sinc(g, x):
        zero = g.op("Equal", x, const(g, x, 0.0))
        angle = g.op("Mul", x, const(g, x, math.pi))
        safe = g.op("Where", zero, const(g, x, 1.0), angle)  # no 0 / 0 where the other branch is taken
        return g.op("Where", zero, const(g, x, 1.0), g.op("Div", g.op("Sin", safe), safe))

    def signbit(g, x):  # 1 / -0.0 is -inf: the sign bit of a zero too
        return g.op("Less", g.op("Div", const(g, x, 1.0), x), const(g, x, 0.0))

    def entr(g, x):
        """torch.special.entr: -x log x above 0, 0 at 0, -inf below (its gradient 0 there, no NaN)."""
        positive = g.op("Greater", x, const(g, x, 0.0))
        safe = g.op("Where", positive, x, const(g, x, 1.0))
        inside = g.op("Neg", g.op("Mul", safe, g.op("Log", safe)))
        below = g.op("Where", g.op("Less", x, const(g, x, 0.0)), const(g, x, float("-inf")), const(g, x, 0.0))
        return g.op("Where", positive, inside, below)

    def isclose(g, a, b, rtol=None, atol=None, equal_nan=None):
        """|a - b| <= atol + rtol |b|, or a == b (infinities), or both NaN where equal_nan."""
        relative = 1e-5 if absent(rtol) else float(helper._get_const(rtol, "f", "rtol"))
        absolute = 1e-8 if absent(atol) else float(helper._get_const(atol, "f", "atol"))
        bound = g.op("Add", const(g, b, absolute), g.op("Mul", g.op("Abs", b), const(g, b, relative)))
        close = g.op("Or", g.op("Equal", a, b), g.op("LessOrEqual", g.op("Abs", g.op("Sub", a, b)), bound))
        if not absent(equal_nan) and helper._get_const(equal_nan, "b", "equal_nan"):
            close = g.op("Or", close, g.op("And", g.op("IsNaN", a), g.op("IsNaN", b)))
        return close

    def addcdiv(g, x, t1, t2, value=None):
        scale = 1.0 if absent(value) else float(helper._get_const(value, "f", "value"))
        return g.op("Add", x, g.op("Mul", g.op("Div", t1, t2), const(g, x, scale)))

    def nansum(g, x, dim=None, keepdim=None, dtype=None):
        if not absent(dtype):
            raise TightfitError("from_torch: torch.nansum with a dtype is not supported")
        cleared = g.op("Where", g.op("IsNaN", x), const(g, x, 0.0), x)
        keep = False if absent(keepdim) else bool(helper._get_const(keepdim, "b", "keepdim"))
        axes = [] if absent(dim) else helper._get_const(dim, "is", "dim")
        rank = helper._get_tensor_rank(x)
        if not axes:
            if rank is None:
                raise TightfitError("from_torch: torch.nansum of a tensor of unknown rank is not supported")
            axes = list(range(rank))
        return reduced(g, "ReduceSum", cleared, [a + rank if a < 0 else a for a in axes], keep)

    def trace(g, x):
        rows, columns = sizes_of(x, "torch.trace")
        eye = g.op("Constant", value_t=torch.eye(rows, columns, dtype=float_type(x)))
        return reduced(g, "ReduceSum", g.op("Mul", x, eye), [0, 1], False)

    def shifted_half(g, x, axis, inverse):
        """x rolled along `axis` by half its size n (n // 2; back by it where `inverse`): x[cut:] then x[:cut]
        with cut n - n // 2 (n // 2), n read from Shape where the exporter lost it (the importer folds it)."""
        size = helper._get_tensor_dim_size(x, axis)
        if size is not None:
            cut = ints(g, [int(size) // 2 if inverse else int(size) - int(size) // 2])
        else:
            n = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
            half = g.op("Div", n, ints(g, [2]))
            cut = half if inverse else g.op("Sub", n, half)
        head = g.op("Slice", x, cut, ints(g, [_END]), ints(g, [axis]))
        tail = g.op("Slice", x, ints(g, [0]), cut, ints(g, [axis]))
        return g.op("Concat", head, tail, axis_i=axis)

    def shift(inverse):
        def symbolic(g, x, dim=None):
            rank = helper._get_tensor_rank(x)
            if rank is None:
                raise TightfitError("from_torch: torch.fft.fftshift of a tensor of unknown rank is not supported")
            for d in range(rank) if absent(dim) else helper._get_const(dim, "is", "dim"):
                x = shifted_half(g, x, d % rank, inverse)
            return x
        return symbolic

    def placed(g, x, src, axis, size, positions, what):
        """x with src's slices along `axis` at `positions` (one per src slice, in order): src gathered to
        x's positions (the others read src's first slice, masked away), where a known mask says."""
        at = [0] * size
        mask = [False] * size
        for i, p in enumerate(positions):
            at[p], mask[p] = i, True
        rank = helper._get_tensor_rank(x)
        shape = [1] * rank
        shape[axis] = size
        spread = g.op("Gather", src, ints(g, at), axis_i=axis)
        where = g.op("Constant", value_t=torch.tensor(mask).reshape(shape))
        return g.op("Where", where, spread, x)

    def slice_scatter(g, x, src, dim=0, start=None, end=None, step=1):
        axis, size, _ = fixed_axis(x, dim, "torch.slice_scatter")
        first = 0 if absent(start) else helper._get_const(start, "i", "start")
        last = size if absent(end) else helper._get_const(end, "i", "end")
        stride = 1 if absent(step) else helper._get_const(step, "i", "step")
        return placed(g, x, src, axis, size, list(range(size))[slice(first, last, stride)], "torch.slice_scatter")

    def select_scatter(g, x, src, dim, index):
        axis, size, _ = fixed_axis(x, dim, "torch.select_scatter")
        at = helper._get_const(index, "i", "index")
        return placed(g, x, helper._unsqueeze_helper(g, src, [axis]), axis, size, [at % size],
                      "torch.select_scatter")

    def diagonal_scatter(g, x, src, offset=0, dim1=0, dim2=1):
        k = 0 if absent(offset) else helper._get_const(offset, "i", "offset")
        a, n1, rank = fixed_axis(x, dim1, "torch.diagonal_scatter")
        b, n2, _ = fixed_axis(x, dim2, "torch.diagonal_scatter")
        cells = [(i, i + k) for i in range(n1) if 0 <= i + k < n2]
        if not cells:
            return x
        # src [..., L] (x without axes a and b, the diagonal last) times a one-hot [L, n1 n2]: [..., n1, n2]
        onehot = torch.zeros(len(cells), n1 * n2, dtype=float_type(x))
        mask = torch.zeros(n1 * n2, dtype=torch.bool)
        for i, (r, c) in enumerate(cells):
            onehot[i, r * n2 + c], mask[r * n2 + c] = 1.0, True
        rest = [d for d in range(rank) if d not in (a, b)]
        spread = g.op("MatMul", src, g.op("Constant", value_t=onehot))
        kept = g.op("Slice", g.op("Shape", src), ints(g, [0]), ints(g, [-1]), ints(g, [0]))  # src's but the last
        spread = g.op("Reshape", spread, g.op("Concat", kept, ints(g, [n1, n2]), axis_i=0))
        order = rest + [a, b]  # the axes of spread, as x's
        spread = g.op("Transpose", spread, perm_i=[order.index(d) for d in range(rank)])
        shape = [1] * rank
        shape[a], shape[b] = n1, n2
        cells_mask = mask.reshape(n1, n2) if a < b else mask.reshape(n1, n2).t()  # in x's order of the two axes
        return g.op("Where", g.op("Constant", value_t=cells_mask.reshape(shape)), spread, x)

    def multi_margin_loss(g, x, target, p=1, margin=1, weight=None, reduction=1):
        """mean over j != y of max(0, margin - x[y] + x[j])^p (times weight[y]) per row; x [N, C] or [C]."""
        power = helper._get_const(p, "i", "p")
        if power not in (1, 2):
            raise TightfitError(f"from_torch: F.multi_margin_loss with p = {power} is not supported (1 or 2)")
        rank = helper._get_tensor_rank(x)
        if rank not in (1, 2):
            raise TightfitError("from_torch: F.multi_margin_loss of a tensor of rank other than 1 or 2")
        _, classes, _ = fixed_axis(x, -1, "F.multi_margin_loss")
        rows = x if rank == 2 else helper._unsqueeze_helper(g, x, [0])  # [N, C]
        labels = g.op("Reshape", target, ints(g, [-1, 1]))  # [N, 1]
        picked = g.op("GatherElements", rows, labels, axis_i=1)  # x[y]
        others = g.op("OneHot", g.op("Reshape", target, ints(g, [-1])), ints(g, [classes]),
                      g.op("Constant", value_t=torch.tensor([1.0, 0.0], dtype=float_type(x))), axis_i=-1)  # j != y
        slack = const(g, x, float(helper._get_const(margin, "f", "margin")))
        gap = g.op("Relu", g.op("Add", g.op("Sub", rows, picked), slack))
        if power == 2:
            gap = g.op("Mul", gap, gap)
        if not absent(weight):
            gap = g.op("Mul", gap, g.op("Gather", weight, labels, axis_i=0))  # weight[y]: [N, 1]
        summed = reduced(g, "ReduceSum", g.op("Mul", others, gap), [1], False)
        per_row = g.op("Div", summed, const(g, x, float(classes)))  # [N]
        how = helper._get_const(reduction, "i", "reduction")
        if how == 0:
            return helper._squeeze_helper(g, per_row, [0]) if rank == 1 else per_row
        return reduced(g, "ReduceMean" if how == 1 else "ReduceSum", per_row, [0], False)

    def col2im(g, x, output_size, kernel_size, dilation, padding, stride):
        """F.fold (x [N, C kh kw, L] summed into [N, C, H, W]) as the transposed convolution of each channel's
        patches ([N C, kh kw, Lh, Lw]) by a one-hot kernel: each patch element added where unfold took it; then
        zeros after the last block's reach, and the padding cut (ONNX's Col2Im came at opset 18; the importer has
        no Col2Im). H and W may be traced from shapes (VOLO's x.shape): the block counts, the zeros and the cuts
        are shape arithmetic, which the importer folds."""
        (kh, kw), (dh, dw), (ph, pw), (sh, sw) = [helper._get_const(v, "is", what) for v, what in (
            (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"), (stride, "stride"))]
        if helper._is_packed_list(output_size):
            sizes = [g.op("Reshape", v, ints(g, [1])) for v in helper._unpack_list(output_size)]
        else:
            sizes = [ints(g, [int(v)]) for v in helper._get_const(output_size, "is", "output_size")]
        blocks, rests = [], []
        for size, pad, dil, k, step in zip(sizes, (ph, pw), (dh, dw), (kh, kw), (sh, sw)):
            span = g.op("Add", size, ints(g, [2 * pad - dil * (k - 1) - 1]))  # (blocks - 1) step + rest
            whole = g.op("Div", span, ints(g, [step]))
            blocks.append(g.op("Add", whole, ints(g, [1])))
            rests.append(g.op("Sub", span, g.op("Mul", whole, ints(g, [step]))))
        kernel = torch.zeros(kh * kw, 1, kh, kw, dtype=float_type(x))
        for i in range(kh):
            for j in range(kw):
                kernel[i * kw + j, 0, i, j] = 1.0
        planes = g.op("Reshape", x, g.op("Concat", ints(g, [-1, kh * kw]), *blocks, axis_i=0))  # [N C, kh kw, ..]
        full = g.op("ConvTranspose", planes, g.op("Constant", value_t=kernel), kernel_shape_i=[kh, kw],
                    strides_i=[sh, sw], dilations_i=[dh, dw])  # [N C, 1, H + 2 p - rest, ...]
        padded = g.op("Pad", full, g.op("Concat", ints(g, [0] * 6), *rests, axis_i=0))  # [N C, 1, H + 2 p, ...]
        ends = [g.op("Add", size, ints(g, [pad])) for size, pad in zip(sizes, (ph, pw))]
        cut = g.op("Slice", padded, ints(g, [ph, pw]), g.op("Concat", *ends, axis_i=0), ints(g, [2, 3]))
        batch = g.op("Slice", g.op("Shape", x), ints(g, [0]), ints(g, [1]), ints(g, [0]))
        return g.op("Reshape", cut, g.op("Concat", batch, ints(g, [-1]), *sizes, axis_i=0))  # [N, C, H, W]

    def int_list(g, values, what):
        """A list argument as an int64 vector: constants, or traced sizes (the batch) concatenated."""
        if helper._is_packed_list(values):
            return [g.op("Reshape", v, ints(g, [1])) for v in helper._unpack_list(values)]
        return [ints(g, [int(v)]) for v in helper._get_const(values, "is", what)]

    def tile(g, x, dims):
        """torch.tile (1.13 has no symbolic; ViViT's cls_token.tile([batch_size, 1, 1])): ONNX's Tile by the
        repeats padded with leading 1s to x's rank, or x given leading axes of 1 where the repeats are more."""
        repeats = int_list(g, dims, "dims")
        rank = helper._get_tensor_rank(x)
        if rank is None:
            raise TightfitError("from_torch: torch.tile of a tensor of unknown rank is not supported")
        if len(repeats) > rank:
            x = helper._unsqueeze_helper(g, x, list(range(len(repeats) - rank)))
        repeats = [ints(g, [1])] * (rank - len(repeats)) + repeats
        return g.op("Tile", x, g.op("Concat", *repeats, axis_i=0))

    def broadcast_to(g, x, size):
        """torch.broadcast_to (1.13 has no symbolic): Expand to the sizes."""
        return g.op("Expand", x, g.op("Concat", *int_list(g, size, "size"), axis_i=0))

    def known_index(index):
        """The constant index tensor's values, or None where it is computed."""
        value = helper._maybe_get_const(index, "is")
        return None if helper._is_value(value) else [int(i) for i in value]

    def index_fill(g, x, dim, index, value):
        """x.index_fill(dim, index, value) by a known index: where a known mask along dim says, value (torch's
        own scatters to positions it computes from Shape, data the importer refuses)."""
        at = known_index(index)
        if at is None:
            return own["index_fill"](g, x, dim, index, value)
        axis, size, rank = fixed_axis(x, dim, "Tensor.index_fill")
        shape = [1] * rank
        shape[axis] = size
        mask = torch.zeros(size, dtype=torch.bool)
        mask[[i % size for i in at]] = True
        fill = helper._maybe_get_const(value, "f")
        fill = const(g, x, float(fill)) if not helper._is_value(fill) else g.op("Cast", value, to_i=_onnx_type(x))
        return g.op("Where", g.op("Constant", value_t=mask.reshape(shape)), fill, x)

    def index_copy(g, x, dim, index, source):
        """x.index_copy(dim, index, source) by a known index: source's slices placed (the last of a repeat)."""
        at = known_index(index)
        if at is None:
            return own["index_copy"](g, x, dim, index, source)
        axis, size, _ = fixed_axis(x, dim, "Tensor.index_copy")
        return placed(g, x, source, axis, size, [i % size for i in at], "Tensor.index_copy")

    def _onnx_type(x):
        return {torch.float16: 10, torch.bfloat16: 16, torch.float64: 11}.get(float_type(x), 1)

    # in place of torch's, which they call where the index is computed
    instead = {"index_fill": index_fill, "index_copy": index_copy}
    own = {name: symbolic_of("aten::" + name, opset) for name in instead}
    symbolics = {"frac": frac, "atan2": atan2, "logaddexp": logaddexp, "logaddexp2": logaddexp2, "sinc": sinc,
                 "signbit": signbit, "addcdiv": addcdiv, "nansum": nansum, "trace": trace,
                 "fft_fftshift": shift(False), "fft_ifftshift": shift(True), "slice_scatter": slice_scatter,
                 "select_scatter": select_scatter, "diagonal_scatter": diagonal_scatter,
                 "multi_margin_loss": multi_margin_loss, "col2im": col2im, "tile": tile, "special_entr": entr,
                 "isclose": isclose,
                 "broadcast_to": broadcast_to}
    every = range(9, max(opset, 17) + 1)
    missing = {name: [v for v in every if not registered("aten::" + name, v)] for name in symbolics}
    chosen = {name: (symbolics[name], versions) for name, versions in missing.items()}
    chosen.update({name: (symbolic, every) for name, symbolic in instead.items() if own[name] is not None})
    return _symbolic_registry.register(torch, chosen)


def quadrant_atan(torch, g, y, x, dtype):
    """atan2(y, x) of `dtype` values: atan(y / x) turned by pi into x < 0's quadrants (torch 2.x's symbolic);
    torch.atan2's and a complex number's angle."""
    def const(value):
        return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))
    angle = g.op("Atan", g.op("Div", y, x))
    turned = g.op("Where", g.op("Less", y, const(0.0)), g.op("Sub", angle, const(math.pi)),
                  g.op("Add", angle, const(math.pi)))
    return g.op("Where", g.op("Less", x, const(0.0)), turned, angle)
