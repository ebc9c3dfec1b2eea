#!/usr/bin/python3
"""Writes the ONNX importer's fuzz seeds to tests/fuzz/corpus/onnx/ (run with /usr/bin/python3).

Hand-encoded models (tests/import/import_errors.py's protobuf encoder, byte-for-byte deterministic):
a Relu, an Abs of a Sub, a Conv with weights, a weight-normed (ReduceL2) 1-d ConvTranspose, an
InstanceNormalization, a half_pixel Resize, a MatMul + Add with a Shape/Gather/Unsqueeze/Concat/Reshape chain, an
exact-GELU pattern, a Softmax + Flatten + Transpose, a padding mask from data (Equal, Where, Cast to
BOOL, Not), a bf16 MatMul + Add + Mul (raw and int32_data
bf16 initializers), an eval-mode BatchNormalization with a tied running variance, DepthToSpace +
SpaceToDepth + a reflect Pad + a 1-d MaxPool + a Relu RNN, an ArgMin lookup + a flip + Sin, Clips by
constant bounds around a HardSwish, the losses with ignore_index -100, a LayerNormalization from axis -2, gathers and a scatter by data, an If of a known condition with an If
inside its branch beside TopK and EyeLike, CastLike to a comparison's and an initializer's type beside an EyeLike of
a symbolic [N, N] and a Reshape of N rows into pairs, a masked mean (x[mask] computed densely), an STFT by a Hann window into a mel filter bank beside an inverse DFT,
a GridSample by a grid of data into a ConvTranspose of an output_shape, a slice that selects nothing
concatenated into a ReduceProd of data and a nearest Resize to 3 x 7 beside Max and Trilu of int64 data, an opset-3 Relu
(read as opset 7's) and an opset-3 Reshape (its shape attribute, which the importer refuses).
Each is under 1 KiB."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import"))
from import_errors import attribute_string, field_bytes, field_float, field_varint, int_tensor, model, node, tensor, value_info  # noqa: E402


def const_node(name, output, dims, ints=None, floats=None):
    if ints is not None:
        t = b"".join(field_varint(1, d) for d in dims) + field_varint(2, 7) + field_bytes(9, struct.pack(f"<{len(ints)}q", *ints))
    else:
        t = b"".join(field_varint(1, d) for d in dims) + field_varint(2, 1) + field_bytes(9, struct.pack(f"<{len(floats)}f", *floats))
    attribute = field_bytes(5, field_bytes(1, "value") + field_bytes(5, t) + field_varint(20, 4))
    return node("Constant", [], [output], name, attribute)


def bf16_bits(value):
    """The bf16 bit pattern of `value` (rounded to nearest even)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def bf16_tensor(name, dims, values, raw=True):
    """A BFLOAT16 (16) initializer: raw little-endian bits, or each value's bits in int32_data."""
    bits = [bf16_bits(v) for v in values]
    data = field_bytes(9, struct.pack(f"<{len(bits)}H", *bits)) if raw else b"".join(field_varint(5, b) for b in bits)
    return b"".join(field_varint(1, d) for d in dims) + field_varint(2, 16) + field_bytes(8, name) + data


def ints_attribute(name, values):
    return field_bytes(5, field_bytes(1, name) + b"".join(field_varint(8, v) for v in values) + field_varint(20, 7))


def int_attribute(name, value):
    return field_bytes(5, field_bytes(1, name) + field_varint(3, value) + field_varint(20, 2))


