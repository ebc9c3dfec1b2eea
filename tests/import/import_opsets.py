#!/usr/bin/python3
"""`tightfit import` of opsets 19, 20 and 21 (what PyTorch 2.9+ exports by default), each model written
with onnx.helper, imported, compiled (--inference), run, and its output compared with numpy's:

  the operators whose definitions changed only by new element types (Transpose, Unsqueeze, Squeeze,
      Flatten, Reshape, Identity, Pad, Cast with opset 19's saturate attribute, Constant,
      ConstantOfShape, Shape, Size) in one chain, at opsets 18, 19, 20 and 21: the same output each time
      (Pad's wrap mode, new in 19, against numpy.pad: import_axis_copies.py)
  Gelu (opset 20), approximate "none" and "tanh", against numpy's erf and tanh forms (within 1e-6)
  ReduceMax and ReduceMin of bool data (opset 20): any and all over an axis, exact
  ConstantOfShape of a bf16 value (opset 20): a bf16 fill
  IsNaN and IsInf (opset 20) of NaN, both infinities and finite values: isnan + 2 isinf, exact
  Resize with half_pixel_symmetric coordinates (opset 19): linear to fractional and whole scales
      against the formula of ONNX's definition; nearest by a whole factor (each element repeated)
  OneHot of uint8 and float indices (cast to int64 first, floats truncated), exact
  GatherND by constant indices (rows, elements with negative indices, batch_dims 1), against numpy, exact
  opsets 1, 3 and 6 (import/onnx_legacy.c): Add with broadcast by axis, Mul by the last axes, Cast by type
      names, Concat's default axis, a test-mode BatchNormalization, Elu and Softplus, within 1e-5 of numpy's
  Resize-10 and Upsample-9 (asymmetric, nearest rounding down where an axis grows and up where it
      shrinks): linear and nearest by fractional and whole scales against that formula (onnxruntime's
      values on these files, 2026-12-07)
and the refusals, each exit 2 naming the node and why (no graph written): Reshape-1's shape attribute, PRelu
before opset 7, Equal broadcast by axis, a per-activation BatchNormalization (opset 6); GatherND by a constant index
outside its axis, and by constant tuples that differ over the batch; a
dilated AveragePool (19), an Upsample that shrinks (9), Cast to float8 (19) and int4 (21), a Constant of uint4 (21), a
ConstantOfShape of float8 (20), Gelu with another approximation, antialiased linear downscaling,
Resize's axes and keep_aspect_ratio_policy (18), GroupNormalization (21), opset 22.

usage: import_opsets.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
"""
import math
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from imported_runs import ImportedRuns
except ImportError as error:
    print(f"import_opsets.py: skipped, cannot import onnx or numpy ({error})")
    sys.exit(77)

F32 = TensorProto.FLOAT
# The element types after Debian's onnx 1.12 (onnx.proto numbers): its TensorProto lacks the names.
FLOAT8E4M3FN, FLOAT8E5M2, UINT4, INT4 = 17, 19, 21, 22


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(value, dtype=dtype), name))


def raw_tensor(name, data_type, dims, raw):
    """A TensorProto of any element type number, its bytes given (onnx 1.12's make_tensor checks the type)."""
    t = TensorProto()
    t.name, t.data_type, t.raw_data = name, data_type, raw
    t.dims.extend(dims)
    return t


def make(nodes, inputs, outputs, opset):
    graph = helper.make_graph(nodes, "opsets", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    # IR 10 is what opset 21 comes with (onnx 1.16); the importer reads any IR from 3 on.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx.helper",
                             ir_version=10 if opset >= 21 else 9 if opset >= 19 else 8)


