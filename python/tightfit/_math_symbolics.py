"""Symbolics for PyTorch math ops that its TorchScript exporter (1.13 and 2.x alike) has none for, or
writes in a form that trains differently from PyTorch: each is written as the ONNX operators of
PyTorch's own formula, which the importer reads and autodiff differentiates as PyTorch's backward does.

- torch.cdist: torch's symbolic writes (sum d^p)^(1/p) without |d| (p = 1 sums signed differences, odd p
  gives NaN), whose gradient at a zero distance (a point beside itself) is 0 x inf = NaN where PyTorch's
  is 0. Written as ReduceL2 (p = 2), ReduceL1 (p = 1), the largest |d| (p = inf) or (sum |d|^p)^(1/p)
  with its root kept off 0, each with gradient 0 at a zero distance as PyTorch's; p < 1 is refused.
- adaptive average and max pooling (1-d and 2-d) to sizes that do not divide the input's (VGG's
  AdaptiveAvgPool2d((7, 7)) at other than 224 x 224): torch refuses them. Each output takes PyTorch's
  window [floor(i I / O), ceil((i + 1) I / O)): averages as a product with a constant matrix per axis,
  maxima as a ReduceMax per window, concatenated. Divisible sizes keep torch's symbolic.
- torch.trunc, logit (with eps), xlogy, hypot, copysign, heaviside, count_nonzero, diag_embed (offset 0,
  the last two axes), kron (equal ranks, fixed sizes), F.bilinear (nn.Bilinear: one Einsum),
  cumprod (a product over a triangle: exact through zeros, as PyTorch's) and
  F.threshold with a nonzero threshold: torch has no symbolic for them.
- torch.lgamma and torch.digamma (torch.distributions' Gamma, Beta, Poisson, StudentT and Dirichlet log_prob):
  the asymptotic series at x + 8 less the recurrence's terms, reflected below 0.5, within f32's rounding of
  PyTorch's (lgamma's derivative is digamma's series, not digamma itself: within 1e-6 relative);
- torch.erfinv (torch.distributions.Normal.icdf): Giles' approximation and a Newton step, for |y| < 1;
- Tensor.exponential_ (F.gumbel_softmax's noise): -log(u) / lambd of a RandomUniformLike draw, which
  the importer reads as tightfit's own numbers (import/onnx_random.c).
- torch.diagonal (and x.diagonal()): torch's symbolic gathers the diagonal by indices computed from the
  batch size (GatherND), which a symbolic batch leaves unknown at import; written as the sum of x times
  EyeLike (offset k) over the last axis, sliced to the rows the diagonal crosses.
- unsafe_chunk (how the trace splits an LSTMCell's gates: Tacotron 2's decoder) of an axis whose size the
  exporter lost: torch refuses it; its sizes computed from Shape by torch's rule (from opset 13).
"""

import math

from . import _symbolic_registry
from ._lib import TightfitError