SEEDS = {
    "relu.onnx": model([node("Relu", ["x"], ["y"], "relu")], [value_info("x", 1, ["N", 4])],
                       [value_info("y", 1, ["N", 4])]),
    "abs.onnx": model([node("Sub", ["x", "x"], ["d"], "sub"), node("Abs", ["d"], ["y"], "abs")],
                      [value_info("x", 1, ["N", 4])], [value_info("y", 1, ["N", 4])]),
    "weight_norm_deconv1d.onnx": model([
        node("ReduceL2", ["v"], ["n"], "norm", ints_attribute("axes", [1, 2]) + int_attribute("keepdims", 1)),
        node("Div", ["v", "n"], ["d"], "div"),
        node("Mul", ["d", "g"], ["w"], "mul"),
        node("ConvTranspose", ["x", "w"], ["y"], "deconv", ints_attribute("strides", [2]) +
             ints_attribute("pads", [1, 1]) + ints_attribute("kernel_shape", [4])),
    ], [value_info("x", 1, ["N", 2, 5])], [value_info("y", 1, ["N", 3, 10])],
        [tensor("v", [2, 3, 4], [0.1 * (i - 11) for i in range(24)]), tensor("g", [2, 1, 1], [0.5, 2.0])]),
    "instance_norm.onnx": model([node("InstanceNormalization", ["x", "s", "b"], ["y"], "norm")],
                                [value_info("x", 1, ["N", 2, 3, 3])], [value_info("y", 1, ["N", 2, 3, 3])],
                                [tensor("s", [2], [1.5, 0.5]), tensor("b", [2], [0.0, -1.0])]),
    "resize.onnx": model([node("Resize", ["x", "", "scales"], ["y"], "up",
                               field_bytes(5, field_bytes(1, "coordinate_transformation_mode") +
                                           field_bytes(4, "half_pixel") + field_varint(20, 3)))],
                         [value_info("x", 1, ["N", 2, 3])], [value_info("y", 1, ["N", 2, 6])],
                         [tensor("scales", [3], [1.0, 1.0, 2.0])]),
    "conv.onnx": model([node("Conv", ["x", "w", "b"], ["y"], "conv", ints_attribute("pads", [1, 1, 1, 1]) +
                             ints_attribute("kernel_shape", [3, 3]))],
                       [value_info("x", 1, ["N", 1, 4, 4])], [value_info("y", 1, ["N", 2, 4, 4])],
                       [tensor("w", [2, 1, 3, 3], [0.25] * 18), tensor("b", [2], [0.5, -0.5])]),
    "reshape.onnx": model([
        node("MatMul", ["x", "w"], ["h"], "mm"),
        node("Add", ["h", "b"], ["a"], "add"),
        node("Shape", ["a"], ["s"], "shape"),
        const_node("c0", "zero", [], ints=[0]),
        node("Gather", ["s", "zero"], ["n"], "gather", int_attribute("axis", 0)),
        const_node("c1", "axes", [1], ints=[0]),
        node("Unsqueeze", ["n", "axes"], ["n1"], "unsqueeze"),
        const_node("c2", "rest", [2], ints=[2, 2]),
        node("Concat", ["n1", "rest"], ["shape4"], "concat", int_attribute("axis", 0)),
        node("Reshape", ["a", "shape4"], ["y"], "reshape"),
    ], [value_info("x", 1, ["N", 4])], [value_info("y", 1, ["N", 2, 2])],
        [tensor("w", [4, 4], [0.1 * i for i in range(16)]), tensor("b", [4], [1, 2, 3, 4])]),
    "gelu.onnx": model([
        const_node("k0", "sqrt2", [], floats=[2 ** 0.5]),
        node("Div", ["x", "sqrt2"], ["d"], "div"),
        node("Erf", ["d"], ["e"], "erf"),
        const_node("k1", "one", [], floats=[1.0]),
        node("Add", ["e", "one"], ["p"], "add"),
        node("Mul", ["x", "p"], ["m"], "mul"),
        const_node("k2", "half", [], floats=[0.5]),
        node("Mul", ["m", "half"], ["y"], "mul_half"),
    ], [value_info("x", 1, ["N", "T", 8])], [value_info("y", 1, ["N", "T", 8])]),
    "softmax.onnx": model([
        node("Transpose", ["x"], ["t"], "transpose", ints_attribute("perm", [0, 2, 1])),
        node("Softmax", ["t"], ["s"], "softmax", int_attribute("axis", -1)),
        node("Flatten", ["s"], ["y"], "flatten", int_attribute("axis", 1)),
    ], [value_info("x", 1, ["N", 3, 5])], [value_info("y", 1, ["N", 15])]),
    # a bf16 model: a bf16 input, a raw bf16 weight, a bias in int32_data, a bf16 constant (scalar)
    "bf16.onnx": model([
        node("MatMul", ["x", "w"], ["h"], "mm"),
        node("Add", ["h", "b"], ["a"], "add"),
        node("Mul", ["a", "k"], ["y"], "scale"),
    ], [value_info("x", 16, ["N", 4])], [value_info("y", 16, ["N", 3])],
        [bf16_tensor("w", [4, 3], [0.1 * i - 0.5 for i in range(12)]),
         bf16_tensor("b", [3], [0.25, -1.5, 3.0], raw=False), bf16_tensor("k", [], [0.5])]),
    # an eval-mode BatchNormalization whose running variance is tied by value to its scale through an
    # Identity (as torch's eval-mode export writes equal initializers)
    "batch_norm.onnx": model([
        node("Identity", ["scale"], ["var"], "tie"),
        node("BatchNormalization", ["x", "scale", "b", "mean", "var"], ["n"], "bn", field_bytes(5, field_bytes(
            1, "epsilon") + field_float(2, 1e-5) + field_varint(20, 1))),
        node("Relu", ["n"], ["y"], "relu"),
    ], [value_info("x", 1, ["N", 2, 4, 4])], [value_info("y", 1, ["N", 2, 4, 4])],
        [tensor("scale", [2], [1.0, 1.0]), tensor("b", [2], [0.0, 0.25]), tensor("mean", [2], [0.5, -0.5])]),
    # a padding mask from data (import/onnx_mask.c): Equal of an int64 mask with 0 into masked_fill(-inf),
    # Cast to BOOL, Not, and a Where whose data branch comes first
    "padding_mask.onnx": model([
        const_node("k0", "axes", [1], ints=[1]),
        node("Unsqueeze", ["m", "axes"], ["mk"], "unsqueeze"),
        const_node("k1", "zero", [], ints=[0]),
        node("Equal", ["mk", "zero"], ["c"], "eq"),
        const_node("k2", "ninf", [], floats=[float("-inf")]),
        node("Where", ["c", "ninf", "x"], ["s"], "fill"),
        node("Softmax", ["s"], ["p"], "softmax", int_attribute("axis", -1)),
        node("Cast", ["mk"], ["b"], "cast", int_attribute("to", 9)),
        node("Not", ["b"], ["nb"], "not"),
        const_node("k3", "zf", [], floats=[0.0]),
        node("Where", ["nb", "zf", "p"], ["y"], "clear"),
    ], [value_info("x", 1, ["N", "T", "T"]), value_info("m", 7, ["N", "T"])], [value_info("y", 1, ["N", "T", "T"])]),
    "opset3.onnx": model([node("Relu", ["x"], ["y"], "relu")], [value_info("x", 1, ["N", 4])],
                         [value_info("y", 1, ["N", 4])], opset=3),
    # Reshape-1's shape attribute, a definition before opset 7 the importer refuses (import/onnx_legacy.c)
    "opset3_reshape.onnx": model([node("Reshape", ["x"], ["y"], "flat", ints_attribute("shape", [2, -1]))],
                                 [value_info("x", 1, [4, 4])], [value_info("y", 1, [2, 8])], opset=3),
    # pixel shuffles (import/onnx_depth_space.c), a reflect pad (import/onnx_axis_copies.c) and a 1-d
    # MaxPool, a simple RNN (tf_rnn) with Relu
    "shuffle_pad_rnn.onnx": model([
        node("DepthToSpace", ["x"], ["d"], "shuffle", int_attribute("blocksize", 2) +
             field_bytes(5, field_bytes(1, "mode") + field_bytes(4, "CRD") + field_varint(20, 3))),
        node("SpaceToDepth", ["d"], ["s"], "unshuffle", int_attribute("blocksize", 2)),
        const_node("k0", "shape", [3], ints=[0, 4, 4]),
        node("Reshape", ["s", "shape"], ["r"], "flat"),
        const_node("k1", "pads", [6], ints=[0, 0, 2, 0, 0, 1]),
        node("Pad", ["r", "pads"], ["p"], "mirror",
             field_bytes(5, field_bytes(1, "mode") + field_bytes(4, "reflect") + field_varint(20, 3))),
        node("MaxPool", ["p"], ["q"], "pool", ints_attribute("kernel_shape", [2]) + ints_attribute("strides", [2])),
        node("Transpose", ["q"], ["t"], "time_major", ints_attribute("perm", [2, 0, 1])),
        node("RNN", ["t", "w", "rr", "b"], ["y"], "rnn", int_attribute("hidden_size", 2) +
             field_bytes(5, field_bytes(1, "activations") + field_bytes(9, "Relu") + field_varint(20, 8))),
    ], [value_info("x", 1, [2, 4, 2, 2])], [value_info("y", 1, [3, 1, 2, 2])],
        [tensor("w", [1, 2, 4], [0.1 * i for i in range(8)]), tensor("rr", [1, 2, 2], [0.5, -0.5, 0.25, 0.75]),
         tensor("b", [1, 4], [0.0, 0.1, 0.2, 0.3])]),
    # a codebook lookup by ArgMin (import/onnx_argmax.c), a flip (Slice with step -1) and Sin of data
    "argmin_flip_sin.onnx": model([
        node("MatMul", ["x", "codes"], ["d"], "distances"),
        node("ArgMin", ["d"], ["i"], "nearest", int_attribute("axis", 1) + int_attribute("keepdims", 0)),
        node("Gather", ["table", "i"], ["q"], "lookup", int_attribute("axis", 0)),
        const_node("k0", "starts", [1], ints=[-1]),
        const_node("k1", "ends", [1], ints=[-(2 ** 63 - 1)]),
        const_node("k2", "axes", [1], ints=[1]),
        const_node("k3", "steps", [1], ints=[-1]),
        node("Slice", ["q", "starts", "ends", "axes", "steps"], ["f"], "flip"),
        node("Sin", ["f"], ["y"], "sin"),
    ], [value_info("x", 1, ["N", 3])], [value_info("y", 1, ["N", 2])],
        [tensor("codes", [3, 4], [0.1 * i - 0.5 for i in range(12)]), tensor("table", [4, 2], [0.5 * i for i in range(8)])]),
    # clip ops (import/onnx_elementwise.c's constant bounds): a one-sided Clip, HardSwish, ReLU6's Clip
    "clip_hardswish.onnx": model([
        const_node("k0", "lo", [], floats=[-1.0]),
        const_node("k1", "hi", [], floats=[6.0]),
        node("Clip", ["x", "lo"], ["c"], "floor"),
        node("HardSwish", ["c"], ["h"], "hswish"),
        node("Clip", ["h", "", "hi"], ["y"], "relu6"),
    ], [value_info("x", 1, ["N", 4])], [value_info("y", 1, ["N", 4])]),
    # the losses (import/onnx_loss.c) with PyTorch's ignore_index -100: NLL of a LogSoftmax over the classes
    # (the cross_entropy op) and a weighted SoftmaxCrossEntropyLoss, reduction none (the masked one-hot)
    "losses_ignore_index.onnx": model([
        node("LogSoftmax", ["x"], ["lp"], "log_softmax", int_attribute("axis", 1)),
        node("NegativeLogLikelihoodLoss", ["lp", "y"], ["a"], "nll", int_attribute("ignore_index", -100 % 2 ** 64)),
        node("SoftmaxCrossEntropyLoss", ["x", "y", "w"], ["b"], "sce",
             int_attribute("ignore_index", -100 % 2 ** 64) + attribute_string("reduction", "none")),
        node("ReduceSum", ["b"], ["s"], "sum", int_attribute("keepdims", 0)),
        node("Add", ["a", "s"], ["loss"], "add"),
    ], [value_info("x", 1, ["N", 5, 3]), value_info("y", 7, ["N", 3])], [value_info("loss", 1, [])],
        [tensor("w", [5], [0.5, 2.0, 1.0, 0.25, 3.0])]),
    # LayerNormalization from axis -2 (import/onnx_dense.c): scale [2, 3], bias broadcast from [3], Mean output
    "layer_norm_axes.onnx": model([
        node("LayerNormalization", ["x", "g", "b"], ["y", "m"], "norm", int_attribute("axis", -2 % 2 ** 64)),
        node("Add", ["y", "m"], ["z"], "add"),
    ], [value_info("x", 1, ["N", 2, 3])], [value_info("z", 1, ["N", 2, 3])],
        [tensor("g", [2, 3], [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]), tensor("b", [3], [0.1, 0.2, 0.3])]),
    # indices computed at run time (import/onnx_indices.c): Gather along axis 1, GatherElements, ScatterElements
    "indices_of_data.onnx": model([
        node("Gather", ["x", "j"], ["g"], "take", int_attribute("axis", 1)),
        node("GatherElements", ["g", "i"], ["e"], "pick", int_attribute("axis", 1)),
        node("ScatterElements", ["x", "i", "e"], ["y"], "put", int_attribute("axis", 1) +
             attribute_string("reduction", "add")),
    ], [value_info("x", 1, ["N", 4]), value_info("j", 7, [3]), value_info("i", 7, ["N", 2])],
        [value_info("y", 1, ["N", 4])]),
}


