"""Complex tensors in from_torch's export as ONNX's real pairs [..., 2] (real, imaginary: the form of ONNX's DFT
and STFT, which _spectral_symbolics.py writes for PyTorch's Fourier transforms). The exporter loses the complex
dtype (its shape inference calls the pairs float), so each symbolic here reads whether an input is complex
from the traced node (g.original_node) and, where none is, applies the symbolic torch's exporter had for the
op: abs (as ReduceL2 over the pair, which the importer differentiates as PyTorch's norm: 0 at z = 0), angle
(atan2 of the parts), .real,
.imag, view_as_real, view_as_complex, conj, torch.complex, torch.polar, exp, +, -, *, / of complex and real
tensors or numbers (a vocoder's mag * (cos p + 1j sin p)), and the layout ops and reductions with their dims
counted on the complex tensor (view, reshape, slice, select, flatten, unsqueeze, squeeze, transpose, permute,
size, sum, mean, cat, stack, F.pad: Meta's Llama rotary embeddings). Complex constants (1j, a rotation table) become constant pairs
(complex_numbers_as_pairs). `unsupported_uses` names every other op of a complex tensor after the export, from
the module's own trace."""

import math

from . import _pointwise_symbolics
from ._lib import TightfitError

_COMPLEX = ("ComplexFloat", "ComplexDouble", "ComplexHalf")
# the ops that read a complex tensor as pairs: these symbolics' and _spectral_symbolics.py's
PAIR_READERS = {"aten::" + name for name in (
    "abs", "angle", "real", "imag", "view_as_real", "conj", "_conj", "resolve_conj", "resolve_neg", "exp", "mul", "add", "sub", "div",
    "neg", "slice", "pad", "constant_pad_nd", "view", "reshape", "flatten", "unsqueeze", "squeeze", "transpose", "permute", "select",
    "size", "sum", "mean", "cat", "stack", "contiguous", "clone", "detach", "fft_fft", "fft_ifft", "fft_fftn", "fft_fft2", "fft_ifftn", "fft_ifft2", "fft_irfft", "istft")}


def is_complex(value):
    """Whether a traced value is a complex tensor."""
    t = value.type()
    return t.kind() == "TensorType" and t.scalarType() in _COMPLEX


def traced_input(g, i):
    """Input i of the traced node a symbolic converts: its complex dtype and fixed sizes, which the export's
    own types lose."""
    return list(g.original_node.inputs())[i]


def constant_ints(torch, g, values):
    """An int64 Constant node of `values`."""
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def unsqueezed(torch, g, x, axis):
    """x with a new axis at `axis` (an input of Unsqueeze from opset 13, an attribute before)."""
    if g.opset >= 13:
        return g.op("Unsqueeze", x, constant_ints(torch, g, [axis]))
    return g.op("Unsqueeze", x, axes_i=[axis])


def as_pairs(torch, g, y):
    """y typed as the float pairs of the traced node's complex output (PyTorch 1.x's shape inference otherwise
    keeps the complex dtype, which no ONNX op takes); y itself."""
    t = g.original_node.output().type()
    if t.kind() == "TensorType" and t.scalarType() in _COMPLEX and t.sizes() is not None:
        y.setType(t.with_dtype(torch.float32).with_sizes(list(t.sizes()) + [2]))
    return y


