"""Symbolics for PyTorch's Fourier transforms, which its TorchScript exporter has none for (torch.fft.fft,
ifft, rfft, irfft, fftn, ifftn, fft2, ifft2, rfftn, rfft2, torch.istft; torch.stft under 1.x, and with
return_complex=True under 2.x): a spectrogram loss, a mel front end, FNet's `fftn(x).real`, an iSTFT vocoder.
A complex tensor is ONNX's real pairs [..., 2] (_complex_symbolics.py: the arithmetic and what reads them).
The forward transforms are ONNX's DFT and STFT, which the importer computes as products by the transform's
matrix; irfft and istft, which ONNX has no operator for, are products by the inverse's constant matrix
(istft's as one ConvTranspose that also overlap-adds the frames). Each reads from the traced node
(g.original_node) whether its input is complex and its fixed sizes."""

from ._complex_symbolics import as_pairs, constant_ints, is_complex, traced_input, unsqueezed
from ._lib import TightfitError


class NeedsOpset17(Exception):
    """Raised by a symbolic at an opset before 17 (ONNX's DFT and STFT; ScatterElements' reduction, 16): from_torch
    exports again at 17 (PyTorch 1.13's default is 14). Its text says what needs it."""

    def __init__(self, what="the module's Fourier transforms need opset 17 or later (ONNX's DFT and STFT)"):
        super().__init__(what)


