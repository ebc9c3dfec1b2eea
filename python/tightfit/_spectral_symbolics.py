"""Symbolics for PyTorch's Fourier transforms, which its TorchScript exporter has none for (torch.fft.fft,
ifft, rfft, fftn, fft2, rfftn, rfft2; torch.stft under 1.x, and with return_complex=True under 2.x), and
for what reads their complex results (abs, .real, .imag, view_as_real): a spectrogram loss
(`torch.stft(...).abs()`), a mel front end, FNet's `fftn(x).real`. A complex tensor [...] is ONNX's
real pair [..., 2] (the DFT and STFT operators' own form), which the importer computes as products by
the transform's matrix and trains through. The exporter loses the complex dtype (its shape inference
calls the pairs float), so each symbolic reads whether its input is complex from the traced node
(g.original_node); the other ops of a complex value (complex products, angles) have no pair form here:
`complex_uses` names them after the export, from the module's own trace."""

from ._lib import TightfitError

_COMPLEX = ("ComplexFloat", "ComplexDouble", "ComplexHalf")
# ops that read a complex tensor as these symbolics write it (mul and div by a real scalar, add and sub
# of two complex values: the element-wise ONNX op on the pairs is the complex one)
_PAIR_READERS = {"aten::abs", "aten::real", "aten::imag", "aten::view_as_real", "aten::fft_fft", "aten::fft_ifft",
                 "aten::fft_fftn", "aten::fft_fft2", "aten::fft_ifftn", "aten::fft_ifft2"}


class NeedsOpset17(Exception):
    """Raised by a transform's symbolic at an opset before 17 (ONNX's DFT and STFT): from_torch exports again
    at 17 (PyTorch 1.13's default is 14)."""


def _is_complex(value):
    t = value.type()
    return t.kind() == "TensorType" and t.scalarType() in _COMPLEX


