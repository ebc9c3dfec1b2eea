#!/usr/bin/python3
"""`tightfit import` of values with no elements and of constants one value fills (the graphs PyTorch's
exporter writes for torchaudio's Emformer and Tacotron 2), each model written with onnx.helper, imported,
compiled (--inference), run, and its output compared with numpy's, exactly:

  elementwise ops of a slice that selects nothing (Tanh, Add of a scalar, Mul by a [1, 1] weight broadcast,
      Cast, Not of a comparison) have no elements either, and Concat leaves them out beside data
  Concat of data beside a block of no elements of another width off the axis ((2, 4) beside (0, 6), as
      onnxruntime reads it), both of data computed at run time and of constants folded at import
  Split into parts of which one has no elements, Expand to a size 0, and Transpose, Reshape, Flatten,
      Unsqueeze and Squeeze of values of no elements: none either (torch.repeat_interleave by a count 0);
      ScatterND of indices and updates of no elements: the data as it is
  an LSTM's sequence_lens made from the sizes of a symbolic batch (ConstantOfShape(N) + 5, cast to int32):
      every sequence whole, the same output as the LSTM without sequence_lens

and the refusals, each exit 2 naming the node and why: such lengths of 4 for a time axis of 5 steps, a
Concat part of no elements of another rank, a Reshape of no elements whose -1 could be any size, operands of no elements that do not broadcast (0 beside 3).

usage: import_empty.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
"""
import sys
import tempfile

try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from imported_runs import ImportedRuns
except ImportError as error:
    print(f"import_empty.py: skipped, cannot import onnx or numpy ({error})")
    sys.exit(77)

F32, BIG = TensorProto.FLOAT, 1 << 62


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(value, dtype=dtype),
                                                                                          name))


def node(op, inputs, output, name=None, **attributes):
    return helper.make_node(op, inputs, [output], name=name or output, **attributes)


def make(nodes, inputs, outputs, opset=17):
    graph = helper.make_graph(nodes, "empty", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx.helper",
                             ir_version=8)


def empty_elementwise():
    """x [N, 4]; e = x[:, 4:] (no elements); elementwise chains of e concatenated beside x: y = x."""
    return make([const("s", [4]), const("e", [BIG]), const("a", [1]), const("one", 1.0, np.float32),
                 const("w", [[2.0]], np.float32), const("zero", 0.0, np.float32),
                 node("Slice", ["x", "s", "e", "a"], "rest"), node("Tanh", ["rest"], "t"),
                 node("Add", ["t", "one"], "t1"), node("Mul", ["t1", "w"], "t2"),
                 node("Cast", ["t2"], "t3", to=TensorProto.FLOAT16), node("Cast", ["t3"], "t4", to=F32),
                 node("Greater", ["t4", "zero"], "g"), node("Not", ["g"], "ng"),
                 node("Cast", ["ng"], "t5", to=F32), node("Concat", ["t4", "x", "t5"], "y", axis=1)],
                [("x", F32, ["N", 4])], [("y", F32, ["N", 4])])