def type_chain(opset):
    """x [2, 3, 4] -> Transpose -> Unsqueeze -> Squeeze -> Flatten -> Reshape -> Identity -> Pad ->
    Cast f16 (saturate) -> Cast f32, + ConstantOfShape(1.5) + Size(x) * Shape(x)[2]: [2, 15]."""
    cast_attributes = {"saturate": 1} if opset >= 19 else {}
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[0, 2, 1]),
        const("axis1", [1]),
        helper.make_node("Unsqueeze", ["t", "axis1"], ["u"], name="unsqueeze"),
        helper.make_node("Squeeze", ["u", "axis1"], ["s"], name="squeeze"),
        helper.make_node("Flatten", ["s"], ["f"], name="flatten", axis=1),
        const("shape", [2, -1]),
        helper.make_node("Reshape", ["f", "shape"], ["r"], name="reshape"),
        helper.make_node("Identity", ["r"], ["i"], name="identity"),
        const("pads", [0, 1, 0, 2]),
        const("pad_value", 0.25, np.float32),
        helper.make_node("Pad", ["i", "pads", "pad_value"], ["p"], name="pad", mode="constant"),
        helper.make_node("Cast", ["p"], ["h"], name="to_f16", to=TensorProto.FLOAT16, **cast_attributes),
        helper.make_node("Cast", ["h"], ["c"], name="to_f32", to=F32, **cast_attributes),
        const("fill_shape", [15]),
        helper.make_node("ConstantOfShape", ["fill_shape"], ["fill"], name="fill",
                         value=numpy_helper.from_array(np.array([1.5], dtype=np.float32), "v")),
        helper.make_node("Add", ["c", "fill"], ["a"], name="add"),
        helper.make_node("Size", ["x"], ["count"], name="size"),
        helper.make_node("Shape", ["x"], ["dims"], name="shape_of", start=2),
        helper.make_node("Mul", ["count", "dims"], ["product"], name="count_times_width"),
        helper.make_node("Cast", ["product"], ["scale"], name="scale", to=F32),
        helper.make_node("Mul", ["a", "scale"], ["y"], name="mul"),
    ]
    return make(nodes, [("x", F32, [2, 3, 4])], [("y", F32, [2, 15])], opset)


def type_chain_reference(x):
    p = np.pad(x.transpose(0, 2, 1).reshape(2, 12), ((0, 0), (1, 2)), constant_values=0.25)
    return (p.astype(np.float16).astype(np.float64) + 1.5) * (x.size * x.shape[2])


def gelu_model(approximate):
    attributes = {} if approximate is None else {"approximate": approximate}
    return make([helper.make_node("Gelu", ["x"], ["y"], name="gelu", **attributes)], [("x", F32, [3, 7])],
                [("y", F32, [3, 7])], 20)


def bool_reduce(op):
    nodes = [const("axes", [1]), helper.make_node(op, ["x", "axes"], ["r"], name="reduce", keepdims=0),
             helper.make_node("Cast", ["r"], ["y"], name="to_f32", to=F32)]
    return make(nodes, [("x", TensorProto.BOOL, [4, 3])], [("y", F32, [4])], 20)


def finite_masks():
    """isnan(x) + 2 isinf(x) at opset 20 (IsNaN and IsInf gained types there)."""
    nodes = [helper.make_node("IsNaN", ["x"], ["n"], name="isnan"), helper.make_node("IsInf", ["x"], ["i"], name="isinf"),
             helper.make_node("Cast", ["n"], ["nf"], name="n_f32", to=F32),
             helper.make_node("Cast", ["i"], ["if"], name="i_f32", to=F32),
             helper.make_node("Add", ["nf", "if"], ["s"], name="add"), helper.make_node("Add", ["s", "if"], ["y"], name="y")]
    return make(nodes, [("x", F32, [6])], [("y", F32, [6])], 20)


def bf16_fill():
    bits = np.array([0x4040], dtype=np.uint16)  # 3.0 in bf16
    nodes = [const("fill_shape", [2, 3]),
             helper.make_node("ConstantOfShape", ["fill_shape"], ["fill"], name="fill",
                              value=raw_tensor("v", TensorProto.BFLOAT16, [1], bits.tobytes())),
             helper.make_node("Cast", ["fill"], ["f"], name="to_f32", to=F32),
             helper.make_node("Mul", ["x", "f"], ["y"], name="mul")]
    return make(nodes, [("x", F32, [2, 3])], [("y", F32, [2, 3])], 20)


