#!/usr/bin/python3
"""`tightfit import` of ONNX Pad in reflect, edge and wrap modes (opset 19, whose wrap is new), checked
against numpy.pad: each model pads a fixed [2, 3, 5] input on its last two axes (widths 0 to 4, on one
side or both), and runs through ONNX's node-test procedure (tests/onnx_node/node_tests.py: `import`,
`compile --inference`, `run --output`) on the CPU; every model must give numpy's output.

usage: import_pad_modes.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
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
    print(f"import_pad_modes.py: skipped, cannot import onnx or numpy ({error})")
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


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    with tempfile.TemporaryDirectory() as root:
        names = [write_case(root, mode, pads, x) for mode in ("reflect", "edge", "wrap") for pads in PADS
                 if not (mode == "reflect" and max(pads) >= 5)]
        result = subprocess.run([sys.executable, NODE_TESTS, sys.argv[1], "--root", root], capture_output=True,
                                text=True)
    print(result.stdout.strip())
    passed = [n for n in names if f"pass    {n}:" in result.stdout]
    missing = sorted(set(names) - set(passed))
    if result.returncode != 0 or missing:
        print(f"FAIL: node_tests.py exited {result.returncode}; not passed: {missing}")
        return 1
    print(f"import_pad_modes: PASS ({len(passed)} models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