def concat_beside_empty(known):
    """x [2, 4] beside blocks (0, 6) on axis 0: slices of data computed from x (run time: [x, x, x[:, :2]]
    [2:]) or ConstantOfShape (folded at import, the mask x is multiplied by)."""
    if known:
        nodes = [const("shape", [0, 6]), helper.make_node("ConstantOfShape", ["shape"], ["none"], name="none",
                                                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
                 const("shape4", [2, 4]), helper.make_node("ConstantOfShape", ["shape4"], ["ones"], name="ones",
                                                           value=numpy_helper.from_array(np.array([1.0], np.float32))),
                 node("Concat", ["none", "ones", "none"], "mask", axis=0), node("Mul", ["x", "mask"], "y")]
    else:
        nodes = [const("s", [2]), const("e", [BIG]), const("a", [0]), const("two", [2]), const("one", [1]),
                 node("Slice", ["x", "a", "two", "one"], "half"), node("Concat", ["x", "half"], "wide", axis=1),
                 node("Slice", ["wide", "s", "e", "a"], "none"), node("Concat", ["none", "x", "none"], "y", axis=0)]
    return make(nodes, [("x", F32, [2, 4])], [("y", F32, [2, 4])])


def empty_layouts():
    """x [N, 4] split [2, 0, 2] (a part of no elements: torch.split by a size 0); Expands of data to a size 0
    (torch.repeat_interleave by a count 0); Transpose, Reshape [0, -1], Flatten, Unsqueeze and Squeeze of
    values of no elements: none either, concatenated beside the parts: y = x."""
    return make([const("sizes", [2, 0, 2]), helper.make_node("Split", ["x", "sizes"], ["a", "z", "b"], name="split",
                                                             axis=1),
                 const("axis2", [2]), node("Unsqueeze", ["x", "axis2"], "x3"), const("to", [1, 1, 0]),
                 node("Expand", ["x3", "to"], "e"), node("Transpose", ["e"], "et", perm=[0, 2, 1]),
                 const("flat", [0, -1]), node("Reshape", ["et", "flat"], "r"), node("Flatten", ["et"], "f", axis=1),
                 const("axis1", [1]), node("Unsqueeze", ["r", "axis1"], "u"), node("Squeeze", ["u", "axis1"], "q"),
                 const("s0", [0]), const("s1", [1]), node("Slice", ["x", "s0", "s1", "s1"], "col"),
                 const("to0", [1, 0]), node("Expand", ["col", "to0"], "e0"),
                 node("Concat", ["a", "z", "e0", "r", "f", "q", "b"], "y", axis=1)],
                [("x", F32, ["N", 4])], [("y", F32, ["N", 4])])


def scatter_nothing():
    """x [N, 4]; ScatterND(x, indices [N, 0, 1], updates [N, 0, 4]), both of no elements (made from x[:, 4:]):
    a write into a slice that selects nothing (torchvision's Swin3D mask), x as it is."""
    return make([const("s", [4]), const("e", [BIG]), const("a", [1]), node("Slice", ["x", "s", "e", "a"], "rest"),
                 node("Cast", ["rest"], "rest_int", to=TensorProto.INT64), const("axis2", [2]),
                 node("Unsqueeze", ["rest_int", "axis2"], "indices"), node("Unsqueeze", ["rest", "axis2"], "rest3"),
                 const("wide", [1, 1, 4]), node("Expand", ["rest3", "wide"], "updates"),
                 node("ScatterND", ["x", "indices", "updates"], "y", name="write")],
                [("x", F32, ["N", 4])], [("y", F32, ["N", 4])])


def lstm(lengths):
    """X [N, 5, 3] through an LSTM of 4 units (layout 1, batch first): Y_h [N, 1, 4]; sequence_lens
    ConstantOfShape([N]) + lengths cast to int32 where `lengths` is given."""
    rng = np.random.default_rng(3)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, name)
               for name, shape in (("W", (1, 16, 3)), ("R", (1, 16, 4)), ("B", (1, 32)))]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"] + (["lens"] if lengths is not None else []),
                              ["", "y"], name="lstm", hidden_size=4, layout=1)]
    if lengths is not None:
        nodes = [node("Shape", ["x"], "shape"), const("zero", [0]), const("one", [1]),
                 node("Slice", ["shape", "zero", "one"], "n"),
                 helper.make_node("ConstantOfShape", ["n"], ["zeros"], name="zeros",
                                  value=numpy_helper.from_array(np.array([0.0], np.float32))),
                 const("length", float(lengths), np.float32), node("Add", ["zeros", "length"], "total"),
                 node("Cast", ["total"], "lens", to=TensorProto.INT32)] + nodes
    graph = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", F32, ["N", 5, 3])],
                              [helper.make_tensor_value_info("y", F32, ["N", 1, 4])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnx.helper",
                             ir_version=8)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tightfit = sys.argv[1]
    failures = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        runs = ImportedRuns(tightfit, folder)

        def check(what, name, model, x, want):
            got, ops = runs.run_model(name, model, x)
            if got is None:
                failures.append(f"{what}: {ops}")
                print(f"FAIL: {what}: {ops}")
                return None
            exact = got.shape == want.shape and np.array_equal(got, want)
            print(f"{'ok' if exact else 'FAIL'}: {what}: output {list(got.shape)}, ops {ops}")
            if not exact:
                failures.append(f"{what}: output {got} vs {want}")
            return got

        x = rng.standard_normal((3, 4)).astype(np.float32)
        check("Tanh, Add, Mul, Cast, Greater and Not of a slice of no elements, concatenated beside x", "elementwise",
              empty_elementwise(), x, x)
        check("Split [2, 0, 2], Expand to a size 0, and Transpose, Reshape, Flatten, Unsqueeze and Squeeze of no "
              "elements, concatenated beside the parts", "layouts", empty_layouts(), x, x)
        check("ScatterND of indices and updates of no elements (a write into an empty slice) gives the data",
              "scatter", scatter_nothing(), x, x)
        x = rng.standard_normal((2, 4)).astype(np.float32)
        check("Concat of constants: ones (2, 4) between blocks (0, 6)", "known", concat_beside_empty(True), x, x)
        check("Concat of data: x (2, 4) between slices (0, 6) computed from x", "runtime", concat_beside_empty(False),
              x, x)
        sequences = rng.standard_normal((2, 5, 3)).astype(np.float32)
        whole, ops = runs.run_model("lstm_plain", lstm(None), sequences)
        if whole is None:
            failures.append(f"the LSTM without sequence_lens: {ops}")
        else:
            check("an LSTM whose sequence_lens are ConstantOfShape(N) + 5: every sequence whole, the output "
                  "without them", "lstm_lengths", lstm(5), sequences, whole)

        def refused(what, name, model, wanted):
            done = runs.import_model(name, model)
            said = done.stderr.strip()
            good = done.returncode == 2 and all(w in said for w in wanted)
            print(f"{'ok' if good else 'FAIL'}: refused: {what}: exit {done.returncode}: {said}")
            if not good:
                failures.append(f"refusal of {what}: exit {done.returncode}, said {said!r}, wanted {wanted}")

        refused("an LSTM's lengths ConstantOfShape(N) + 4 for 5 steps", "lstm4", lstm(4),
                ["'lstm' (LSTM)", "sequence_lens 'lens' is 4 for every sequence but the time axis has 5 steps"])
        refused("a Concat part of no elements of another rank", "rank", make(
            [const("s", [4]), const("e", [BIG]), const("a", [1]), node("Slice", ["x", "s", "e", "a"], "rest"),
             node("Concat", ["w", "rest"], "y", name="join", axis=1)],
            [("x", F32, ["N", 4]), ("w", F32, ["N", 3, 2])], [("y", F32, ["N", 3, 2])]),
            ["'join' (Concat)", "input 1 'rest' (no elements) does not fit beside the others: rank 2, not 3"])
        refused("a Reshape of no elements whose -1 could be any size", "infer", make(
            [const("s", [4]), const("e", [BIG]), const("a", [1]), node("Slice", ["x", "s", "e", "a"], "rest"),
             const("shape", [-1, 0]), node("Reshape", ["rest", "shape"], "r", name="reshape", allowzero=1),
             node("Concat", ["x", "r"], "y", axis=1)],
            [("x", F32, [2, 4])], [("y", F32, [2, 4])]),
            ["'reshape' (Reshape)", "a value with no elements to a shape whose axis 0 (-1) could be any size"])
        refused("operands of no elements that do not broadcast", "broadcast", make(
            [const("s", [4]), const("e", [BIG]), const("a", [1]), node("Slice", ["x", "s", "e", "a"], "rest"),
             node("Add", ["rest", "w"], "sum", name="add"), node("Concat", ["x", "sum"], "y", axis=1)],
            [("x", F32, [2, 4]), ("w", F32, [2, 3])], [("y", F32, [2, 4])]),
            ["'add' (Add)", "operands of no elements that do not broadcast at axis 1"])

    print(f"import_empty: {len(failures)} failed" + ("".join(f"\n  {f}" for f in failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
