#!/usr/bin/python3
"""`tightfit import` of what PyTorch 2.x's TorchScript exporter writes and 1.13's did not, each in a model
written with onnx.helper, imported, compiled (--inference), run, and its output compared with numpy's:

  Trilu on data (lower, upper, a diagonal k of -1 and 1), exact: x times a 0/1 triangle; on a bool
      mask (Gemma 2's sliding window, tril(ones_like(mask), -w)) and on int64 data in f32 between casts;
      Max and Min of int64 data the same way
  Trilu folded: scaled_dot_product_attention's causal mask, Softmax(x + Where(Equal(Trilu(Expand(1,
      [T, S])), 0), -inf, 0)), within 1e-6; the mask is one constant (no expand or mul node)
  Mod folded: a Reshape's shape from Mod of constants, both signs and both fmod modes (a wrong sign
      rule gives a size of -2, which Reshape refuses)
  Cast(to=15) from producer "pytorch": PyTorch 2.x's number for bf16 (pytorch/pytorch#158658), so
      y = x rounded to bf16, exact; from another producer COMPLEX128, refused
  Mod of data, fmod 1: x fmod 3, within a few roundings of numpy's
  CastLike (opset 15) to a comparison's type (BOOL: nonzero) and to an int64 initializer's (toward zero)
  EyeLike of a symbolic shape [N, 5] (k 1, 3 and -1; f32, int64 and bool), computed in the graph, exact
  If of a condition known when importing (the exporter's If around x.squeeze(d), Mamba-2's): the
      branch taken emitted in place, a value only it reads (Relu(x)) computed too, exact
and the refusals, each exit 2 naming the node and why: Mod with fmod 0 on floats, a
remainder by zero, Trilu of data with symbolic last axes or of more than 2^24
elements, and an If whose condition is computed from data or whose branch writes a name already given.

usage: import_torch2_ops.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from imported_runs import ImportedRuns
except ImportError as error:
    print(f"import_torch2_ops.py: skipped, cannot import onnx or numpy ({error})")
    sys.exit(77)

F32 = TensorProto.FLOAT


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=dtype), name))


def make(nodes, inputs, outputs, producer="pytorch", opset=17):
    graph = helper.make_graph(nodes, "torch2", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=producer)


def trilu_on_data(upper, k):
    nodes = ([const("k", k)] if k is not None else []) + [
        helper.make_node("Trilu", ["x"] + (["k"] if k is not None else []), ["y"], name="tri", upper=upper)]
    return make(nodes, [("x", F32, [2, 4, 5])], [("y", F32, [2, 4, 5])])


def trilu_on_mask(k):
    """x [2, 4, 5] of bool -> Cast(Trilu(x, k), FLOAT): the lower triangle of the mask."""
    nodes = [const("k", k), helper.make_node("Trilu", ["x", "k"], ["t"], name="tri", upper=0),
             helper.make_node("Cast", ["t"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    return make(nodes, [("x", TensorProto.BOOL, [2, 4, 5])], [("y", F32, [2, 4, 5])])


def causal_softmax():
    """x [2, 5, 5] -> Softmax(x + mask), the mask as PyTorch 2.x's scaled_dot_product_attention builds it."""
    nodes = [const("one", [1.0], np.float32), const("size", [5, 5]),
             helper.make_node("Expand", ["one", "size"], ["ones"], name="expand"),
             helper.make_node("Trilu", ["ones"], ["lower"], name="tri", upper=0),
             const("zero", [0.0], np.float32), const("minus_inf", [-np.inf], np.float32),
             helper.make_node("Equal", ["lower", "zero"], ["above"], name="equal"),
             helper.make_node("Where", ["above", "minus_inf", "zero"], ["mask"], name="where"),
             helper.make_node("Add", ["x", "mask"], ["scores"], name="add"),
             helper.make_node("Softmax", ["scores"], ["y"], name="softmax", axis=-1)]
    return make(nodes, [("x", F32, [2, 5, 5])], [("y", F32, [2, 5, 5])])


