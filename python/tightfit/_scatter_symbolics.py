"""Symbolics for PyTorch's sums by computed indices, which its TorchScript exporter refuses or lacks: a graph
network's aggregation over incoming edges, where an index repeats by design.

- Tensor.index_add (and index_add_): torch refuses it wherever the index may repeat ("duplicated values in
  'index'"), which it cannot rule out for an index given as data. Written as ScatterElements with reduction
  "add" (the index broadcast along the other axes), which the importer reads as a sum by a one-hot product
  (import/onnx_scatter_computed.c); alpha scales the source.
- Tensor.scatter_add from opset 16: torch's needs the index's sizes, which an index computed from data lacks
  under PyTorch 1.13 (index and source of one shape, as ScatterElements takes them).
- Tensor.scatter_reduce with "sum", "mean", "amax" or "amin", include_self either way (1.13 has no symbolic;
  2.x refuses "mean" and include_self=False): sums and counts of the writes per position (ScatterElements
  "add" of the source and of ones), a position no write reaches keeping self's value as PyTorch does;
  "amax"/"amin" as a ReduceMax/ReduceMin over a one-hot of the positions ([..., K, ..., P] values: the
  writes K times the positions P of the axis), whose gradient reaches the largest (smallest) writes.
  "prod" is left to torch (refused where it has none).

Every one needs ScatterElements' reduction attribute: opset 16 or later (from_torch's default is 17; under
PyTorch 1.13, whose default is 14, it exports again at 17).
"""

from . import _symbolic_registry
from ._lib import TightfitError
from ._spectral_symbolics import NeedsOpset17

# The finite stand-in for -inf and +inf where no write reaches a position of a masked max or min: a
# product with an infinity would give NaN gradients.
_FAR = 3.0e38


def _torch_scatter_reduce():
    """torch's own scatter_reduce symbolic (opset 16; 2.x only), or None."""
    import importlib
    for module in ("torch.onnx._internal.torchscript_exporter.symbolic_opset16", "torch.onnx.symbolic_opset16"):
        try:
            return getattr(importlib.import_module(module), "scatter_reduce", None)
        except ImportError:
            continue
    return None