def attribute_graph(name, nodes, outputs):
    """An attribute holding a subgraph (an If's branch): its nodes and outputs (value_info bytes)."""
    graph = b"".join(field_bytes(1, n) for n in nodes) + field_bytes(2, name) + b"".join(field_bytes(12, o) for o in outputs)
    return field_bytes(5, field_bytes(1, name) + field_bytes(6, graph) + field_varint(20, 5))


SEEDS["if_topk_eye.onnx"] = model([
    # If(Shape(x)[1] == 4): the then branch an If of its own, reading x's Relu from two levels up
    node("Relu", ["x"], ["r"], "relu"),
    node("Shape", ["x"], ["s"], "shape"),
    const_node("k0", "one", [], ints=[1]),
    node("Gather", ["s", "one"], ["n"], "size", int_attribute("axis", 0)),
    const_node("k1", "four", [], ints=[4]),
    node("Equal", ["n", "four"], ["c"], "is_four"),
    node("If", ["c"], ["b"], "outer",
         attribute_graph("then_branch", [node("If", ["c"], ["t"], "inner",
                                              attribute_graph("then_branch", [node("Neg", ["r"], ["u"], "neg")],
                                                              [value_info("u", 1, ["N", 4])]) +
                                              attribute_graph("else_branch", [node("Identity", ["x"], ["v"], "same")],
                                                              [value_info("v", 1, ["N", 4])]))],
                         [value_info("t", 1, ["N", 4])]) +
         attribute_graph("else_branch", [node("Identity", ["x"], ["e"], "keep")], [value_info("e", 1, ["N", 4])])),
    # TopK of data (import/onnx_argmax.c) and an identity of a fixed shape (EyeLike)
    const_node("k2", "k", [1], ints=[2]),
    node("TopK", ["b", "k"], ["top", "at"], "top2", int_attribute("axis", 1)),
    node("EyeLike", ["w"], ["eye"], "eye", int_attribute("k", 1)),
    node("MatMul", ["top", "eye"], ["y"], "mix"),
], [value_info("x", 1, ["N", 4])], [value_info("y", 1, ["N", 2])], [tensor("w", [2, 2], [0.5, 1.0, 1.5, 2.0])])