def mod_reshape(dividends, divisors, fmod):
    """x [3, 4] reshaped to Mod(dividends, divisors) (PyTorch 2.x's unflatten computes (dim + rank) % rank)."""
    dtype = np.float32 if isinstance(dividends[0], float) else np.int64
    nodes = [const("a", dividends, dtype), const("b", divisors, dtype),
             helper.make_node("Mod", ["a", "b"], ["m"], name="mod", fmod=fmod)]
    if dtype == np.float32:
        nodes.append(helper.make_node("Cast", ["m"], ["shape"], name="cast", to=TensorProto.INT64))
    nodes.append(helper.make_node("Reshape", ["x", "shape" if dtype == np.float32 else "m"], ["y"], name="reshape"))
    return make(nodes, [("x", F32, [3, 4])], [("y", F32, [2, 6])])


def cast_15(producer):
    nodes = [helper.make_node("Cast", ["x"], ["half"], name="to_bf16", to=15),
             helper.make_node("Cast", ["half"], ["y"], name="back", to=TensorProto.FLOAT)]
    return make(nodes, [("x", F32, [4, 8])], [("y", F32, [4, 8])], producer=producer)


def known_if(length, condition_from_data=False, writes="t"):
    """x [2, length, 5] -> If(Shape(x)[1] == 4, -Relu(x), x): Relu(x) is read by the then branch alone.
    With condition_from_data the condition is ReduceSum(x) > 0; `writes` names the then branch's value."""
    then_branch = helper.make_graph([helper.make_node("Neg", ["r"], [writes], name="neg")], "then", [],
                                    [helper.make_tensor_value_info(writes, F32, [2, length, 5])])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="same")], "else", [],
                                    [helper.make_tensor_value_info("e", F32, [2, length, 5])])
    if condition_from_data:
        condition = [const("zero", 0.0, np.float32), helper.make_node("ReduceSum", ["x"], ["total"], name="sum", keepdims=0),
                     helper.make_node("Greater", ["total", "zero"], ["c"], name="positive")]
    else:
        condition = [helper.make_node("Shape", ["x"], ["shape"], name="shape"), const("one", 1),
                     helper.make_node("Gather", ["shape", "one"], ["size"], name="size", axis=0), const("four", 4),
                     helper.make_node("Equal", ["size", "four"], ["c"], name="is_four")]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu")] + condition + [
        helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then_branch, else_branch=else_branch)]
    return make(nodes, [("x", F32, [2, length, 5])], [("y", F32, [2, length, 5])])


def eye_like(k, dtype):
    """x [N, 5] + Cast(EyeLike(x, k, dtype), FLOAT): an eye of a symbolic shape, computed in the graph."""
    nodes = [helper.make_node("EyeLike", ["x"], ["e"], name="eye", k=k, dtype=dtype),
             helper.make_node("Cast", ["e"], ["f"], name="to_float", to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "f"], ["y"], name="add")]
    return make(nodes, [("x", F32, ["N", 5])], [("y", F32, ["N", 5])])


