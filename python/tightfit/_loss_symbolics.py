"""Symbolics for PyTorch's loss functions that its TorchScript exporter has none for (F.mse_loss under 1.x,
and under 1.x and 2.x F.l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, margin_ranking_loss,
soft_margin_loss, hinge_embedding_loss, cosine_embedding_loss, poisson_nll_loss, triplet_margin_loss): a
module that computes
its own loss with one of them (from_torch(loss="output")) exports as the element-wise ONNX operators of
PyTorch's own formula, which the importer reads and autodiff differentiates as PyTorch's backward does
(the steps of a branch taken by Where are masks without a gradient). Each is registered only where the
exporter has none at the export's opset; and F.cross_entropy's in place of torch's, which refuses label
smoothing and an ignore_index read from a shape."""

from . import _symbolic_registry
from ._lib import TightfitError

# aten's reduction codes: none, mean, sum
_NONE, _MEAN, _SUM = 0, 1, 2


def register(torch, opset, helper, registered):
    """Registers the symbolics above that `opset` lacks (`registered(name, opset)` says which it has);
    returns the function that removes them."""

    def const(g, like, value):
        """A scalar constant of `like`'s floating type (f32 where the trace gives it no float type)."""
        name = like.type().scalarType() if hasattr(like.type(), "scalarType") else None
        dtype = {"Half": torch.float16, "BFloat16": torch.bfloat16}.get(name, torch.float32)
        return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))

    def reduced(g, loss, reduction):
        code = helper._maybe_get_const(reduction, "i")
        if code == _NONE:
            return loss
        return g.op("ReduceMean" if code == _MEAN else "ReduceSum", loss, keepdims_i=0)

    def number(value, name):
        return float(helper._get_const(value, "f", name))

    def relu(g, x):
        return g.op("Relu", x)

    def where_equal(g, y, value, x):
        """x where y == value, else 0."""
        return g.op("Where", g.op("Equal", y, const(g, y, value)), x, const(g, x, 0.0))

    def mse_loss(g, x, target, reduction):
        d = g.op("Sub", x, target)
        return reduced(g, g.op("Mul", d, d), reduction)

    def l1_loss(g, x, target, reduction):
        return reduced(g, g.op("Abs", g.op("Sub", x, target)), reduction)

    def smooth_l1_loss(g, x, target, reduction, beta):
        b = number(beta, "beta")
        d = g.op("Abs", g.op("Sub", x, target))
        if b == 0:
            return reduced(g, d, reduction)
        small = g.op("Div", g.op("Mul", g.op("Mul", d, d), const(g, x, 0.5)), const(g, x, b))
        return reduced(g, g.op("Where", g.op("Less", d, const(g, x, b)), small, g.op("Sub", d, const(g, x, 0.5 * b))),
                       reduction)

    def huber_loss(g, x, target, reduction, delta):
        c = number(delta, "delta")
        d = g.op("Abs", g.op("Sub", x, target))
        small = g.op("Mul", g.op("Mul", d, d), const(g, x, 0.5))
        large = g.op("Mul", g.op("Sub", d, const(g, x, 0.5 * c)), const(g, x, c))
        return reduced(g, g.op("Where", g.op("Less", d, const(g, x, c)), small, large), reduction)

    def binary_cross_entropy(g, p, target, weight, reduction):
        # PyTorch clamps each log at -100, so that p of 0 or 1 gives a finite loss
        def log_at_least(v):
            return g.op("Clip", g.op("Log", v), const(g, p, -100.0))
        one = const(g, p, 1.0)
        loss = g.op("Neg", g.op("Add", g.op("Mul", target, log_at_least(p)),
                                g.op("Mul", g.op("Sub", one, target), log_at_least(g.op("Sub", one, p)))))
        if weight is not None and not helper._is_none(weight):
            loss = g.op("Mul", loss, weight)
        return reduced(g, loss, reduction)

    def margin_ranking_loss(g, x1, x2, target, margin, reduction):
        m = number(margin, "margin")
        return reduced(g, relu(g, g.op("Add", g.op("Neg", g.op("Mul", target, g.op("Sub", x1, x2))), const(g, x1, m))),
                       reduction)

    def soft_margin_loss(g, x, target, reduction):
        return reduced(g, g.op("Softplus", g.op("Neg", g.op("Mul", target, x))), reduction)

    def hinge_embedding_loss(g, x, target, margin, reduction):
        m = number(margin, "margin")
        above = relu(g, g.op("Sub", const(g, x, m), x))
        keep = g.op("Where", g.op("Equal", target, const(g, target, 1.0)), x, const(g, x, 0.0))
        return reduced(g, g.op("Add", keep, where_equal(g, target, -1.0, above)), reduction)

    def cosine_embedding_loss(g, x1, x2, target, margin, reduction):
        m, eps = number(margin, "margin"), 1e-12  # PyTorch's EPSILON in the magnitudes

        def total(v):
            return g.op("ReduceSum", v, g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)), keepdims_i=0)

        dot = total(g.op("Mul", x1, x2))
        mag1, mag2 = g.op("Add", total(g.op("Mul", x1, x1)), const(g, x1, eps)), g.op("Add", total(g.op("Mul", x2, x2)),
                                                                                     const(g, x1, eps))
        cos = g.op("Div", dot, g.op("Sqrt", g.op("Mul", mag1, mag2)))
        positive = where_equal(g, target, 1.0, g.op("Sub", const(g, x1, 1.0), cos))
        negative = where_equal(g, target, -1.0, relu(g, g.op("Sub", cos, const(g, x1, m))))
        return reduced(g, g.op("Add", positive, negative), reduction)

    def poisson_nll_loss(g, x, target, log_input, full, eps, reduction):
        if helper._maybe_get_const(log_input, "b"):
            loss = g.op("Sub", g.op("Exp", x), g.op("Mul", target, x))
        else:
            loss = g.op("Sub", x, g.op("Mul", target, g.op("Log", g.op("Add", x, const(g, x, number(eps, "eps"))))))
        if helper._maybe_get_const(full, "b"):  # Stirling's term where target > 1
            stirling = g.op("Add", g.op("Sub", g.op("Mul", target, g.op("Log", target)), target),
                            g.op("Mul", g.op("Log", g.op("Mul", target, const(g, x, 2 * 3.141592653589793))),
                                 const(g, x, 0.5)))
            loss = g.op("Add", loss, g.op("Where", g.op("Greater", target, const(g, x, 1.0)), stirling, const(g, x, 0.0)))
        return reduced(g, loss, reduction)

    def triplet_margin_loss(g, anchor, positive, negative, margin, p, eps, swap, reduction):
        m, e, power = number(margin, "margin"), number(eps, "eps"), number(p, "p")

        def distance(x1, x2):  # F.pairwise_distance: the p-norm of x1 - x2 + eps over the last axis
            d = g.op("Add", g.op("Sub", x1, x2), const(g, x1, e))
            if power == 2:
                return g.op("ReduceL2", d, axes_i=[-1], keepdims_i=0)
            total = g.op("ReduceSum", g.op("Pow", g.op("Abs", d), const(g, x1, power)),
                         g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)), keepdims_i=0)
            return g.op("Pow", total, const(g, x1, 1.0 / power))

        near, far = distance(anchor, positive), distance(anchor, negative)
        if helper._maybe_get_const(swap, "b"):
            far = g.op("Min", far, distance(positive, negative))
        return reduced(g, relu(g, g.op("Add", g.op("Sub", near, far), const(g, anchor, m))), reduction)

    def static_int(value):
        """The integer `value` holds: a constant, or an axis's size read from a tensor whose size there is
        fixed (Gather(Shape(x), k): BertForQuestionAnswering's ignore_index = start_logits.size(1)); None."""
        constant = helper._maybe_get_const(value, "i")
        if not helper._is_value(constant):
            return int(constant)
        node = value.node()
        if node.kind() != "onnx::Gather" or next(node.inputs()).node().kind() != "onnx::Shape":
            return None
        index = helper._maybe_get_const(list(node.inputs())[1], "i")
        sizes = helper._get_tensor_sizes(next(next(node.inputs()).node().inputs()))
        if helper._is_value(index) or sizes is None or not -len(sizes) <= index < len(sizes):
            return None
        return sizes[index]

    def reduce_counted(g, per, counts, code):
        """Per-label losses `per` (0 where a label does not count), reduced as aten's `code` over the counts."""
        if code == _NONE:
            return per
        total = g.op("ReduceSum", per, keepdims_i=0)
        return total if code == _SUM else g.op("Div", total, g.op("ReduceSum", counts, keepdims_i=0))

    def cross_entropy_loss(g, x, target, weight, reduction, ignore_index, label_smoothing):
        """torch's own (SoftmaxCrossEntropyLoss), and also: an ignore_index computed in the graph (a size read
        from a shape: BertForQuestionAnswering's start_logits.size(1)), as the loss of the labels with the
        ignored ones made class 0, times their 0/1 counts; label smoothing (without class weights), (1 - e)
        CE + e the mean over the classes of -log_softmax, over the labels that count."""
        ignored = static_int(ignore_index)
        code = helper._maybe_get_const(reduction, "i")
        smoothing = helper._maybe_get_const(label_smoothing, "f")
        smoothing = 0.0 if helper._is_value(smoothing) or smoothing is None else float(smoothing)
        weighted = not (weight is None or helper._is_none(weight))
        mode = {_NONE: "none", _MEAN: "mean", _SUM: "sum"}[code]
        if weighted and (ignored is None or smoothing):
            raise TightfitError("from_torch: cross_entropy with class weights and label smoothing or an ignore_index "
                                "computed in the graph is not supported")
        ignore = g.op("Constant", value_t=torch.tensor(ignored)) if ignored is not None else ignore_index
        counts = g.op("Cast", g.op("Not", g.op("Equal", target, ignore)), to_i=1)  # FLOAT: 1 where a label counts
        if ignored is not None:
            loss = g.op("SoftmaxCrossEntropyLoss", *([x, target] + ([weight] if weighted else [])), reduction_s=mode,
                        ignore_index_i=ignored)
        else:
            labels = g.op("Where", g.op("Equal", target, ignore), g.op("Constant", value_t=torch.tensor(0)), target)
            per = g.op("Mul", g.op("SoftmaxCrossEntropyLoss", x, labels, reduction_s="none"), counts)
            loss = reduce_counted(g, per, counts, code)
        if smoothing == 0.0:
            return loss
        spread = g.op("Neg", g.op("ReduceMean", g.op("LogSoftmax", x, axis_i=1), axes_i=[1], keepdims_i=0))
        spread = reduce_counted(g, g.op("Mul", spread, counts), counts, code)
        return g.op("Add", g.op("Mul", loss, const(g, x, 1.0 - smoothing)), g.op("Mul", spread, const(g, x, smoothing)))

    symbolics = {"mse_loss": mse_loss, "l1_loss": l1_loss, "smooth_l1_loss": smooth_l1_loss,
                 "huber_loss": huber_loss, "binary_cross_entropy": binary_cross_entropy,
                 "margin_ranking_loss": margin_ranking_loss, "soft_margin_loss": soft_margin_loss,
                 "hinge_embedding_loss": hinge_embedding_loss, "cosine_embedding_loss": cosine_embedding_loss,
                 "poisson_nll_loss": poisson_nll_loss, "triplet_margin_loss": triplet_margin_loss,
                 "cross_entropy_loss": cross_entropy_loss}
    # torch's own cross_entropy_loss is an opset-12 symbolic, which one registered from opset 9 would not replace
    # there
    return _symbolic_registry.register(torch, {
        name: (symbolic, (9, 12) if name == "cross_entropy_loss" else (9,) if not registered("aten::" + name, opset)
               else ()) for name, symbolic in symbolics.items()})