def register(torch, helper, symbolic_of, used):
    """Registers the symbolics above (torch's own, `symbolic_of(name, opset)`, apply where no input is complex);
    appends to `used` each time one writes complex arithmetic. Returns the function that removes them."""

    def ints(g, values):
        return constant_ints(torch, g, values)

    def floats(g, values):
        return g.op("Constant", value_t=torch.tensor(values, dtype=torch.float32))

    def complex_inputs(g):
        flags = [is_complex(i) for i in g.original_node.inputs()]
        if any(flags):
            used.append(True)
        return flags

    def unsqueeze_last(g, x):
        return unsqueezed(torch, g, x, -1)

    def part(g, z, index):
        return g.op("Gather", z, ints(g, index), axis_i=-1)

    def pair(g, re, im):
        return g.op("Concat", unsqueeze_last(g, re), unsqueeze_last(g, im), axis_i=-1)

    def typed(g, y):
        return as_pairs(torch, g, y)

    def operand(g, x, complex_in):
        """An operand of complex arithmetic as (pairs, True), or a real one as (x, False); a complex constant
        (1j) becomes its pairs."""
        if complex_in:
            value = helper._maybe_get_const(x, "t")
            if isinstance(value, torch.Tensor) and value.is_complex():
                return g.op("Constant", value_t=torch.view_as_real(value.to(torch.complex64))), True
            return x, True
        value = helper._maybe_get_const(x, "t")
        if isinstance(value, (int, float)):
            return g.op("Constant", value_t=torch.tensor(float(value))), False
        return x, False

    def lifted(g, r):
        """A real tensor as the pairs of (r, 0)."""
        return g.op("Mul", unsqueeze_last(g, r), floats(g, [1.0, 0.0]))

    def own(name, g, *args):
        function = originals.get((name, g.opset))
        if function is None:
            raise TightfitError(f"from_torch: torch's exporter has no symbolic for aten::{name} at opset {g.opset}")
        return function(g, *args)

    def product(g, a, b):
        ar, ai, br, bi = part(g, a, 0), part(g, a, 1), part(g, b, 0), part(g, b, 1)
        return pair(g, g.op("Sub", g.op("Mul", ar, br), g.op("Mul", ai, bi)),
                    g.op("Add", g.op("Mul", ar, bi), g.op("Mul", ai, br)))

    def mul(g, a, b):
        flags = complex_inputs(g)
        if not any(flags[:2]):
            return own("mul", g, a, b)
        (a, ca), (b, cb) = operand(g, a, flags[0]), operand(g, b, flags[1])
        if ca and cb:
            return typed(g, product(g, a, b))
        return typed(g, g.op("Mul", a, unsqueeze_last(g, b)) if ca else g.op("Mul", unsqueeze_last(g, a), b))

    def div(g, a, b, *rest):
        flags = complex_inputs(g)
        if not any(flags[:2]):
            return own("div", g, a, b, *rest)
        if rest and not all(helper._is_none(r) for r in rest):
            raise TightfitError("from_torch: a rounding division of complex tensors")
        (a, ca), (b, cb) = operand(g, a, flags[0]), operand(g, b, flags[1])
        if not cb:
            return typed(g, g.op("Div", a, unsqueeze_last(g, b)))
        br, bi = part(g, b, 0), part(g, b, 1)
        scale = g.op("Add", g.op("Mul", br, br), g.op("Mul", bi, bi))
        conjugate = pair(g, br, g.op("Neg", bi))
        top = product(g, a if ca else lifted(g, a), conjugate)
        return typed(g, g.op("Div", top, unsqueeze_last(g, scale)))

    def sum_like(name, onnx_op):
        def symbolic(g, a, b, alpha=None):
            flags = complex_inputs(g)
            if not any(flags[:2]):
                return own(name, g, a, b, alpha) if alpha is not None else own(name, g, a, b)
            (a, ca), (b, cb) = operand(g, a, flags[0]), operand(g, b, flags[1])
            a, b = (a if ca else lifted(g, a)), (b if cb else lifted(g, b))
            if alpha is not None and not helper._is_none(alpha):
                scale = helper._maybe_get_const(alpha, "f")
                if scale != 1:
                    b = g.op("Mul", b, g.op("Constant", value_t=torch.tensor(float(scale))))
            return typed(g, g.op(onnx_op, a, b))
        return symbolic

    def exp(g, z):
        if not complex_inputs(g)[0]:
            return own("exp", g, z)
        magnitude, angle = g.op("Exp", part(g, z, 0)), part(g, z, 1)
        return typed(g, pair(g, g.op("Mul", magnitude, g.op("Cos", angle)), g.op("Mul", magnitude, g.op("Sin", angle))))

    def absolute(g, x):
        """|z| as ReduceL2 over the pair: its gradient 0 at z = 0 (sqrt(re^2 + im^2) would give NaN)."""
        if not complex_inputs(g)[0]:
            return g.op("Abs", x)
        if g.opset >= 18:  # the axes became an input
            return g.op("ReduceL2", x, ints(g, [-1]), keepdims_i=0)
        return g.op("ReduceL2", x, axes_i=[-1], keepdims_i=0)

    def angle(g, x):
        """atan2(im, re) of a complex number; a real one's is pi below 0, else 0 (torch's)."""
        if not complex_inputs(g)[0]:
            zero = g.op("Mul", x, floats(g, 0.0))
            return g.op("Where", g.op("Less", x, zero), g.op("Add", zero, floats(g, math.pi)), zero)
        return _pointwise_symbolics.quadrant_atan(torch, g, part(g, x, 1), part(g, x, 0), torch.float32)

    def real(g, x):
        return part(g, x, 0) if complex_inputs(g)[0] else x

    def imag(g, x):
        if not complex_inputs(g)[0]:
            raise TightfitError("from_torch: .imag of a real tensor")
        return part(g, x, 1)

    def identity(g, x):
        return x

    def conj(g, x):
        return typed(g, g.op("Mul", x, floats(g, [1.0, -1.0]))) if complex_inputs(g)[0] else x

    def complex_of(g, re, im):
        used.append(True)
        return typed(g, pair(g, re, im))

    def polar(g, magnitude, angle):
        used.append(True)
        return typed(g, pair(g, g.op("Mul", magnitude, g.op("Cos", angle)), g.op("Mul", magnitude, g.op("Sin", angle))))

    def rank_of(g):
        rank = traced_input(g, 0).type().dim()
        if rank is None:
            raise TightfitError(f"from_torch: {g.original_node.kind()} of a complex tensor of unknown rank")
        return rank

    def axis_of(g, dim, rank):
        """A dim of the complex tensor (negative ones counted from its end, not the pair's) as an axis of the pairs."""
        d = helper._get_const(dim, "i", "dim")
        if not -rank <= d < rank:
            raise TightfitError(f"from_torch: dim {d} of a rank-{rank} complex tensor")
        return d + rank if d < 0 else d

    def layout(name, pairs):
        """A layout op: torch's symbolic for real tensors, `pairs(g, x, rank, *args)` for complex ones."""
        def symbolic(g, x, *args):
            if not complex_inputs(g)[0]:
                return own(name, g, x, *args)
            return typed(g, pairs(g, x, rank_of(g), *args))
        return symbolic

    def bound(g, value, default):
        """A slice bound as ONNX's 1-d input: fixed, or computed (a size of the input: x[:T])."""
        if value is None or helper._is_none(value):
            return ints(g, [default])
        number = helper._maybe_get_const(value, "i")
        if not helper._is_value(number):
            return ints(g, [number])
        return unsqueezed(torch, g, value, 0)

    def slice_pairs(g, x, rank, dim, start, end, step):
        return g.op("Slice", x, bound(g, start, 0), bound(g, end, 2 ** 63 - 1), ints(g, [axis_of(g, dim, rank)]),
                    bound(g, step, 1))

    def reshape_pairs(g, x, rank, shape):
        sizes = helper._maybe_get_const(shape, "is")
        if helper._is_value(sizes):  # computed sizes: a 1-d tensor
            return g.op("Reshape", x, g.op("Concat", shape, ints(g, [2]), axis_i=0))
        return g.op("Reshape", x, ints(g, list(sizes) + [2]))

    def flatten_pairs(g, x, rank, start_dim, end_dim):  # end_dim: where the output's sizes show it
        """The merged axes as -1 between the axes before (copied: 0) and after (the output's sizes)."""
        start = axis_of(g, start_dim, max(rank, 1))
        sizes = g.original_node.output().type().sizes()
        after = [] if sizes is None else sizes[start + 1:]
        if sizes is None or any(s is None for s in after):
            raise TightfitError("from_torch: a flatten of a complex tensor whose later axes are not fixed")
        return g.op("Reshape", x, ints(g, [0] * start + [-1] + [int(s) for s in after] + [2]))

    def unsqueeze_pairs(g, x, rank, dim):
        axis = axis_of(g, dim, rank + 1)
        return unsqueezed(torch, g, x, axis)

    def squeeze_pairs(g, x, rank, dim=None):
        if dim is None or helper._is_none(dim):
            sizes = traced_input(g, 0).type().sizes()
            if sizes is None or any(s is None for s in sizes):
                raise TightfitError("from_torch: squeeze() of a complex tensor whose sizes are not fixed")
            axes = [i for i, s in enumerate(sizes) if s == 1]
        else:
            axes = [axis_of(g, dim, rank)]
        if not axes:
            return x
        return g.op("Squeeze", x, ints(g, axes)) if g.opset >= 13 else g.op("Squeeze", x, axes_i=axes)

    def transpose_pairs(g, x, rank, dim0, dim1):
        perm = list(range(rank + 1))
        a, b = axis_of(g, dim0, rank), axis_of(g, dim1, rank)
        perm[a], perm[b] = perm[b], perm[a]
        return g.op("Transpose", x, perm_i=perm)

    def permute_pairs(g, x, rank, dims):
        order = helper._get_const(dims, "is", "dims")
        return g.op("Transpose", x, perm_i=[d + rank if d < 0 else d for d in order] + [rank])

    def size_pairs(g, x, rank, dim=None):
        shape = g.op("Shape", x)
        if dim is None or helper._is_none(dim):
            return g.op("Slice", shape, ints(g, [0]), ints(g, [rank]))
        return g.op("Gather", shape, g.op("Constant", value_t=torch.tensor(axis_of(g, dim, rank))), axis_i=0)

    def pad_pairs(g, x, rank, pad, mode=None, value=None):
        """F.pad of a complex tensor: the same pads (PyTorch's list runs from the last axis) with none on the pair
        axis; zeros, reflection or the edge's value (circular padding and other fill values refused)."""
        widths = helper._get_const(pad, "is", "pad")
        kind = "constant" if mode is None or helper._is_none(mode) else helper._get_const(mode, "s", "mode")
        fill = 0.0 if value is None or helper._is_none(value) else helper._maybe_get_const(value, "f")
        onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}.get(kind)
        if onnx_mode is None or helper._is_value(fill) or fill != 0.0:
            raise TightfitError(f"from_torch: F.pad of a complex tensor in mode {kind!r} with value {fill}: zeros, "
                                "reflect and replicate only", "unsupported")
        begins, ends = [0] * (rank + 1), [0] * (rank + 1)
        for i in range(len(widths) // 2):
            begins[rank - 1 - i], ends[rank - 1 - i] = widths[2 * i], widths[2 * i + 1]
        if g.opset >= 11:  # the pads became an input
            return g.op("Pad", x, ints(g, begins + ends), mode_s=onnx_mode)
        return g.op("Pad", x, pads_i=begins + ends, mode_s=onnx_mode)

    def constant_pad_pairs(g, x, rank, pad, value=None):
        return pad_pairs(g, x, rank, pad, None, value)

    def select_pairs(g, x, rank, dim, index):
        return g.op("Gather", x, index, axis_i=axis_of(g, dim, rank))

    def reduced(onnx_op):
        """sum and mean over dims of the complex tensor (every dim when none): each part's."""
        def pairs(g, x, rank, *args):
            # (self, dtype): every dim; (self, dim, keepdim, dtype): those dims
            dims = None if len(args) < 2 or helper._is_none(args[0]) else helper._maybe_get_const(args[0], "is")
            if isinstance(dims, int):
                dims = [dims]
            axes = list(range(rank)) if not dims else [d + rank if d < 0 else d for d in dims]
            keep = len(args) > 1 and not helper._is_none(args[1]) and bool(helper._maybe_get_const(args[1], "b"))
            if g.opset >= 18 or (onnx_op == "ReduceSum" and g.opset >= 13):  # the axes became an input
                return g.op(onnx_op, x, ints(g, axes), keepdims_i=int(keep))
            return g.op(onnx_op, x, axes_i=axes, keepdims_i=int(keep))
        return pairs

    def listed(name, join):
        """cat and stack of a list of tensors, complex ones (each a pair) along a dim of the complex tensors."""
        def symbolic(g, tensors, dim):
            elements = list(traced_input(g, 0).node().inputs())
            if not any(is_complex(e) for e in elements):
                return own(name, g, tensors, dim)
            if not all(is_complex(e) for e in elements):
                raise TightfitError(f"from_torch: {name} of complex and real tensors")
            used.append(True)
            rank = elements[0].type().dim()
            values = helper._unpack_list(tensors)
            return typed(g, join(g, values, rank, helper._get_const(dim, "i", "dim")))
        return symbolic

    def cat_pairs(g, values, rank, d):
        return g.op("Concat", *values, axis_i=d + rank if d < 0 else d)

    def stack_pairs(g, values, rank, d):
        axis = d + rank + 1 if d < 0 else d
        spread = [unsqueezed(torch, g, v, axis) for v in values]
        return g.op("Concat", *spread, axis_i=axis)

    symbolics = {"mul": mul, "div": div, "add": sum_like("add", "Add"), "sub": sum_like("sub", "Sub"), "exp": exp,
                 "abs": absolute, "angle": angle, "real": real, "imag": imag, "view_as_real": identity, "view_as_complex": identity,
                 "resolve_conj": identity, "resolve_neg": identity, "conj": conj, "_conj": conj, "complex": complex_of,
                 "polar": polar, "slice": layout("slice", slice_pairs), "view": layout("view", reshape_pairs),
                 "reshape": layout("reshape", reshape_pairs), "flatten": layout("flatten", flatten_pairs),
                 "unsqueeze": layout("unsqueeze", unsqueeze_pairs), "squeeze": layout("squeeze", squeeze_pairs),
                 "transpose": layout("transpose", transpose_pairs), "permute": layout("permute", permute_pairs),
                 "select": layout("select", select_pairs), "pad": layout("pad", pad_pairs),
                 "constant_pad_nd": layout("constant_pad_nd", constant_pad_pairs), "size": layout("size", size_pairs),
                 "sum": layout("sum", reduced("ReduceSum")), "mean": layout("mean", reduced("ReduceMean")),
                 "cat": listed("cat", cat_pairs), "stack": listed("stack", stack_pairs)}
    versions = range(9, 21)  # over every opset's own symbolic: a custom one wins only at its own version
    originals = {(name, version): symbolic_of("aten::" + name, version) for name in symbolics for version in versions}
    for name, function in symbolics.items():
        for version in versions:
            torch.onnx.register_custom_op_symbolic("aten::" + name, function, version)

    def restore():
        for name in symbolics:
            for version in versions:
                torch.onnx.unregister_custom_op_symbolic("aten::" + name, version)
    return restore


def complex_numbers_as_pairs(torch):
    """Makes the export take a complex number constant (`1j * sin(p)`), which its pass that turns numbers into
    tensors refuses ("Unknown number type: complex"), and a complex tensor constant (a table of rotations,
    Llama's freqs_cis), which its shape inference refuses, as the constant pairs [..., 2] typed as the complex
    value: the symbolics above read the type as complex and the value as its pairs. Returns the function
    that puts the pass back."""
    original = torch._C._jit_pass_erase_number_types
    complex_type = torch._C.TensorType.create_from_tensor(torch.tensor(1j, dtype=torch.complex64))

    def rewrite(graph, block):
        for node in list(block.nodes()):
            for inner in node.blocks():
                rewrite(graph, inner)
            if node.kind() != "prim::Constant" or not (node.output().type().kind() == "ComplexType" or
                                                       is_complex(node.output())):
                continue
            value = node.output().toIValue()
            # inserted where the graph inserts (its end) and moved: the graph's insert point stays where the
            # pass left it (set to the node destroyed here, torch's own pass next asserts on it)
            if isinstance(value, torch.Tensor):  # a complex tensor (a table of rotations): its pairs
                pair = graph.insertConstant(torch.view_as_real(value.to(torch.complex64)).contiguous())
                pair.setType(torch._C.TensorType.create_from_tensor(value.to(torch.complex64)))
            else:
                pair = graph.insertConstant(torch.tensor([value.real, value.imag], dtype=torch.float32))
                pair.setType(complex_type)
            pair.node().moveBefore(node)
            node.output().replaceAllUsesWith(pair)
            node.destroy()

    def erase_number_types(graph):
        rewrite(graph, graph)
        return original(graph)

    torch._C._jit_pass_erase_number_types = erase_number_types

    def restore():
        torch._C._jit_pass_erase_number_types = original
    return restore


def unsupported_uses(torch, module, example_inputs):
    """The ops of the module's trace that read a complex tensor but are not written as pairs (an angle, a
    complex matmul, a complex tensor returned), as "aten::angle (file:line)" strings."""
    with torch.no_grad():
        graph = torch.jit._get_trace_graph(module, tuple(example_inputs))[0]  # the trace torch.onnx.export takes
    found = []
    for node in graph.nodes():
        if not any(is_complex(i) for i in node.inputs()) or node.kind() in PAIR_READERS:
            continue
        if node.kind() == "prim::ListConstruct" and \
                all(use.user.kind() in ("aten::cat", "aten::stack") for use in node.output().uses()):
            continue  # a list of complex tensors that cat or stack reads
        where = node.sourceRange().strip().splitlines()[0] if node.sourceRange() else ""
        found.append(f"{node.kind()}" + (f" ({where})" if where else ""))
    found += ["a complex output" for output in graph.outputs() if is_complex(output)]
    return found


def refuse_unsupported_uses(torch, module, example_inputs):
    """Raises naming each op that reads a complex tensor but is not written as pairs."""
    found = unsupported_uses(torch, module, example_inputs)
    if found:
        raise TightfitError("from_torch: these ops read complex tensors, which tightfit holds as [..., 2] real pairs "
                            "for the Fourier transforms, abs, angle, .real, .imag, view_as_real, conj, exp, +, -, *, / and "
                            "the layout ops (view, reshape, slicing, select, flatten, unsqueeze, squeeze, transpose, "
                            "permute, size, sum, mean, cat, stack, pad) only: " + "; ".join(found), "unsupported")