SEEDS["castlike_eye_frozen.onnx"] = model([
    # CastLike to a comparison's type (BOOL) and to an initializer's; an EyeLike of a symbolic [N, N]
    # (import/onnx_layout.c, onnx_constants.c); a Reshape whose fixed size meets the symbol N (the
    # message writes N for its import-time prime)
    const_node("k0", "zero", [], floats=[0.0]),
    node("Greater", ["x", "zero"], ["m"], "positive"),
    node("CastLike", ["x", "m"], ["b"], "like_bool"),
    node("CastLike", ["x", "ids"], ["i"], "like_int"),
    node("MatMul", ["x", "w"], ["sq"], "square"),
    node("Transpose", ["x"], ["xt"], "t"),
    node("MatMul", ["sq", "xt"], ["nn"], "pairs"),
    node("EyeLike", ["nn"], ["eye"], "eye", int_attribute("k", -1)),
    node("Reshape", ["b", "shape"], ["y"], "regroup"),
], [value_info("x", 1, ["N", 4])], [value_info("y", 9, ["M", 2, 4]), value_info("eye", 1, ["N", "N"]),
                                     value_info("i", 7, ["N", 4])],
    [tensor("w", [4, 4], [0.5] * 16), int_tensor("ids", [1], [7]), int_tensor("shape", [3], [-1, 2, 4])], opset=15)