def register(torch, opset, helper, registered, used):
    """Registers the symbolics above that `opset` lacks (`registered(name, opset)` says which it has; the
    stft symbolic replaces torch's, which refuses return_complex=True); appends to `used` each time one
    writes a transform. Returns the function that removes them."""

    def ints(g, values):
        return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))

    def scaled(g, x, factor):
        if factor == 1.0:
            return x
        return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(factor, dtype=torch.float32)))

    def original(g, i):
        return list(g.original_node.inputs())[i]

    def rank_of(g, i):
        rank = original(g, i).type().dim()
        if rank is None:
            raise TightfitError(f"from_torch: {g.original_node.kind()} of a tensor of unknown rank")
        return rank

    def size_of(g, i, axis):
        """The traced size of input i's `axis`, or None where the trace leaves it open (a dynamic axis)."""
        sizes = original(g, i).type().sizes()
        return None if sizes is None or sizes[axis] is None else int(sizes[axis])

    def norm_of(norm):
        value = None if helper._is_none(norm) else helper._maybe_get_const(norm, "s")
        if value not in (None, "backward", "forward", "ortho"):
            raise TightfitError(f"from_torch: a Fourier transform's norm={value!r}")
        return value or "backward"

    def need_opset_17(g):
        if g.opset < 17:
            raise NeedsOpset17()

    def as_pairs(g, y):
        """y typed as the float pairs of the traced node's complex output (PyTorch 1.x's shape inference
        otherwise keeps the complex dtype, which no ONNX op takes)."""
        t = g.original_node.output().type()
        if t.kind() == "TensorType" and t.scalarType() in _COMPLEX and t.sizes() is not None:
            y.setType(t.with_dtype(torch.float32).with_sizes(list(t.sizes()) + [2]))
        return y

    def dft(g, x, pair, axis, length, inverse, onesided, norm):
        """One transform along `axis` (of the complex tensor, not counting the pair's axis) of the pair x, or
        of the real tensor x when not `pair`, to `length` points."""
        need_opset_17(g)
        used.append(True)
        if not pair:
            x = g.op("Unsqueeze", x, ints(g, [-1])) if g.opset >= 13 else g.op("Unsqueeze", x, axes_i=[-1])
        if length is None and (norm != "backward" or g.opset >= 20):
            raise TightfitError(f"from_torch: a Fourier transform along axis {axis}, whose length the trace does not "
                                "fix (give n or s)")
        # without n, the axis's own length: the importer knows it
        lengths = [] if length is None else [g.op("Constant", value_t=torch.tensor(length, dtype=torch.int64))]
        if g.opset >= 20:  # the axis became an input
            y = g.op("DFT", x, *lengths, g.op("Constant", value_t=torch.tensor(axis, dtype=torch.int64)),
                     inverse_i=int(inverse), onesided_i=int(onesided))
        else:
            y = g.op("DFT", x, *lengths, axis_i=axis, inverse_i=int(inverse), onesided_i=int(onesided))
        if norm == "backward":
            return as_pairs(g, y)
        # ONNX's inverse divides by the length (torch's "backward" norm); the others rescale
        factor = {("backward", False): 1.0, ("backward", True): 1.0, ("forward", False): 1.0 / length,
                  ("forward", True): float(length), ("ortho", False): length ** -0.5,
                  ("ortho", True): length ** 0.5}[(norm, inverse)]
        return as_pairs(g, scaled(g, y, factor))

    def one_axis(g, x, n, dim, norm, inverse, onesided):
        pair, rank = _is_complex(original(g, 0)), rank_of(g, 0)
        if onesided and pair:
            raise TightfitError("from_torch: torch.fft.rfft of a complex tensor")
        axis = helper._get_const(dim, "i", "dim")
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise TightfitError(f"from_torch: a Fourier transform along dim {axis} of a rank-{rank} tensor")
        length = size_of(g, 0, axis) if helper._is_none(n) else helper._get_const(n, "i", "n")
        return dft(g, x, pair, axis, length, inverse, onesided, norm_of(norm))

    def fft_fft(g, x, n, dim, norm):
        return one_axis(g, x, n, dim, norm, False, False)

    def fft_ifft(g, x, n, dim, norm):
        return one_axis(g, x, n, dim, norm, True, False)

    def fft_rfft(g, x, n, dim, norm):
        return one_axis(g, x, n, dim, norm, False, True)

    def many_axes(g, x, s, dim, norm, inverse, onesided_last, default_dims):
        """fftn/fft2/rfftn/rfft2: one transform per axis, the last first where it is the one-sided one."""
        pair, rank = _is_complex(original(g, 0)), rank_of(g, 0)
        dims = default_dims(rank) if helper._is_none(dim) else list(helper._get_const(dim, "is", "dim"))
        dims = [d + rank if d < 0 else d for d in dims]
        lengths = None if helper._is_none(s) else list(helper._get_const(s, "is", "s"))
        if lengths is not None and len(lengths) != len(dims):
            raise TightfitError(f"from_torch: a Fourier transform with s={lengths} and dim={dims}")
        if lengths is None:
            lengths = [size_of(g, 0, d) for d in dims]
        order = list(range(len(dims)))
        if onesided_last:
            if pair:
                raise TightfitError("from_torch: torch.fft.rfftn of a complex tensor")
            order = [order[-1]] + order[:-1]
        for i, k in enumerate(order):
            x = dft(g, x, pair or i > 0, dims[k], lengths[k], inverse, onesided_last and i == 0, norm_of(norm))
        return x

    def every_axis(rank):
        return list(range(rank))

    def last_two(rank):
        return [rank - 2, rank - 1]

    def fft_fftn(g, x, s, dim, norm):
        return many_axes(g, x, s, dim, norm, False, False, every_axis)

    def fft_ifftn(g, x, s, dim, norm):
        return many_axes(g, x, s, dim, norm, True, False, every_axis)

    def fft_fft2(g, x, s, dim, norm):
        return many_axes(g, x, s, dim, norm, False, False, last_two)

    def fft_ifft2(g, x, s, dim, norm):
        return many_axes(g, x, s, dim, norm, True, False, last_two)

    def fft_rfftn(g, x, s, dim, norm):
        return many_axes(g, x, s, dim, norm, False, True, every_axis)

    def fft_rfft2(g, x, s, dim, norm):
        return many_axes(g, x, s, dim, norm, False, True, last_two)

    def stft(g, x, n_fft, hop_length, win_length, window, normalized, onesided=None, return_complex=None, *rest):
        """torch.stft (after its centring pad, which the trace records as a Pad): ONNX's STFT of the signal
        [B, L, 1] by the window centred in n_fft samples, moved to torch's [B, bins, frames, 2]."""
        if _is_complex(original(g, 0)):
            raise TightfitError("from_torch: torch.stft of a complex signal")
        if rest and not all(helper._is_none(r) for r in rest):
            raise TightfitError("from_torch: torch.stft's align_to_window")
        need_opset_17(g)
        used.append(True)
        n = helper._get_const(n_fft, "i", "n_fft")
        hop = n // 4 if helper._is_none(hop_length) else helper._get_const(hop_length, "i", "hop_length")
        width = n if helper._is_none(win_length) else helper._get_const(win_length, "i", "win_length")
        sided = True if helper._is_none(onesided) else bool(helper._get_const(onesided, "b", "onesided"))
        rank = rank_of(g, 0)
        if rank not in (1, 2):
            raise TightfitError(f"from_torch: torch.stft of a rank-{rank} signal (1 or 2: [batch,] samples)")
        signal = x if rank == 2 else g.op("Unsqueeze", x, ints(g, [0]))
        signal = g.op("Unsqueeze", signal, ints(g, [-1]))
        if helper._is_none(window):
            window = g.op("Constant", value_t=torch.ones(width, dtype=torch.float32))
        if width < n:  # torch centres a shorter window in the frame
            left = (n - width) // 2
            window = g.op("Concat", g.op("Constant", value_t=torch.zeros(left, dtype=torch.float32)), window,
                          g.op("Constant", value_t=torch.zeros(n - width - left, dtype=torch.float32)), axis_i=0)
        y = g.op("STFT", signal, ints(g, hop), window, ints(g, n), onesided_i=int(sided))
        y = g.op("Transpose", y, perm_i=[0, 2, 1, 3])
        if rank == 1:
            y = g.op("Squeeze", y, ints(g, [0]))
        return as_pairs(g, scaled(g, y, n ** -0.5 if helper._maybe_get_const(normalized, "b") else 1.0))

    def part(g, x, index):
        return g.op("Gather", x, g.op("Constant", value_t=torch.tensor(index, dtype=torch.int64)), axis_i=-1)

    def absolute(g, x):
        """|z| of a complex z as ReduceL2 over the pair, which the importer differentiates as PyTorch's norm
        (0 at z = 0, where sqrt(re^2 + im^2) would give NaN)."""
        if not _is_complex(original(g, 0)):
            return g.op("Abs", x)
        if g.opset >= 18:  # the axes became an input
            return g.op("ReduceL2", x, ints(g, [-1]), keepdims_i=0)
        return g.op("ReduceL2", x, axes_i=[-1], keepdims_i=0)

    def real(g, x):
        return part(g, x, 0) if _is_complex(original(g, 0)) else x

    def imag(g, x):
        if not _is_complex(original(g, 0)):
            raise TightfitError("from_torch: .imag of a real tensor")
        return part(g, x, 1)

    def view_as_real(g, x):
        return x

    symbolics = {"fft_fft": fft_fft, "fft_ifft": fft_ifft, "fft_rfft": fft_rfft, "fft_fftn": fft_fftn,
                 "fft_ifftn": fft_ifftn, "fft_fft2": fft_fft2, "fft_ifft2": fft_ifft2, "fft_rfftn": fft_rfftn,
                 "fft_rfft2": fft_rfft2, "real": real, "imag": imag, "view_as_real": view_as_real}
    added = [name for name in symbolics if not registered("aten::" + name, opset)]
    added += ["stft", "abs"]  # in place of torch's: complex signals and values
    symbolics.update(stft=stft, abs=absolute)
    versions = sorted({9, opset})  # at the export's opset too: a custom symbolic wins only at its own version
    for name in added:
        for version in versions:
            torch.onnx.register_custom_op_symbolic("aten::" + name, symbolics[name], version)

    def restore():
        for name in added:
            for version in versions:
                torch.onnx.unregister_custom_op_symbolic("aten::" + name, version)
    return restore