def resize(mode, scales=None, sizes=None, in_shape=(1, 1, 4, 5), opset=19, **attributes):
    nodes = [const("roi", [], np.float32), const("scales", scales if scales is not None else [], np.float32)]
    inputs = ["x", "roi", "scales"]
    if sizes is not None:
        nodes.append(const("sizes", sizes))
        inputs.append("sizes")
    nodes.append(helper.make_node("Resize", inputs, ["y"], name="resize", mode=mode, **attributes))
    out = list(sizes) if sizes is not None else [int(math.floor(d * s)) for d, s in zip(in_shape, scales)]
    return make(nodes, [("x", F32, list(in_shape))], [("y", F32, out)], opset)


def one_hot(elem_type):
    """OneHot (opset 13) of indices of `elem_type` [2, 3], depth 4, values [0, 1]."""
    nodes = [const("depth", 4), const("values", [0.0, 1.0], np.float32),
             helper.make_node("OneHot", ["x", "depth", "values"], ["y"], name="hot")]
    return make(nodes, [("x", elem_type, [2, 3])], [("y", F32, [2, 3, 4])], 13)


def one_hot_reference(x):
    """ONNX's OneHot of x cast to int64 (floats truncated), depth 4: a negative index counts from the end,
    one outside [-4, 4) all zeros."""
    y = np.zeros(x.shape + (4,))
    for at in np.ndindex(*x.shape):
        v = int(x[at])
        v = v + 4 if v < 0 else v
        if 0 <= v < 4:
            y[at + (v,)] = 1
    return y


def legacy_model(opset):
    """Opset `opset` (before 7) forms: Add with broadcast=1 and axis=1 (B [3] along A's axis 1), Mul with
    broadcast=1 and no axis (B [4] on A's last axis), Cast by element type names (FLOAT to INT32, truncating,
    and back), Concat without an axis (1), a test-mode BatchNormalization, and Elu and Softplus (their
    opset-1 and -6 definitions are opset 7's)."""
    bias, scale = np.array([0.5, -1.0, 2.0], np.float32), np.array([1.0, 2.0, -0.5, 3.0], np.float32)
    gamma, beta = np.array([1.5, 0.5, 2.0], np.float32), np.array([0.1, -0.2, 0.3], np.float32)
    mean, var = np.array([0.2, -0.1, 0.0], np.float32), np.array([1.0, 4.0, 0.25], np.float32)
    nodes = [helper.make_node("Add", ["x", "bias"], ["a"], name="add", broadcast=1, axis=1),
             helper.make_node("Mul", ["a", "scale"], ["m"], name="mul", broadcast=1),
             helper.make_node("Cast", ["m"], ["mi"], name="to_int", to="INT32"),
             helper.make_node("Cast", ["mi"], ["mf"], name="to_float", to="FLOAT"),
             helper.make_node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["bn"], name="bn",
                              is_test=1, epsilon=1e-5),
             helper.make_node("Elu", ["bn"], ["e"], name="elu", alpha=0.7),
             helper.make_node("Softplus", ["m"], ["s"], name="softplus"),
             helper.make_node("Concat", ["mf", "e", "s"], ["y"], name="concat")]
    inits = [numpy_helper.from_array(v, n) for n, v in (("bias", bias), ("scale", scale), ("gamma", gamma),
                                                        ("beta", beta), ("mean", mean), ("var", var))]
    graph = helper.make_graph(nodes, "legacy", [helper.make_tensor_value_info("x", F32, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", F32, [2, 9, 4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx.helper",
                             ir_version=3)


def legacy_reference(x):
    bias, scale = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -0.5, 3.0])
    gamma, beta = np.array([1.5, 0.5, 2.0]), np.array([0.1, -0.2, 0.3])
    mean, var = np.array([0.2, -0.1, 0.0]), np.array([1.0, 4.0, 0.25])
    x = x.astype(np.float64)
    m = (x + bias[None, :, None]) * scale
    bn = (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5) * gamma[None, :, None] + beta[None, :, None]
    e = np.where(bn > 0, bn, 0.7 * (np.exp(bn) - 1))
    return np.concatenate([np.trunc(m), e, np.log1p(np.exp(m))], axis=1)