SEEDS["masked_loss.onnx"] = model([
    # boolean indexing reduced to a number (import/onnx_masked.c): mean |x[m] - t[m]| over the frames that
    # are not padding, x[m] broadcast through Shape, ConstantOfShape and Expand as PyTorch writes it
    const_node("k0", "pad", [], floats=[-100.0]),
    node("Equal", ["t", "pad"], ["is_pad"], "is_pad"),
    node("Not", ["is_pad"], ["keep"], "keep"),
    node("NonZero", ["keep"], ["at"], "positions"),
    node("Transpose", ["at"], ["rows"], "rows"),
    node("GatherND", ["x", "rows"], ["xs"], "pick_x"),
    node("GatherND", ["t", "rows"], ["ts"], "pick_t"),
    node("Shape", ["xs"], ["xs_shape"], "shape"),
    node("ConstantOfShape", ["xs_shape"], ["zeros"], "zeros"),
    node("Add", ["zeros", "xs"], ["xs2"], "broadcast"),
    node("Expand", ["ts", "xs_shape"], ["ts2"], "expand"),
    node("Sub", ["xs2", "ts2"], ["d"], "difference"),
    node("Abs", ["d"], ["a"], "magnitude"),
    node("ReduceMean", ["a"], ["y"], "mean", int_attribute("keepdims", 0)),
], [value_info("x", 1, ["N", 3, 4]), value_info("t", 1, ["N", 3, 4])], [value_info("y", 1, [])])