def register(torch, opset, helper, registered, symbolic_of):
    """Registers index_add and scatter_reduce (in place of torch's, which they call for what they leave
    to it); before opset 16 they ask for an export at 17. Returns the function that removes them."""

    def ints(g, values):
        return _symbolic_registry.int64_constant(torch, g, values)

    def number(g, like, value):
        return g.op("Constant", value_t=torch.tensor(value, dtype=_symbolic_registry.float_type(torch, like)))

    def rank_and_axis(x, dim, what):
        rank = helper._get_tensor_rank(x)
        if rank is None:
            raise TightfitError(f"from_torch: {what} of a tensor of unknown rank is not supported")
        axis = helper._get_const(dim, "i", "dim")
        return rank, axis + rank if axis < 0 else axis

    def fill_like(g, x, value):
        return g.op("ConstantOfShape", g.op("Shape", x), value_t=torch.tensor([value], dtype=torch.float32))

    def scattered(g, like, index, values, axis):
        """ScatterElements "add" of `values` into zeros of like's shape: the sum of the writes per position."""
        return g.op("ScatterElements", fill_like(g, like, 0.0), index, values, axis_i=axis, reduction_s="add")

    def later(name):
        raise NeedsOpset17(f"{name} by indices that may repeat needs opset 16 or later (ScatterElements' reduction)")

    def index_add(g, self, dim, index, source, alpha=None):
        if g.opset < 16:
            later("index_add")
        rank, axis = rank_and_axis(source, dim, "index_add")
        shape = [1] * max(rank, 1)
        shape[axis] = -1
        spread = g.op("Expand", g.op("Reshape", index, ints(g, shape)), g.op("Shape", source))
        scale = 1.0 if alpha is None or helper._is_none(alpha) else float(helper._get_const(alpha, "f", "alpha"))
        if scale != 1.0:
            source = g.op("Mul", source, number(g, source, scale))
        return g.op("ScatterElements", self, spread, source, axis_i=axis, reduction_s="add")

    def scatter_add(g, self, dim, index, src):
        """From opset 16 (torch's own before it writes ScatterElements into zeros beside an Add, which the
        importer reads as a sum): torch's needs the index's sizes, which an index computed from data lacks."""
        rank, axis = rank_and_axis(src, dim, "scatter_add")
        return g.op("ScatterElements", self, index, src, axis_i=axis, reduction_s="add")

    def extreme(g, self, axis, rank, index, src, largest):
        """The largest (smallest) write per position of self's axis, and -FAR (+FAR) where none: a
        ReduceMax (ReduceMin) over the writes' axis of the writes masked by a one-hot of their positions
        (OneHot's depth self's size along the axis, which the importer knows)."""
        depth = g.op("Gather", g.op("Shape", self), ints(g, [axis]), axis_i=0)  # P, folded when importing
        hit = g.op("OneHot", index, depth, number(g, src, [0.0, 1.0]), axis_i=-1)  # [..., K, ..., P]: 0 or 1
        far = number(g, src, -_FAR if largest else _FAR)
        # the write where it lands, FAR elsewhere (a blend: a Where with an infinity would give NaN gradients)
        masked = g.op("Add", g.op("Mul", helper._unsqueeze_helper(g, src, [rank]), hit),
                      g.op("Mul", g.op("Sub", number(g, src, 1.0), hit), far))
        op = "ReduceMax" if largest else "ReduceMin"
        if g.opset >= 18:
            reduced = g.op(op, masked, ints(g, [axis]), keepdims_i=1)
        else:
            reduced = g.op(op, masked, axes_i=[axis], keepdims_i=1)
        perm = list(range(rank + 1))
        perm[axis], perm[rank] = rank, axis  # [..., P, ..., 1]
        return helper._squeeze_helper(g, g.op("Transpose", reduced, perm_i=perm), [rank])

    def scatter_reduce(g, self, dim, index, src, reduce, include_self=True):
        if g.opset < 16:
            later("scatter_reduce")
        mode = helper._get_const(reduce, "s", "reduce")
        keep_self = include_self is True or helper._is_none(include_self) or \
            bool(helper._get_const(include_self, "b", "include_self"))
        if mode == "prod":
            if own is None:
                raise TightfitError("from_torch: scatter_reduce with reduce='prod' is not supported", "unsupported")
            return own(g, self, dim, index, src, reduce, include_self)
        if mode not in ("sum", "mean", "amax", "amin"):
            raise TightfitError(f"from_torch: scatter_reduce with reduce={mode!r} is not supported", "unsupported")
        rank, axis = rank_and_axis(src, dim, "scatter_reduce")
        if mode == "sum" and keep_self:
            return g.op("ScatterElements", self, index, src, axis_i=axis, reduction_s="add")
        counts = scattered(g, self, index, fill_like(g, src, 1.0), axis)
        # 1 where no write reaches a position, else 0 (counts are whole numbers): self's value stays there
        untouched = g.op("Relu", g.op("Sub", number(g, self, 1.0), counts))
        if mode in ("amax", "amin"):
            best = extreme(g, self, axis, rank, index, src, mode == "amax")
            if keep_self:
                return g.op("Max" if mode == "amax" else "Min", self, best)
            return g.op("Where", g.op("Greater", counts, number(g, self, 0.0)), best, self)
        sums = scattered(g, self, index, src, axis)
        if mode == "sum":
            return g.op("Add", g.op("Mul", self, untouched), sums)
        if keep_self:  # the mean of self and the writes
            return g.op("Div", g.op("Add", self, sums), g.op("Add", counts, number(g, self, 1.0)))
        return g.op("Add", g.op("Mul", self, untouched),
                    g.op("Div", sums, g.op("Max", counts, number(g, self, 1.0))))

    own = _torch_scatter_reduce()
    # at every opset from 9: torch loads its later opsets' symbolics (scatter_reduce's, 16) only when an export
    # starts, so which versions it has is not known before the first one
    last = max(opset, 17) + 1
    return _symbolic_registry.register(torch, {"index_add": (index_add, range(9, last)),
                                               "scatter_reduce": (scatter_reduce, range(9, last)),
                                               "scatter_add": (scatter_add, range(16, last))})