def gather_nd(indices, batch_dims, in_shape, out_shape, opset=13):
    """GatherND of input x by constant `indices` (int64), batch_dims as given."""
    return make([const("i", indices), helper.make_node("GatherND", ["x", "i"], ["y"], name="gather",
                                                       batch_dims=batch_dims)],
                [("x", F32, list(in_shape))], [("y", F32, list(out_shape))], opset)


def gather_nd_reference(x, indices, batch_dims):
    """ONNX's GatherND, by numpy indexing (each batch position by its own tuples)."""
    indices = np.asarray(indices)
    if batch_dims == 0:
        return x[tuple(np.moveaxis(indices, -1, 0))].astype(np.float64)
    return np.stack([gather_nd_reference(x[b], indices[b], batch_dims - 1) for b in range(x.shape[0])])


def old_resize(op, mode, scales, in_shape=(1, 1, 4, 5), opset=10):
    """Resize-10 or Upsample-9 of x by `scales` (input 1: neither has roi or coordinate_transformation_mode)."""
    nodes = [const("scales", scales, np.float32), helper.make_node(op, ["x", "scales"], ["y"], name="resize", mode=mode)]
    out = [int(math.floor(d * s)) for d, s in zip(in_shape, scales)]
    return make(nodes, [("x", F32, list(in_shape))], [("y", F32, out)], opset)


def asymmetric(x, scales, mode):
    """Resize-10's and Upsample's definition (onnxruntime's): an output position o reads the input at o / scale;
    nearest rounds it down where the axis grows and up where it shrinks, linear blends the two around it
    (clamped to the last position). The last two axes."""
    y = x.astype(np.float64)
    for axis, scale in ((2, scales[2]), (3, scales[3])):
        size = y.shape[axis]
        out = int(math.floor(size * scale))
        src = np.arange(out) / scale
        if mode == "nearest":
            at = np.minimum(np.ceil(src) if scale < 1 else np.floor(src), size - 1).astype(int)
            y = np.take(y, at, axis=axis)
            continue
        src = np.minimum(src, size - 1)
        low = np.floor(src).astype(int)
        high = np.minimum(low + 1, size - 1)
        t = (src - low).reshape([-1 if a == axis else 1 for a in range(y.ndim)])
        y = np.take(y, low, axis=axis) * (1 - t) + np.take(y, high, axis=axis) * t
    return y


