"""What the symbolic modules (_linalg_, _loss_, _math_, _order_, _pointwise_, _scatter_symbolics) share:
registering their symbolics with torch's exporter and removing them afterwards, and the small constants they
write."""


def register(torch, versions_of):
    """Registers each symbolic of `versions_of` ({aten name, or namespace::name: (symbolic, opset versions)}) as
    the exporter's custom symbolic at each of its versions; returns the function that removes them all."""
    added = []
    for name, (symbolic, versions) in versions_of.items():
        qualified = name if "::" in name else "aten::" + name  # (prim::ConstantChunk keeps its namespace)
        for version in versions:
            torch.onnx.register_custom_op_symbolic(qualified, symbolic, version)
            added.append((qualified, version))

    def restore():
        for name, version in added:
            torch.onnx.unregister_custom_op_symbolic(name, version)
    return restore


def float_type(torch, like):
    """The torch floating dtype of a traced value (float32 where the trace gives it none)."""
    name = like.type().scalarType() if hasattr(like.type(), "scalarType") else None
    return {"Half": torch.float16, "BFloat16": torch.bfloat16, "Double": torch.float64}.get(name, torch.float32)


def int64_constant(torch, g, values):
    """An int64 Constant node of `values`."""
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


class Writer:
    """The small ONNX constants and reductions every symbolic module writes, bound to torch and its exporter's
    symbolic_helper."""

    def __init__(self, torch, helper):
        self.torch, self.helper = torch, helper

    def ints(self, g, values):
        """An int64 Constant of `values`."""
        return int64_constant(self.torch, g, values)

    def float_type(self, like):
        return float_type(self.torch, like)

    def const(self, g, like, value):
        """A Constant of `like`'s floating type (f32 where the trace gives it none)."""
        return g.op("Constant", value_t=self.torch.tensor(value, dtype=float_type(self.torch, like)))

    def absent(self, value):
        """Whether an optional argument was left out (None, or a traced None)."""
        return value is None or self.helper._is_none(value)

    def reduced(self, g, op, x, axes, keep=False):
        """ReduceX of x over `axes` as the graph's opset writes it: axes an input from 18 (ReduceSum's from 13)."""
        if g.opset >= 18 or (op == "ReduceSum" and g.opset >= 13):
            return g.op(op, x, self.ints(g, axes), keepdims_i=int(keep))
        return g.op(op, x, axes_i=axes, keepdims_i=int(keep))