def register(torch, opset, helper, registered, used):
    """Registers the symbolics above that `opset` lacks (`registered(name, opset)` says which it has; the
    stft symbolic replaces torch's, which refuses return_complex=True); appends to `used` each time one
    writes a transform. Returns the function that removes them."""

    def ints(g, values):
        return constant_ints(torch, g, values)

    def scaled(g, x, factor):
        if factor == 1.0:
            return x
        return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(factor, dtype=torch.float32)))

    def rank_of(g, i):
        rank = traced_input(g, i).type().dim()
        if rank is None:
            raise TightfitError(f"from_torch: {g.original_node.kind()} of a tensor of unknown rank")
        return rank

    def size_of(g, i, axis):
        """The traced size of input i's `axis`, or None where the trace leaves it open (a dynamic axis)."""
        sizes = traced_input(g, i).type().sizes()
        return None if sizes is None or sizes[axis] is None else int(sizes[axis])

    def norm_of(norm):
        value = None if helper._is_none(norm) else helper._maybe_get_const(norm, "s")
        if value not in (None, "backward", "forward", "ortho"):
            raise TightfitError(f"from_torch: a Fourier transform's norm={value!r}")
        return value or "backward"

    def need_opset_17(g):
        if g.opset < 17:
            raise NeedsOpset17()

    def typed(g, y):
        return as_pairs(torch, g, y)

    def dft(g, x, pair, axis, length, inverse, onesided, norm):
        """One transform along `axis` (of the complex tensor, not counting the pair's axis) of the pair x, or
        of the real tensor x when not `pair`, to `length` points."""
        need_opset_17(g)
        used.append(True)
        if not pair:
            x = unsqueezed(torch, g, x, -1)
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
            return typed(g, y)
        # ONNX's inverse divides by the length (torch's "backward" norm); the others rescale
        factor = {("backward", False): 1.0, ("backward", True): 1.0, ("forward", False): 1.0 / length,
                  ("forward", True): float(length), ("ortho", False): length ** -0.5,
                  ("ortho", True): length ** 0.5}[(norm, inverse)]
        return typed(g, scaled(g, y, factor))

    def one_axis(g, x, n, dim, norm, inverse, onesided):
        pair, rank = is_complex(traced_input(g, 0)), rank_of(g, 0)
        if onesided and pair:
            raise TightfitError("from_torch: torch.fft.rfft of a complex tensor")
        axis = helper._get_const(dim, "i", "dim")
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise TightfitError(f"from_torch: a Fourier transform along dim {axis} of a rank-{rank} tensor")
        length = size_of(g, 0, axis) if helper._is_none(n) else helper._get_const(n, "i", "n")
        return dft(g, x, pair, axis, length, inverse, onesided, norm_of(norm))

    def on_one_axis(inverse, onesided):
        """torch.fft.fft (False, False), ifft (True, False) and rfft (False, True)."""
        return lambda g, x, n, dim, norm: one_axis(g, x, n, dim, norm, inverse, onesided)

    def many_axes(g, x, s, dim, norm, inverse, onesided_last, default_dims):
        """fftn/fft2/rfftn/rfft2: one transform per axis, the last first where it is the one-sided one."""
        pair, rank = is_complex(traced_input(g, 0)), rank_of(g, 0)
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

    def on_many_axes(inverse, onesided_last, default_dims):
        """fftn, ifftn, rfftn (every axis by default) and fft2, ifft2, rfft2 (the last two)."""
        return lambda g, x, s, dim, norm: many_axes(g, x, s, dim, norm, inverse, onesided_last, default_dims)

    def stft(g, x, n_fft, hop_length, win_length, window, normalized, onesided=None, return_complex=None, *rest):
        """torch.stft (after its centring pad, which the trace records as a Pad): ONNX's STFT of the signal
        [B, L, 1] by the window centred in n_fft samples, moved to torch's [B, bins, frames, 2]."""
        if is_complex(traced_input(g, 0)):
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
        signal = unsqueezed(torch, g, x if rank == 2 else unsqueezed(torch, g, x, 0), -1)
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
        return typed(g, scaled(g, y, n ** -0.5 if helper._maybe_get_const(normalized, "b") else 1.0))

    def real_inverse(n, bins, scale, window=None):
        """The [bins, 2, n] matrix of the complex-to-real inverse transform (torch's irfft, the frames of its
        istft): [k, 0, j] (a real part) c_k cos(2 pi j k / n), [k, 1, j] (an imaginary part) -c_k sin, where
        c_k is 1 for the bins without a mirror (0 and n / 2), 2 for the others and 0 past n / 2; times
        `scale` and window sample j."""
        k = torch.arange(bins, dtype=torch.float64)[:, None]
        j = torch.arange(n, dtype=torch.float64)[None, :]
        angle = 2 * torch.pi * torch.remainder(k * j, n) / n
        weight = torch.where((k == 0) | (2 * k == n), 1.0, 2.0) * (k <= n // 2)
        w = torch.stack([weight * torch.cos(angle), -weight * torch.sin(angle)], 1) * scale
        if window is not None:
            w = w * window.to(torch.float64)[None, None, :]
        return w

    def fft_irfft(g, x, n, dim, norm):
        """torch.fft.irfft: the axis moved last with the pair, read as one row of 2 K values, times the constant
        [2 K, n] matrix (a linear map of the real and imaginary parts, so its gradient is PyTorch's)."""
        if not is_complex(traced_input(g, 0)):
            raise TightfitError("from_torch: torch.fft.irfft of a real tensor")
        rank = rank_of(g, 0)
        axis = helper._get_const(dim, "i", "dim")
        axis = axis + rank if axis < 0 else axis
        bins = size_of(g, 0, axis)
        if bins is None:
            raise TightfitError(f"from_torch: torch.fft.irfft along axis {axis}, whose size the trace does not fix")
        length = 2 * (bins - 1) if helper._is_none(n) else helper._get_const(n, "i", "n")
        used.append(True)
        scale = {"backward": 1.0 / length, "forward": 1.0, "ortho": length ** -0.5}[norm_of(norm)]
        matrix = real_inverse(length, bins, scale).reshape(2 * bins, length)  # row 2 k + part, as the pairs read
        perm = [i for i in range(rank) if i != axis] + [axis, rank]
        rows = g.op("Reshape", g.op("Transpose", x, perm_i=perm), ints(g, [0] * (rank - 1) + [-1]))
        y = g.op("MatMul", rows, g.op("Constant", value_t=matrix.to(torch.float32)))
        back = list(range(rank - 1))
        back.insert(axis, rank - 1)
        return g.op("Transpose", y, perm_i=back)

    def istft(g, x, n_fft, hop_length, win_length, window, center, normalized, onesided=None, length=None,
              return_complex=None):
        """torch.istft: every frame's inverse transform and their overlap-add as one ConvTranspose of stride hop
        by the [2 K, 1, n_fft] matrix with the window folded in, then divided by the overlap-added squared
        window (known at export: the window's values and the frame count), trimmed as torch trims it."""
        if not is_complex(traced_input(g, 0)):
            raise TightfitError("from_torch: torch.istft of a real tensor")
        if not helper._is_none(return_complex) and helper._get_const(return_complex, "b", "return_complex"):
            raise TightfitError("from_torch: torch.istft with return_complex=True")
        n = helper._get_const(n_fft, "i", "n_fft")
        hop = n // 4 if helper._is_none(hop_length) else helper._get_const(hop_length, "i", "hop_length")
        width = n if helper._is_none(win_length) else helper._get_const(win_length, "i", "win_length")
        values = torch.ones(width) if helper._is_none(window) else helper._maybe_get_const(window, "t")
        if not isinstance(values, torch.Tensor):
            raise TightfitError("from_torch: torch.istft by a window that is data (its overlap-added square must be "
                                "known at export)")
        left = (n - width) // 2
        values = torch.cat([torch.zeros(left), values.to(torch.float32), torch.zeros(n - width - left)])
        rank = rank_of(g, 0)
        bins, frames = size_of(g, 0, rank - 2), size_of(g, 0, rank - 1)
        if rank not in (2, 3) or bins is None or frames is None:
            raise TightfitError("from_torch: torch.istft of a [batch,] bins x frames input of fixed bins and frames")
        norm = n ** -0.5 if helper._maybe_get_const(normalized, "b") else 1.0 / n
        used.append(True)
        # a real output is the complex-to-real inverse of bins 0 .. n / 2 whether onesided or not (PyTorch's: the
        # bins past n / 2 are left out, as their mirror would be)
        weight = real_inverse(n, bins, norm, values).transpose(0, 1)  # channel (part, bin)
        pairs = x if rank == 3 else unsqueezed(torch, g, x, 0)
        channels = g.op("Reshape", g.op("Transpose", pairs, perm_i=[0, 3, 1, 2]), ints(g, [-1, 2 * bins, frames]))
        y = g.op("ConvTranspose", channels,
                 g.op("Constant", value_t=weight.reshape(2 * bins, 1, n).to(torch.float32)), strides_i=[hop])
        total = n + hop * (frames - 1)
        envelope = torch.zeros(total, dtype=torch.float64)
        for f in range(frames):
            envelope[f * hop:f * hop + n] += values.to(torch.float64) ** 2
        start = n // 2 if helper._maybe_get_const(center, "b") else 0
        end = start + helper._get_const(length, "i", "length") if not helper._is_none(length) else \
            (total - n // 2 if helper._maybe_get_const(center, "b") else total)
        stop = min(end, total)
        if envelope[start:stop].abs().min() < 1e-11:
            raise TightfitError("from_torch: torch.istft's window overlap-adds to 0 somewhere (torch refuses it too)")
        y = g.op("Slice", g.op("Squeeze", y, ints(g, [1])), ints(g, [start]), ints(g, [stop]), ints(g, [1]))
        y = g.op("Mul", y, g.op("Constant", value_t=(1 / envelope[start:stop]).to(torch.float32)))
        if end > total:
            y = g.op("Pad", y, ints(g, [0, 0, 0, end - total]))
        return y if rank == 3 else g.op("Squeeze", y, ints(g, [0]))

    symbolics = {"fft_fft": on_one_axis(False, False), "fft_ifft": on_one_axis(True, False),
                 "fft_rfft": on_one_axis(False, True), "fft_fftn": on_many_axes(False, False, every_axis),
                 "fft_ifftn": on_many_axes(True, False, every_axis), "fft_rfftn": on_many_axes(False, True, every_axis),
                 "fft_fft2": on_many_axes(False, False, last_two), "fft_ifft2": on_many_axes(True, False, last_two),
                 "fft_rfft2": on_many_axes(False, True, last_two), "fft_irfft": fft_irfft, "istft": istft}
    added = [name for name in symbolics if not registered("aten::" + name, opset)]
    added += ["stft"]  # in place of torch's, which refuses return_complex=True
    symbolics.update(stft=stft)
    versions = sorted({9, opset})  # at the export's opset too: a custom symbolic wins only at its own version
    for name in added:
        for version in versions:
            torch.onnx.register_custom_op_symbolic("aten::" + name, symbolics[name], version)

    def restore():
        for name in added:
            for version in versions:
                torch.onnx.unregister_custom_op_symbolic("aten::" + name, version)
    return restore