def cast_like_mask():
    """x [3, 4] -> Cast(CastLike(x, Greater(x, 0)), FLOAT): cast to the type of a comparison, BOOL: x != 0."""
    nodes = [const("zero", 0.0, np.float32), helper.make_node("Greater", ["x", "zero"], ["m"], name="positive"),
             helper.make_node("CastLike", ["x", "m"], ["b"], name="like"),
             helper.make_node("Cast", ["b"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    return make(nodes, [("x", F32, [3, 4])], [("y", F32, [3, 4])], opset=15)


def cast_like_integer():
    """x [3, 4] -> Cast(CastLike(x * 2.5, an int64 initializer), FLOAT): rounded toward zero."""
    nodes = [const("k", 2.5, np.float32), helper.make_node("Mul", ["x", "k"], ["s"], name="scale"),
             helper.make_node("CastLike", ["s", "ids"], ["i"], name="like"),
             helper.make_node("Cast", ["i"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    model = make(nodes, [("x", F32, [3, 4])], [("y", F32, [3, 4])], opset=15)
    model.graph.initializer.append(numpy_helper.from_array(np.array([7], dtype=np.int64), "ids"))
    return model


def bf16_round(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # to nearest, ties to even
    return bits.astype(np.uint32).view(np.float32)


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

        def check(what, name, model, x, want, tolerance=0.0, ops_left_out=()):
            got, ops = run_model(name, model, x)
            if got is None:
                failures.append(f"{what}: {ops}")
                print(f"{what}: {ops}")
                return
            worst = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else None
            print(f"{what}: output {list(got.shape)}, worst difference {worst}, ops {ops}")
            if worst is None or not worst <= tolerance:
                failures.append(f"{what}: output {list(got.shape)} vs {list(want.shape)}, worst difference {worst}")
            for op in ops_left_out:
                if op in ops:
                    failures.append(f"{what}: the imported graph has a '{op}' node: {ops}")

        x = rng.standard_normal((2, 4, 5)).astype(np.float32)
        for upper, k in [(0, None), (1, None), (0, -1), (1, 1)]:
            want = (np.triu if upper else np.tril)(x.astype(np.float64), 0 if k is None else k)
            check(f"Trilu on data, upper={upper}, k={k}", f"tri{upper}{k}", trilu_on_data(upper, k), x, want)

        mask = (rng.random((2, 4, 5)) < 0.7).astype(np.uint8)
        check("Trilu of a bool mask, k=-1", "trimask", trilu_on_mask(-1), mask, np.tril(mask, -1).astype(np.float64))

        integers = rng.integers(-1000, 1000, (3, 3)).astype(np.int64)
        trilu_int = make([helper.make_node("Trilu", ["x"], ["y"], name="tri")], [("x", TensorProto.INT64, [3, 3])],
                         [("y", TensorProto.INT64, [3, 3])])
        check("Trilu of int64 data (upper)", "trilu_int", trilu_int, integers, np.triu(integers).astype(np.float64))
        # Max and Min of integer data (and of an integer constant), in f32 between casts
        extremes = make([const("lo", [[-500, 0, 200]]), const("hi", 300),
                         helper.make_node("Max", ["x", "lo"], ["m"], name="max"),
                         const("minus", -1), helper.make_node("Mul", ["x", "minus"], ["n"], name="neg"),
                         helper.make_node("Min", ["m", "hi", "n"], ["y"], name="min")],
                        [("x", TensorProto.INT64, [3, 3])], [("y", TensorProto.INT64, [3, 3])])
        check("Max and Min of int64 data", "int_extremes", extremes, integers,
              np.minimum(np.minimum(np.maximum(integers, [[-500, 0, 200]]), 300), -integers).astype(np.float64))

        holes = rng.standard_normal((3, 4)).astype(np.float32)
        holes[0, :2] = 0
        check("CastLike to a comparison's type (BOOL): nonzero", "castlike_bool", cast_like_mask(), holes,
              (holes != 0).astype(np.float64))
        check("CastLike to an int64 initializer's type: toward zero", "castlike_int", cast_like_integer(), holes,
              np.trunc(holes.astype(np.float32) * np.float32(2.5)).astype(np.float64))

        # `tightfit run` runs the plan at N's default, 1, once per row of x: each row meets eye(1, 5, k)
        rows = rng.standard_normal((3, 5)).astype(np.float32)
        for k, dtype in ((1, TensorProto.FLOAT), (3, TensorProto.INT64), (-1, TensorProto.BOOL)):
            check(f"EyeLike of a symbolic [N, 5], k={k}, {TensorProto.DataType.Name(dtype)}", f"eye{k}",
                  eye_like(k, dtype), rows, (rows + np.eye(1, 5, k, dtype=np.float32)).astype(np.float64))

        scores = rng.standard_normal((2, 5, 5)).astype(np.float32)
        masked = np.where(np.tril(np.ones((5, 5))) == 0, -np.inf, scores.astype(np.float64))
        softmax = np.exp(masked - masked.max(-1, keepdims=True))
        softmax /= softmax.sum(-1, keepdims=True)
        check("the causal mask of PyTorch 2.x's scaled_dot_product_attention, folded", "causal", causal_softmax(),
              scores, softmax, 1e-6, ops_left_out=("expand", "mul"))

        grid = rng.standard_normal((3, 4)).astype(np.float32)
        check("Mod, fmod 0 (the divisor's sign): [-10, 15] % [4, 9] = [2, 6]", "mod0",
              mod_reshape([-10, 15], [4, 9], 0), grid, grid.reshape(2, 6).astype(np.float64))
        check("Mod, fmod 1 (the dividend's sign): fmod([10, 15], [-4, 9]) = [2, 6]", "mod1",
              mod_reshape([10, 15], [-4, 9], 1), grid, grid.reshape(2, 6).astype(np.float64))
        check("Mod of floats, fmod 1: fmod([6.5, 15], [-4.5, 9]) = [2, 6] (Python's % gives -2.5)",
              "modf", mod_reshape([6.5, 15.0], [-4.5, 9.0], 1), grid, grid.reshape(2, 6).astype(np.float64))

        spread = (rng.standard_normal((3, 4)) * 10).astype(np.float32)
        mod_data = make([const("b", [3.0], np.float32), helper.make_node("Mod", ["x", "b"], ["y"], name="mod", fmod=1)],
                        [("x", F32, [3, 4])], [("y", F32, [3, 4])])
        check("Mod of data, fmod 1: x fmod 3 (C's fmod, the dividend's sign), within a few roundings", "mod_data",
              mod_data, spread, np.fmod(spread.astype(np.float64), 3.0), 4e-6)

        wide = (rng.standard_normal((4, 8)) * 100).astype(np.float32)
        check("Cast(to=15) from PyTorch reads as bf16", "cast15", cast_15("pytorch"), wide,
              bf16_round(wide).astype(np.float64))

        for length in (4, 3):
            x = rng.standard_normal((2, length, 5)).astype(np.float32)
            want = -np.maximum(x, 0).astype(np.float64) if length == 4 else x.astype(np.float64)
            check(f"If of a known condition (axis 1 of {length} == 4: the {'then' if length == 4 else 'else'} branch)",
                  f"if{length}", known_if(length), x, want)

        mod_zero = make([const("a", [7]), const("b", [0]), helper.make_node("Mod", ["a", "b"], ["m"], name="mod"),
                         helper.make_node("Reshape", ["x", "m"], ["y"], name="reshape")],
                        [("x", F32, [7])], [("y", F32, [7])])
        trilu_symbolic = make([helper.make_node("Trilu", ["x"], ["y"], name="tri")], [("x", F32, [2, "T", "T"])],
                              [("y", F32, [2, "T", "T"])])
        trilu_huge = make([helper.make_node("Trilu", ["x"], ["y"], name="tri")], [("x", F32, [5000, 5000])],
                          [("y", F32, [5000, 5000])])
        refusals = [
            ("Mod with fmod 0 on floats", "mod_float0", mod_reshape([6.5, 15.0], [-4.5, 9.0], 0),
             ["'mod' (Mod)", "fmod 0 on floating-point values"]),
            ("a remainder by zero", "mod_zero", mod_zero, ["'mod' (Mod)", "integer remainder of 7 by zero"]),
            ("Trilu of symbolic last axes", "trilu_symbolic", trilu_symbolic,
             ["'tri' (Trilu)", "input 'x' has symbolic last two axes"]),
            ("Trilu of a 5000 x 5000 matrix of data", "trilu_huge", trilu_huge,
             ["'tri' (Trilu)", "a 5000 x 5000 triangle of data (at most 16777216 elements)"]),
            ("Cast(to=15) from another producer", "cast_other", cast_15("other"),
             ["'to_bf16' (Cast)", "cast to COMPLEX128 (15)"]),
            ("an If of a condition computed from data", "if_data", known_if(4, condition_from_data=True),
             ["'choose' (If)", "computed from data"]),
            ("an If whose branch writes a name the graph has", "if_rewrites", known_if(4, writes="r"),
             ["'choose' (If)", "writes 'r', a name already given"]),
        ]
        for what, name, model, words in refusals:
            done = import_model(name, model)
            message = done.stderr.strip()
            print(f"{what}: exit {done.returncode}: {message}")
            if done.returncode != 2 or any(w not in message for w in words) or os.path.exists(path(name + ".tfg")):
                failures.append(f"{what}: wanted exit 2, no graph and {[w for w in words if w not in message]}")
    for failure in failures:
        print("FAIL:", failure)
    print("import_torch2_ops:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