def register(torch, opset, helper, registered, symbolic_of):
    """Registers the symbolics above (those torch lacks at `opset`; cdist's in place of torch's; the
    adaptive pooling, diagonal and threshold ones in place of torch's, which they call where theirs
    apply); returns the function that removes them."""

    w = _symbolic_registry.Writer(torch, helper)
    float_type, const, ints, reduced = w.float_type, w.const, w.ints, w.reduced

    def sizes_of(x, what, axes=None):
        """x's sizes, those of `axes` (all by default) known at export, or a TightfitError naming `what`."""
        sizes = helper._get_tensor_sizes(x)
        if sizes is None or any(sizes[a] is None for a in (range(len(sizes)) if axes is None else axes)):
            raise TightfitError(f"from_torch: {what} of a tensor whose sizes are not known when exporting (give "
                                f"dynamic_batch=False, or fixed sizes)")
        return sizes

    def axis_of(dim, rank):
        axis = helper._get_const(dim, "i", "dim")
        return axis + rank if axis < 0 else axis

    def cdist(g, x1, x2, p=2.0, compute_mode=None):
        power = helper._maybe_get_const(p, "f")
        rank = helper._get_tensor_rank(x1)
        if helper._is_value(power) or rank is None:
            raise TightfitError("from_torch: torch.cdist with p computed in the graph, or of unknown rank, is not "
                                "supported")
        power = float(power)
        if not power >= 1:
            raise TightfitError(f"from_torch: torch.cdist with p = {power:g} is not supported (p >= 1)")
        difference = g.op("Sub", helper._unsqueeze_helper(g, x1, [rank - 1]),
                          helper._unsqueeze_helper(g, x2, [rank - 2]))
        if power in (1.0, 2.0):
            return reduced(g, "ReduceL2" if power == 2.0 else "ReduceL1", difference, [-1])
        if power == float("inf"):
            return reduced(g, "ReduceMax", g.op("Abs", difference), [-1])
        # (sum |d|^p)^(1/p), its root taken of 1 where the sum is 0 (a point beside itself) and the
        # result set to 0 there: the gradient 0, as PyTorch's, not 0 x inf
        total = reduced(g, "ReduceSum", g.op("Pow", g.op("Abs", difference), const(g, x1, power)), [-1])
        zero = g.op("Equal", total, const(g, x1, 0.0))
        root = g.op("Pow", g.op("Where", zero, const(g, x1, 1.0), total), const(g, x1, 1.0 / power))
        return g.op("Where", zero, const(g, x1, 0.0), root)

    def windows(size, out):
        """PyTorch's adaptive pooling windows of an axis of `size` into `out`: [(start, end)]."""
        return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]

    def pooled_axis(g, x, axis, rank, size, out, maximum):
        """x pooled along `axis` (of `size`) to `out` adaptive windows."""
        if maximum:
            parts = []
            for start, end in windows(size, out):
                piece = g.op("Slice", x, ints(g, [start]), ints(g, [end]), ints(g, [axis]))
                parts.append(reduced(g, "ReduceMax", piece, [axis], keep=True))
            return g.op("Concat", *parts, axis_i=axis)
        matrix = torch.zeros(size, out, dtype=float_type(x))
        for i, (start, end) in enumerate(windows(size, out)):
            matrix[start:end, i] = 1.0 / (end - start)
        if axis == rank - 1:
            return g.op("MatMul", x, g.op("Constant", value_t=matrix))
        perm = list(range(rank))
        perm[axis], perm[rank - 1] = rank - 1, axis
        moved = g.op("MatMul", g.op("Transpose", x, perm_i=perm), g.op("Constant", value_t=matrix))
        return g.op("Transpose", moved, perm_i=perm)

    def adaptive(name, maximum):
        def symbolic(g, x, output_size):
            targets = helper._maybe_get_const(output_size, "is")
            rank = helper._get_tensor_rank(x)
            sizes = helper._get_tensor_sizes(x)
            if (helper._is_value(targets) or rank is None or sizes is None or
                    any(s is None for s in sizes[2:]) or
                    all(int(s) % int(t) == 0 for s, t in zip(sizes[2:], targets))):
                return own[name](g, x, output_size)
            for k, (size, out) in enumerate(zip(sizes[2:], targets)):
                x = pooled_axis(g, x, 2 + k, rank, int(size), int(out), maximum)
            return (x, None) if maximum else x
        return symbolic

    def trunc(g, x):
        return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Abs", x)))

    def logit(g, x, eps=None):
        if eps is not None and not helper._is_none(eps):
            e = float(helper._get_const(eps, "f", "eps"))
            x = g.op("Clip", x, const(g, x, e), const(g, x, 1.0 - e))
        return g.op("Log", g.op("Div", x, g.op("Sub", const(g, x, 1.0), x)))

    def xlogy(g, x, y):
        product = g.op("Mul", x, g.op("Log", y))
        return g.op("Where", g.op("Equal", x, const(g, x, 0.0)), const(g, x, 0.0), product)

    def hypot(g, a, b):
        return g.op("Sqrt", g.op("Add", g.op("Mul", a, a), g.op("Mul", b, b)))

    def copysign(g, a, b):
        magnitude = g.op("Abs", a)
        return g.op("Where", g.op("Less", b, const(g, b, 0.0)), g.op("Neg", magnitude), magnitude)

    def heaviside(g, x, values):
        one, zero = const(g, x, 1.0), const(g, x, 0.0)
        return g.op("Where", g.op("Greater", x, zero), one,
                    g.op("Where", g.op("Equal", x, zero), values, zero))

    def count_nonzero(g, x, dim=None):
        nonzero = g.op("Cast", g.op("Not", g.op("Equal", x, const(g, x, 0.0))), to_i=7)  # INT64
        if dim is None or helper._is_none(dim):
            return g.op("ReduceSum", nonzero, keepdims_i=0)
        if not helper._is_constant(dim):
            raise TightfitError("from_torch: torch.count_nonzero over axes computed in the graph is not supported")
        axes = torch.as_tensor(helper._maybe_get_const(dim, "t")).reshape(-1)
        return reduced(g, "ReduceSum", nonzero, [int(a) for a in axes])

    def diag_embed(g, x, offset=None, dim1=None, dim2=None):
        rank = helper._get_tensor_rank(x)
        given = [helper._maybe_get_const(v, "i") if v is not None else d
                 for v, d in ((offset, 0), (dim1, -2), (dim2, -1))]
        if rank is None or given[0] != 0 or given[1] not in (-2, rank - 1) or given[2] not in (-1, rank):
            raise TightfitError("from_torch: torch.diag_embed other than offset 0 into the last two axes is not "
                                "supported")
        n = int(sizes_of(x, "torch.diag_embed", [-1])[-1])
        return g.op("Mul", helper._unsqueeze_helper(g, x, [rank]),
                    g.op("Constant", value_t=torch.eye(n, dtype=float_type(x))))

    def kron(g, a, b):
        sa, sb = [[int(n) for n in sizes_of(t, "torch.kron")] for t in (a, b)]
        if len(sa) != len(sb):
            raise TightfitError("from_torch: torch.kron of tensors of different ranks is not supported")
        rank = len(sa)
        spread_a = helper._unsqueeze_helper(g, a, [2 * k + 1 for k in range(rank)])
        spread_b = helper._unsqueeze_helper(g, b, [2 * k for k in range(rank)])
        return g.op("Reshape", g.op("Mul", spread_a, spread_b), ints(g, [p * q for p, q in zip(sa, sb)]))

    def bilinear(g, x1, x2, weight, bias):
        out = g.op("Einsum", x1, weight, x2, equation_s="...i,kij,...j->...k")
        return out if bias is None or helper._is_none(bias) else g.op("Add", out, bias)

    def cumprod(g, x, dim, dtype=None):
        rank = helper._get_tensor_rank(x)
        if rank is None:
            raise TightfitError("from_torch: torch.cumprod of a tensor of unknown rank is not supported")
        axis = axis_of(dim, rank)
        n = int(sizes_of(x, "torch.cumprod", [axis])[axis])
        perm = list(range(rank))
        perm[axis], perm[rank - 1] = rank - 1, axis
        moved = x if axis == rank - 1 else g.op("Transpose", x, perm_i=perm)
        keep = torch.tril(torch.ones(n, n, dtype=float_type(x)))  # row i keeps x_j for j <= i, else 1
        rows = g.op("Add", g.op("Mul", helper._unsqueeze_helper(g, moved, [rank - 1]), g.op("Constant", value_t=keep)),
                    g.op("Constant", value_t=1.0 - keep))
        out = reduced(g, "ReduceProd", rows, [rank])
        return out if axis == rank - 1 else g.op("Transpose", out, perm_i=perm)

    def diagonal(g, x, offset, dim1, dim2):
        rank = helper._get_tensor_rank(x)
        if rank is None:
            return own["diagonal"](g, x, offset, dim1, dim2)
        a, b = axis_of(dim1, rank), axis_of(dim2, rank)
        k = helper._get_const(offset, "i", "offset")
        if a == b:
            return own["diagonal"](g, x, offset, dim1, dim2)
        perm = [d for d in range(rank) if d not in (a, b)] + [a, b]
        moved = g.op("Transpose", x, perm_i=perm)
        shape = g.op("Shape", x)
        rows, cols = (g.op("Gather", shape, ints(g, [axis]), axis_i=0) for axis in (a, b))
        zeros = g.op("ConstantOfShape", g.op("Concat", rows, cols, axis_i=0),
                     value_t=torch.tensor([0.0], dtype=float_type(x)))
        # row i of the sum holds x[i, i + k] where that lies inside, else 0: rows max(0, -k) up to
        # cols - k are the diagonal (Slice stops at the last row)
        summed = reduced(g, "ReduceSum", g.op("Mul", moved, g.op("EyeLike", zeros, k_i=k)), [-1])
        end = g.op("Max", g.op("Sub", cols, ints(g, [k])), ints(g, [0]))  # (not from the end)
        return g.op("Slice", summed, ints(g, [max(0, -k)]), end, ints(g, [rank - 2]))

    def exponential(g, x, lambd=None, generator=None):
        rate = 1.0 if lambd is None or helper._is_none(lambd) else float(helper._get_const(lambd, "f", "lambd"))
        draw = g.op("RandomUniformLike", x)
        return g.op("Div", g.op("Neg", g.op("Log", draw)), const(g, x, rate))

    def reflected(g, x, direct, reflection):
        """f(x) for every x from direct(y), valid for y >= 0.5: direct(x) where x >= 0.5, else
        reflection(x, direct(1 - x)); both branches finite wherever the other is taken."""
        low = g.op("Less", x, const(g, x, 0.5))
        y = g.op("Where", low, g.op("Sub", const(g, x, 1.0), x), x)
        value = direct(y)
        return g.op("Where", low, reflection(x, value), value)

    def shifted(g, y, term):
        """The sum of term(y + i) for i in 0..7, and y + 8 (the recurrence that moves y >= 0.5 to >= 8.5, where
        the asymptotic series below are exact to f32)."""
        total = None
        for i in range(8):
            t = term(g.op("Add", y, const(g, y, float(i))) if i else y)
            total = t if total is None else g.op("Add", total, t)
        return total, g.op("Add", y, const(g, y, 8.0))

    def series(g, z, coefficients, power_step):
        """sum c_k / z^(1 + k power_step) for the coefficients c_k: Horner's form in 1 / z^power_step."""
        inverse = g.op("Reciprocal", z)
        step = g.op("Pow", inverse, const(g, z, float(power_step)))
        acc = const(g, z, coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = g.op("Add", g.op("Mul", acc, step), const(g, z, c))
        return g.op("Mul", acc, inverse)

    def lgamma(g, x):
        """log |Gamma(x)|: Stirling's series at x + 8 less the logs of x .. x + 7 (x >= 0.5), reflected
        below (log pi - log |sin(pi x)| - lgamma(1 - x)); +inf at 0 and the negative integers, as PyTorch's."""
        def direct(y):
            logs, z = shifted(g, y, lambda t: g.op("Log", t))
            stirling = g.op("Add", g.op("Sub", g.op("Mul", g.op("Sub", z, const(g, z, 0.5)), g.op("Log", z)), z),
                            const(g, z, 0.5 * math.log(2 * math.pi)))
            stirling = g.op("Add", stirling, series(g, z, [1 / 12, -1 / 360, 1 / 1260, -1 / 1680], 2))
            return g.op("Sub", stirling, logs)

        def reflection(x, value):
            sine = g.op("Abs", g.op("Sin", g.op("Mul", x, const(g, x, math.pi))))
            return g.op("Sub", g.op("Sub", const(g, x, math.log(math.pi)), g.op("Log", sine)), value)
        return reflected(g, x, direct, reflection)

    def digamma(g, x):
        """psi(x): log z - 1 / (2 z) - the Bernoulli series at z = x + 8, less 1 / (x + i) for i < 8 (x >= 0.5);
        reflected below (psi(1 - x) - pi cot(pi x))."""
        def direct(y):
            reciprocals, z = shifted(g, y, lambda t: g.op("Reciprocal", t))
            asymptotic = g.op("Sub", g.op("Log", z), g.op("Mul", g.op("Reciprocal", z), const(g, z, 0.5)))
            tail = g.op("Mul", series(g, z, [1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132], 2),
                        g.op("Reciprocal", z))  # sum B_2k / (2k z^2k)
            return g.op("Sub", g.op("Sub", asymptotic, tail), reciprocals)

        def reflection(x, value):
            angle = g.op("Mul", x, const(g, x, math.pi))
            cotangent = g.op("Div", g.op("Cos", angle), g.op("Sin", angle))
            return g.op("Sub", value, g.op("Mul", cotangent, const(g, x, math.pi)))
        return reflected(g, x, direct, reflection)

    def polynomial(g, w, coefficients):
        """sum c_k w^k by Horner's rule, the coefficients from the highest power down."""
        acc = const(g, w, coefficients[0])
        for c in coefficients[1:]:
            acc = g.op("Add", g.op("Mul", acc, w), const(g, w, c))
        return acc

    def erfinv(g, y):
        """Giles' single-precision approximation (two polynomials in w = -log(1 - y^2)), then one Newton step
        on erf(x) = y, whose derivative autodiff follows to PyTorch's sqrt(pi) / 2 exp(x^2); for |y| < 1."""
        w = g.op("Neg", g.op("Log", g.op("Sub", const(g, y, 1.0), g.op("Mul", y, y))))
        central = polynomial(g, g.op("Sub", w, const(g, y, 2.5)), [
            2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
            -0.00417768164, 0.246640727, 1.50140941])
        tail = polynomial(g, g.op("Sub", g.op("Sqrt", w), const(g, y, 3.0)), [
            -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
            0.00943887047, 1.00167406, 2.83297682])
        x = g.op("Mul", g.op("Where", g.op("Less", w, const(g, y, 5.0)), central, tail), y)
        slope = g.op("Mul", g.op("Exp", g.op("Neg", g.op("Mul", x, x))), const(g, y, 2 / math.sqrt(math.pi)))
        return g.op("Sub", x, g.op("Div", g.op("Sub", g.op("Erf", x), y), slope))

    def threshold(g, x, limit, value):
        t = float(helper._get_const(limit, "f", "threshold"))
        if t == 0:  # (torch's own takes this one, and refuses any other)
            return own["threshold"](g, x, limit, value)
        return g.op("Where", g.op("Greater", x, const(g, x, t)), x,
                    const(g, x, float(helper._get_const(value, "f", "value"))))

    def unsafe_chunk(g, x, chunks, dim, _outputs=None):
        """x.chunk's split (an LSTMCell's gates, as the trace writes it) where the exporter lost the size of
        the axis (torch refuses it): the sizes computed from Shape, as torch's rule, ceil(size / chunks)
        each and the rest last, for the traced number of outputs (the importer folds them; along a symbolic
        axis into parts of whole multiples of its symbol)."""
        rank = helper._get_tensor_rank(x)
        if _outputs is None or rank is None or opset < 13 or \
                helper._get_tensor_dim_size(x, axis_of(dim, rank)) is not None:
            return own["unsafe_chunk"](g, x, chunks, dim, _outputs)
        n, axis = helper._get_const(chunks, "i", "chunks"), axis_of(dim, rank)
        size = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
        # ceil(size / n) as size - floor(size (n - 1) / n): of a symbolic size k N (a batch stacked k times,
        # chunked) the importer folds it where n divides k, as (size + n - 1) // n it could not fold at all
        each = g.op("Sub", size, g.op("Div", g.op("Mul", size, ints(g, [n - 1])), ints(g, [n])))
        last = g.op("Sub", size, g.op("Mul", each, ints(g, [_outputs - 1])))
        sizes = g.op("Concat", *([each] * (_outputs - 1) + [last]), axis_i=0)
        return g.op("Split", x, sizes, axis_i=axis, outputs=_outputs)

    def constant_chunk(g, x, chunks, dim):
        """x.chunk(chunks, dim) as the trace writes it where the axis' size is not known when exporting (a
        batch stacked k times: SimCLR's, classifier-free guidance's z.chunk(2)): slices at multiples of
        ceil(size / chunks), written as size - floor(size (chunks - 1) / chunks), which the importer folds
        for a symbolic size k N where chunks divides k (torch's own (size + chunks - 1) // chunks it could
        not)."""
        rank = helper._get_tensor_rank(x)
        axis = dim + rank if dim < 0 and rank is not None else dim
        if rank is None or helper._get_tensor_dim_size(x, axis) is not None:
            return own_chunk(g, x, chunks, dim)
        size = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
        each = g.op("Sub", size, g.op("Div", g.op("Mul", size, ints(g, [chunks - 1])), ints(g, [chunks])))
        start, parts = ints(g, [0]), []
        for i in range(chunks):
            end = g.op("Mul", each, ints(g, [i + 1]))
            parts.append(g.op("Slice", x, start, end, ints(g, [axis])))
            start = end
        return parts

    def avg_pool2d(g, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override=None):
        """F.avg_pool2d with divisor_override d (1.x refuses it; 2.x's export leaves it out, a wrong result):
        each window's sum over d, as torch's pool counting the padding times kh kw / d, without ceil_mode
        (its partial windows count fewer elements)."""
        if divisor_override is None or helper._is_none(divisor_override):
            return own["avg_pool2d"](g, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                     divisor_override)
        if helper._maybe_get_const(ceil_mode, "i"):
            raise TightfitError("from_torch: F.avg_pool2d with divisor_override and ceil_mode is not supported")
        window = helper._get_const(kernel_size, "is", "kernel_size")
        counted = own["avg_pool2d"](g, x, kernel_size, stride, padding, ceil_mode, True, None)
        divisor = float(helper._get_const(divisor_override, "i", "divisor_override"))
        return g.op("Mul", counted, const(g, x, window[0] * window[-1] / divisor))

    def batch_norm(g, x, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
        """BatchNorm without running statistics (track_running_stats=False, F.batch_norm(x, None, None)): the
        batch's mean and biased variance over every axis but the channel's, in training and in eval alike
        (torch's symbolic needs a fixed batch size for it)."""
        if not (running_mean is None or helper._is_none(running_mean)):
            return own["batch_norm"](g, x, weight, bias, running_mean, running_var, training, momentum, eps,
                                     cudnn_enabled)
        rank = helper._get_tensor_rank(x)
        if rank is None or rank < 2:
            raise TightfitError("from_torch: BatchNorm without running statistics of a tensor of unknown rank")
        axes = [0] + list(range(2, rank))
        centred = g.op("Sub", x, reduced(g, "ReduceMean", x, axes, True))
        variance = reduced(g, "ReduceMean", g.op("Mul", centred, centred), axes, True)
        epsilon = float(helper._get_const(eps, "f", "eps"))
        y = g.op("Div", centred, g.op("Sqrt", g.op("Add", variance, const(g, x, epsilon))))
        per_channel = [-1] + [1] * (rank - 2)  # a [C] parameter against [N, C, ...]
        if not (weight is None or helper._is_none(weight)):
            y = g.op("Mul", y, g.op("Reshape", weight, ints(g, per_channel)))
        if not (bias is None or helper._is_none(bias)):
            y = g.op("Add", y, g.op("Reshape", bias, ints(g, per_channel)))
        return y

    # torch's own runs where these do not apply (they call it)
    replaced = {"diagonal": diagonal, "adaptive_avg_pool1d": adaptive("adaptive_avg_pool1d", False),
                "adaptive_avg_pool2d": adaptive("adaptive_avg_pool2d", False),
                "adaptive_max_pool1d": adaptive("adaptive_max_pool1d", True),
                "adaptive_max_pool2d": adaptive("adaptive_max_pool2d", True), "threshold": threshold,
                "unsafe_chunk": unsafe_chunk, "avg_pool2d": avg_pool2d, "batch_norm": batch_norm}
    own = {name: symbolic_of("aten::" + name, opset) for name in replaced}
    # in place of torch's, whatever it has
    instead = {"cdist": cdist}
    # where torch has none at this opset
    added_only = {"trunc": trunc, "logit": logit, "xlogy": xlogy, "hypot": hypot, "copysign": copysign,
                  "heaviside": heaviside, "count_nonzero": count_nonzero, "diag_embed": diag_embed, "kron": kron,
                  "bilinear": bilinear, "cumprod": cumprod, "exponential": exponential, "lgamma": lgamma,
                  "digamma": digamma, "erfinv": erfinv}
    own_chunk = symbolic_of("prim::ConstantChunk", max(opset, 11))
    if own_chunk is not None:
        instead["prim::ConstantChunk"] = constant_chunk
    chosen = {**{n: f for n, f in replaced.items() if own[n] is not None}, **instead,
              **{n: f for n, f in added_only.items() if not registered("aten::" + n, opset)}}
    # from opset 9, and again from each opset where torch's own changes (its diagonal is an opset-13 symbolic,
    # which one registered at 9 would not replace there)
    def qualified(name):
        return name if "::" in name else "aten::" + name
    return _symbolic_registry.register(torch, {
        name: (symbolic, [9] + [v for v in range(10, opset + 1)
                                if symbolic_of(qualified(name), v) is not symbolic_of(qualified(name), v - 1)])
        for name, symbolic in chosen.items()})