SEEDS["signal.onnx"] = model([
    # ONNX's signal operators (import/onnx_signal.c): a Hann window of known size, an STFT of the signal by it,
    # the power spectrum through a mel filter bank, and an inverse DFT along the frames of the STFT
    const_node("k0", "size", [], ints=[16]),
    const_node("k1", "step", [], ints=[4]),
    const_node("k2", "mels", [], ints=[4]),
    const_node("k3", "rate", [], ints=[8000]),
    const_node("k4", "low", [], floats=[0.0]),
    const_node("k5", "high", [], floats=[3000.0]),
    node("HannWindow", ["size"], ["w"], "window"),
    node("STFT", ["x", "step", "w"], ["s"], "stft"),
    node("Mul", ["s", "s"], ["sq"], "square"),
    const_node("k6", "last", [1], ints=[-1]),
    node("ReduceSum", ["sq", "last"], ["power"], "power", int_attribute("keepdims", 0)),
    node("MelWeightMatrix", ["mels", "size", "rate", "low", "high"], ["bank"], "bank"),
    node("MatMul", ["power", "bank"], ["mel"], "mel"),
    node("DFT", ["s"], ["back"], "inverse", int_attribute("axis", 1) + int_attribute("inverse", 1)),
], [value_info("x", 1, ["N", 64, 1])], [value_info("mel", 1, ["N", 13, 4]), value_info("back", 1, ["N", 13, 9, 2])],
    opset=17)

SEEDS["warp_deconv.onnx"] = model([
    # GridSample by a grid that is data (import/onnx_grid_sample.c), reflection padding, then a ConvTranspose whose
    # output_shape reaches past its full output (onnx_conv.c's conv_transpose_windowed)
    node("GridSample", ["x", "grid"], ["warped"], "warp", attribute_string("padding_mode", "reflection")),
    node("ConvTranspose", ["warped", "w"], ["y"], "deconv", ints_attribute("strides", [2, 2]) +
         ints_attribute("output_shape", [8, 9])),
], [value_info("x", 1, ["N", 1, 4, 4]), value_info("grid", 1, ["N", 3, 3, 2])], [value_info("y", 1, ["N", 1, 8, 9])],
    [tensor("w", [1, 1, 3, 3], [0.25] * 9)], opset=16)


SEEDS["empty_prod_resize.onnx"] = model([
    # a slice that selects nothing concatenated (import/onnx_layout.c's ox_empty), ReduceProd of data along a
    # fixed axis (import/onnx_reduce.c), nearest Resize to a size that is no whole multiple, by one-hot
    # matrices (onnx_resize_linear.c), Max of int64 data, and Trilu of int64 data
    const_node("k0", "from", [1], ints=[4]),
    const_node("k1", "end", [1], ints=[1 << 62]),
    const_node("k2", "axis", [1], ints=[-1]),
    node("Slice", ["x", "from", "end", "axis"], ["rest"], "pass"),
    node("Concat", ["x", "rest"], ["whole"], "whole", int_attribute("axis", -1)),
    node("ReduceProd", ["whole"], ["product"], "product", ints_attribute("axes", [2]) + int_attribute("keepdims", 1)),
    const_node("k3", "scales", [4], floats=[1.0, 1.0, 3.0, 1.75]),
    node("Resize", ["product", "", "scales"], ["resized"], "resize", attribute_string("mode", "nearest") +
         attribute_string("coordinate_transformation_mode", "align_corners") +
         attribute_string("nearest_mode", "ceil")),
    node("Cast", ["x"], ["xi"], "integers", int_attribute("to", 7)),
    node("Max", ["xi", "k"], ["top"], "top"),
    node("Trilu", ["top"], ["tri"], "tri", int_attribute("upper", 0)),
    node("Cast", ["tri"], ["y"], "back", int_attribute("to", 1)),
], [value_info("x", 1, ["N", 1, 4, 4])], [value_info("resized", 1, ["N", 1, 3, 7]), value_info("y", 1, ["N", 1, 4, 4])],
    [int_tensor("k", [4], [0, 1, 2, 3])], opset=17)


def main():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx")
    os.makedirs(folder, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")
    _ = field_float
    return 0


if __name__ == "__main__":
    sys.exit(main())