def half_pixel_symmetric_linear(x, scales):
    """Resize, linear, half_pixel_symmetric, as ONNX's definition of Resize-19 writes it: per axis
    x_ori = in / 2 (1 - out / (in scale)) + (o + 0.5) / scale - 0.5, clamped to [0, in - 1]."""
    y = x.astype(np.float64)
    for axis, scale in enumerate(scales):
        size = y.shape[axis]
        out = int(math.floor(size * scale))
        if out == size and scale == 1:
            continue
        blend = np.zeros((out, size))
        adjustment = out / (size * scale)
        for o in range(out):
            src = size / 2 * (1 - adjustment) + (o + 0.5) / scale - 0.5
            src = min(max(src, 0.0), size - 1.0)
            i0 = int(math.floor(src))
            i1 = min(i0 + 1, size - 1)
            blend[o, i0] += 1 - (src - i0)
            blend[o, i1] += src - i0
        y = np.moveaxis(np.tensordot(blend, np.moveaxis(y, axis, 0), axes=(1, 0)), 0, axis)
    return y


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tightfit = sys.argv[1]
    failures = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        runs = ImportedRuns(tightfit, folder)
        path, import_model, run_model = runs.path, runs.import_model, runs.run_model

        def check(what, name, model, x, want, tolerance=0.0, ops_wanted=()):
            got, ops = run_model(name, model, x)
            if got is None:
                failures.append(f"{what}: {ops}")
                print(f"{what}: {ops}")
                return None
            worst = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else None
            print(f"{what}: output {list(got.shape)}, worst difference {worst} (tolerance {tolerance}), ops {ops}")
            if worst is None or not worst <= tolerance:
                failures.append(f"{what}: output {list(got.shape)} vs {list(want.shape)}, worst difference {worst}")
            for op in ops_wanted:
                if op not in ops:
                    failures.append(f"{what}: the imported graph has no '{op}' node: {ops}")
            return got

        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        outputs = {}
        for opset in (18, 19, 20, 21):
            outputs[opset] = check(f"the types-only operators at opset {opset}", f"chain{opset}", type_chain(opset), x,
                                   type_chain_reference(x))
        if all(o is not None for o in outputs.values()):
            same = all(np.array_equal(outputs[18], outputs[o]) for o in (19, 20, 21))
            print(f"the chain at opsets 19, 20 and 21 gives opset 18's output bit for bit: {same}")
            if not same:
                failures.append("the types-only chain differs between opset 18 and a later opset")

        wide = (rng.standard_normal((3, 7)) * 3).astype(np.float32)
        w = wide.astype(np.float64)
        erf_form = 0.5 * w * (1 + np.vectorize(math.erf)(w / math.sqrt(2)))
        tanh_form = 0.5 * w * (1 + np.tanh(math.sqrt(2 / math.pi) * (w + 0.044715 * w ** 3)))
        print(f"(the two GELU forms differ by up to {float(np.max(np.abs(erf_form - tanh_form))):.2e} here)")
        for approximate, want in ((None, erf_form), ("none", erf_form), ("tanh", tanh_form)):
            check(f"Gelu-20, approximate {approximate or 'absent'}", f"gelu_{approximate}", gelu_model(approximate),
                  wide, want, 1e-6, ops_wanted=("gelu",))

        mask = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1]], dtype=np.uint8)
        check("ReduceMax of bool (opset 20): any over axis 1", "any", bool_reduce("ReduceMax"), mask,
              mask.max(axis=1).astype(np.float64))
        check("ReduceMin of bool (opset 20): all over axis 1", "all", bool_reduce("ReduceMin"), mask,
              mask.min(axis=1).astype(np.float64))

        odd = np.array([1.5, np.nan, np.inf, -np.inf, 0.0, -2.0], dtype=np.float32)
        check("IsNaN and IsInf (opset 20): isnan + 2 isinf", "finite_masks", finite_masks(), odd,
              (np.isnan(odd) + 2 * np.isinf(odd)).astype(np.float64))

        small = rng.standard_normal((2, 3)).astype(np.float32)
        check("ConstantOfShape of a bf16 value (opset 20)", "bf16_fill", bf16_fill(), small,
              (small * np.float32(3.0)).astype(np.float64))

        image = rng.standard_normal((1, 1, 4, 5)).astype(np.float32)
        for scales in ([1, 1, 1.5, 0.7], [1, 1, 2, 3], [1, 1, 0.6, 1.3]):
            check(f"Resize-19 linear, half_pixel_symmetric, scales {scales}", "symmetric_" + "_".join(map(str, scales)),
                  resize("linear", scales, coordinate_transformation_mode="half_pixel_symmetric"), image,
                  half_pixel_symmetric_linear(image, scales), 1e-6)
        check("Resize-19 nearest, half_pixel_symmetric, by 2", "symmetric_nearest",
              resize("nearest", [1, 1, 2, 2], coordinate_transformation_mode="half_pixel_symmetric"), image,
              image.repeat(2, axis=2).repeat(2, axis=3).astype(np.float64))

        # OneHot of u8 and float indices: cast to int64 first (floats truncated), as ONNX defines it
        for elem_type, indices in ((TensorProto.UINT8, np.array([[0, 1, 3], [2, 7, 1]], np.uint8)),
                                   (F32, np.array([[0.9, 1.5, -1.2], [2.0, 3.99, -4.5]], np.float32))):
            check(f"OneHot of {indices.dtype} indices", f"one_hot_{indices.dtype}", one_hot(elem_type), indices,
                  one_hot_reference(indices))

        # opsets before 7: each operator by its definition then (import/onnx_legacy.c)
        legacy_x = (rng.standard_normal((2, 3, 4)) * 2).astype(np.float32)
        for opset in (1, 3, 6):
            check(f"an opset-{opset} model (broadcast by axis, Cast by type names, Concat's default axis, "
                  "test-mode BatchNormalization, Elu, Softplus)", f"legacy{opset}", legacy_model(opset), legacy_x,
                  legacy_reference(legacy_x), 1e-5)

        # GatherND by constant indices (torch.diagonal's export under `tightfit import`, an ONNX model's
        # constant table): rows, single elements with negative indices, and batch_dims 1 (the same tuples
        # at each batch position)
        cube = rng.standard_normal((3, 4, 5)).astype(np.float32)
        for label, indices, batch_dims, out_shape in (
                ("rows", [[2], [0], [2]], 0, (3, 4, 5)),
                ("elements, negative indices", [[[0, 1], [2, -1]], [[-3, 0], [1, 3]]], 0, (2, 2, 5)),
                ("batch_dims 1", [[[1], [3]], [[1], [3]], [[1], [3]]], 1, (3, 2, 5)),
                ("batch_dims 1, whole tuples", [[[0, 4], [3, 3]]] * 3, 1, (3, 2))):
            check(f"GatherND by constant indices: {label}", "gather_nd_" + label.replace(",", "").replace(" ", "_"),
                  gather_nd(indices, batch_dims, cube.shape, out_shape), cube,
                  gather_nd_reference(cube, indices, batch_dims), 0.0)

        # Resize-10 and Upsample-9: no coordinate_transformation_mode, their mapping asymmetric (the
        # importer read opset 10's by opset 11's half_pixel default before)
        for op, opset in (("Resize", 10), ("Upsample", 9)):
            grow = op == "Upsample"  # (Upsample's scales are at least 1)
            for mode, scales in (("linear", [1, 1, 1.5, 1.4 if grow else 0.7]), ("nearest", [1, 1, 1.75, 2.2 if grow else 0.6]),
                                 ("nearest", [1, 1, 2, 3])):
                check(f"{op}-{opset} {mode}, scales {scales}", f"{op}{opset}_{mode}_" + "_".join(map(str, scales)),
                      old_resize(op, mode, scales, opset=opset), image, asymmetric(image, scales, mode), 1e-6)

        node = lambda op, inputs=("x",), **a: helper.make_node(op, list(inputs), ["y"], name="n", **a)  # noqa: E731
        old = lambda op, opset, attrs, inputs=(("x", [2, 3]),), outputs=(("y", [2, 3]),): make(  # noqa: E731
            [helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], name="n", **attrs)],
            [(n, F32, s) for n, s in inputs], [(n, F32, s) for n, s in outputs], opset)
        refusals = [
            ("Reshape-1's shape attribute (opset 3)", old("Reshape", 3, {"shape": [3, 2]}, outputs=(("y", [3, 2]),)),
             ["'n' (Reshape)", "Reshape at opset 3: its definition before opset 7 is not read"]),
            ("PRelu at opset 6", old("PRelu", 6, {}, inputs=(("x", [2, 3]), ("s", [3]))),
             ["'n' (PRelu)", "PRelu at opset 6: its definition before opset 7 is not read"]),
            ("Equal with broadcast along an axis (opset 6)",
             old("Equal", 6, {"broadcast": 1, "axis": 0}, inputs=(("x", [2, 3]), ("z", [2]))),
             ["'n' (Equal)", "Equal with broadcast along axis 0 (opset 6; only Add, Sub, Mul and Div)"]),
            ("a per-activation BatchNormalization (spatial 0, opset 6)",
             old("BatchNormalization", 6, {"spatial": 0}, inputs=(("x", [2, 3]), ("g", [3]), ("b", [3]), ("m", [3]),
                                                                 ("v", [3]))),
             ["'n' (BatchNormalization)", "BatchNormalization with spatial 0 (opset 6; only 1, per channel)"]),
            ("GatherND by a constant index outside its axis", gather_nd([[5]], 0, (3, 4, 5), (1, 4, 5)),
             ["'gather' (GatherND)", "index 5 is outside [-3, 3) along data axis 0"]),
            ("GatherND by constant indices that differ over the batch", gather_nd([[[1]], [[2]], [[0]]], 1, (3, 4, 5),
                                                                                  (3, 1, 5)),
             ["'gather' (GatherND)", "differ from one batch position to the next"]),
            ("an Upsample that shrinks (9)", old_resize("Upsample", "nearest", [1, 1, 2, 0.5], opset=9),
             ["'resize' (Upsample)", "Upsample's scale 0.5 on axis 3 (at least 1"]),
            ("a dilated AveragePool (19)", make([node("AveragePool", kernel_shape=[2, 2], dilations=[2, 2])],
                                                [("x", F32, [1, 1, 6, 6])], [("y", F32, [1, 1, 4, 4])], 19),
             ["'n' (AveragePool)", "dilations 2 x 2"]),
            ("Cast to float8 (19)", make([node("Cast", to=FLOAT8E4M3FN, saturate=0)], [("x", F32, [4])],
                                         [("y", FLOAT8E4M3FN, [4])], 19),
             ["'n' (Cast)", "cast to FLOAT8E4M3FN (17)"]),
            ("Cast to int4 (21)", make([node("Cast", to=INT4)], [("x", F32, [4])], [("y", INT4, [4])], 21),
             ["'n' (Cast)", "cast to INT4 (22)"]),
            ("a Constant of uint4 (21)", make([helper.make_node("Constant", [], ["c"], name="n",
                                                                value=raw_tensor("c", UINT4, [2], b"\x21")),
                                               helper.make_node("Cast", ["c"], ["cf"], name="cast", to=F32),
                                               helper.make_node("Add", ["x", "cf"], ["y"], name="add")],
                                              [("x", F32, [2])], [("y", F32, [2])], 21),
             ["'n' (Constant)", "element type UINT4 (21) is not supported"]),
            ("a ConstantOfShape of float8 (20)", make([const("s", [2]), helper.make_node(
                "ConstantOfShape", ["s"], ["c"], name="n", value=raw_tensor("v", FLOAT8E5M2, [1], b"\x3c")),
                helper.make_node("Cast", ["c"], ["cf"], name="cast", to=F32),
                helper.make_node("Add", ["x", "cf"], ["y"], name="add")], [("x", F32, [2])], [("y", F32, [2])], 20),
             ["'n' (ConstantOfShape)", "element type FLOAT8E5M2 (19) is not supported"]),
            ("Gelu with approximate 'fast'", make([node("Gelu", approximate="fast")], [("x", F32, [4])],
                                                  [("y", F32, [4])], 20),
             ["'n' (Gelu)", "approximate 'fast'"]),
            ("antialiased linear downscaling (18)", resize("linear", [1, 1, 0.5, 0.5], in_shape=(1, 1, 4, 6),
                                                           antialias=1),
             ["'resize' (Resize)", "antialias=1 while shrinking axis 2"]),
            ("Resize of a subset of axes (18)", resize("nearest", [2, 2], in_shape=(1, 1, 4, 5), axes=[2, 3]),
             ["'resize' (Resize)", "an axes attribute other than every axis in order"]),
            ("Resize keeping the aspect ratio (18)", resize("nearest", sizes=[1, 1, 8, 8], in_shape=(1, 1, 4, 5),
                                                            keep_aspect_ratio_policy="not_larger"),
             ["'resize' (Resize)", "keep_aspect_ratio_policy other than stretch"]),
            ("GroupNormalization (21: scale and bias per channel)", make(
                [const("scale", [1, 1, 1, 1], np.float32), const("bias", [0, 0, 0, 0], np.float32),
                 node("GroupNormalization", ["x", "scale", "bias"], num_groups=2)],
                [("x", F32, [1, 4, 3])], [("y", F32, [1, 4, 3])], 21),
             ["GroupNormalization", "'n'"]),
            ("opset 22", make([node("Relu")], [("x", F32, [4])], [("y", F32, [4])], 22),
             ["opset 22 of the default domain (supported: 1 to 21"]),
        ]
        for what, model, words in refusals:
            name = "refused_" + "".join(c for c in what if c.isalnum())
            done = import_model(name, model)
            message = done.stderr.strip()
            print(f"{what}: exit {done.returncode}: {message}")
            if done.returncode != 2 or any(w not in message for w in words) or os.path.exists(path(name + ".tfg")):
                failures.append(f"{what}: wanted exit 2, no graph and {[w for w in words if w not in message]}")
    for failure in failures:
        print("FAIL:", failure)
    print("import_opsets:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
