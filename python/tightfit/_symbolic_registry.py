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
