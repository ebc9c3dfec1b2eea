#!/usr/bin/python3
"""`tightfit import` of what rebuilds an axis from slices of its elements (import/onnx_axis_copies.c):
ONNX Pad in reflect, edge and wrap modes (opset 19, whose wrap is new), checked against numpy.pad (a
fixed [2, 3, 5] input padded on its last two axes, widths 0 to 4, on one side or both), and Slice with
negative steps (torch.flip's x[::-1], strides of -2 and -3, starts and ends past either end, as ONNX
clamps them), checked against numpy's slicing. Each model runs through ONNX's node-test procedure
(tests/onnx_node/node_tests.py: `import`, `compile --inference`, `run --output`) on the CPU; every
model must give numpy's output.

usage: import_axis_copies.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as error:
    print(f"import_axis_copies.py: skipped, cannot import onnx or numpy ({error})")
    sys.exit(77)

NODE_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx_node", "node_tests.py")
# ONNX pads: every axis's start, then every axis's end
PADS = ([0, 1, 2, 0, 2, 3], [0, 0, 4, 0, 2, 0], [0, 2, 0, 0, 0, 1])


def write_case(root, mode, pads, x):
    """A node test folder: model.onnx and one data set, the output numpy.pad's."""
    name = f"test_pad_{mode}_{''.join(map(str, pads))}"
    folder = os.path.join(root, name, "test_data_set_0")
    os.makedirs(folder)
    y = np.pad(x, [(pads[i], pads[i + 3]) for i in range(3)], mode=mode)
    graph = helper.make_graph([helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode=mode)], name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
                              [numpy_helper.from_array(np.array(pads, np.int64), "p")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]),
              os.path.join(root, name, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(folder, "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(y, "y"), os.path.join(folder, "output_0.pb"))
    return name


# Slice with negative steps on axis 2 (5 elements) or 1 (3): (start, end, axis, step)
SLICES = ([-1, -(2 ** 63 - 1), 2, -1], [4, 1, 2, -2], [-2, -10, 2, -3], [9, 0, 1, -1], [2, -4, 1, -1])


def write_slice(root, start, end, axis, step, x):
    """A node test folder of one Slice with constant starts, ends, axes and steps, numpy's output."""
    name = f"test_slice_back_{len(os.listdir(root))}"
    folder = os.path.join(root, name, "test_data_set_0")
    os.makedirs(folder)
    index = [slice(None)] * 3
    index[axis] = slice(start if start > -(2 ** 62) else None, end if end > -(2 ** 62) else None, step)
    y = x[tuple(index)]
    constants = [numpy_helper.from_array(np.array([v], np.int64), n)
                 for n, v in (("s", start), ("e", end), ("a", axis), ("k", step))]
    graph = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"], name="back")], name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))], constants)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(root, name, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(folder, "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(np.ascontiguousarray(y), "y"), os.path.join(folder, "output_0.pb"))
    return name


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    with tempfile.TemporaryDirectory() as root:
        names = [write_case(root, mode, pads, x) for mode in ("reflect", "edge", "wrap") for pads in PADS
                 if not (mode == "reflect" and max(pads) >= 5)]
        names += [write_slice(root, *cut, x) for cut in SLICES]
        result = subprocess.run([sys.executable, NODE_TESTS, sys.argv[1], "--root", root], capture_output=True,
                                text=True)
    print(result.stdout.strip())
    passed = [n for n in names if f"pass    {n}:" in result.stdout]
    missing = sorted(set(names) - set(passed))
    if result.returncode != 0 or missing:
        print(f"FAIL: node_tests.py exited {result.returncode}; not passed: {missing}")
        return 1
    print(f"import_axis_copies: PASS ({len(passed)} models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