def complex_uses(torch, module, example_inputs):
    """The ops of the module's trace that read a complex tensor in a way the symbolics above do not write
    (a complex product, an angle, a complex tensor returned), as "aten::mul (file:line)" strings."""
    with torch.no_grad():
        graph = torch.jit._get_trace_graph(module, tuple(example_inputs))[0]  # the trace torch.onnx.export takes
    found = []
    for node in graph.nodes():
        complex_inputs = [i for i in node.inputs() if _is_complex(i)]
        if not complex_inputs or node.kind() in _PAIR_READERS or _complex_arithmetic(node):
            continue
        where = node.sourceRange().strip().splitlines()[0] if node.sourceRange() else ""
        found.append(f"{node.kind()}" + (f" ({where})" if where else ""))
    for output in graph.outputs():
        if _is_complex(output):
            found.append("a complex output")
    return found


def _complex_arithmetic(node):
    """Whether `node` is complex arithmetic whose element-wise ONNX op on the pairs is exact: add or sub of two
    complex tensors, mul or div of a complex tensor by a real number."""
    inputs = list(node.inputs())
    if node.kind() in ("aten::add", "aten::sub") and len(inputs) >= 2:
        return _is_complex(inputs[0]) and _is_complex(inputs[1])
    if node.kind() in ("aten::mul", "aten::div") and len(inputs) >= 2:
        other = inputs[1] if _is_complex(inputs[0]) else inputs[0]
        t = other.type()
        scalar = t.kind() != "TensorType" or t.dim() == 0
        return _is_complex(inputs[0]) != _is_complex(inputs[1]) and scalar
    return False


def refuse_complex_uses(torch, module, example_inputs):
    """Raises naming each op that reads a complex tensor in a way the export does not write as pairs."""
    found = complex_uses(torch, module, example_inputs)
    if found:
        raise TightfitError("from_torch: these ops read complex tensors, which tightfit holds as [..., 2] real pairs "
                            "for abs, .real, .imag, view_as_real, the Fourier transforms and complex +, -, and x or / "
                            "by a real number only: " + "; ".join(found), "unsupported")
