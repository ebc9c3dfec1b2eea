#!/usr/bin/python3
"""`tightfit import` of ONNX LSTM, GRU and RNN nodes in the forms tightfit refuses: each must exit 2 with a
message naming the file, the node and what to do, and leave no graph behind. The models are written
with onnx.helper (python3-onnx): a symbolic time axis, sequence_lens shorter than the time axis or
computed from the data, peepholes (P), clip, a non-default activation, input_forget; an RNN with an
activation other than Tanh, Relu or Sigmoid, or another one per direction. The same LSTM with a fixed
time axis, and RNNs with Relu and Sigmoid, import (exit 0), as a control that the refusals are about
the form.

usage: import_recurrent.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
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
    print(f"import_recurrent.py: skipped, cannot import onnx or numpy ({error})")
    sys.exit(77)

HIDDEN, INPUT, STEPS, BATCH = 3, 4, 5, 2


def model(op="LSTM", time="fixed", attributes=None, sequence_lens=None, peepholes=False, layout=0, dirs=1):
    """An ONNX model of one LSTM/GRU/RNN node on x, W/R/B initializers; `time`: "fixed" (5) or a symbol
    name; `dirs` 2: bidirectional."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((dirs, gates * HIDDEN, INPUT)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((dirs, gates * HIDDEN, HIDDEN)).astype(np.float32), "R"),
             numpy_helper.from_array(rng.standard_normal((dirs, 2 * gates * HIDDEN)).astype(np.float32), "B")]
    time_dim = STEPS if time == "fixed" else time
    x_dims = ["N", time_dim, INPUT] if layout else [time_dim, "N", INPUT]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)]
    inputs = ["x", "W", "R", "B", "", "", "", ""][: 8 if op == "LSTM" else 6]
    if sequence_lens == "data":
        graph_inputs.append(helper.make_tensor_value_info("lengths", TensorProto.INT32, ["N"]))
        inputs[4] = "lengths"
    elif sequence_lens is not None:
        inits.append(numpy_helper.from_array(np.array(sequence_lens, dtype=np.int32), "lengths"))
        inputs[4] = "lengths"
    if peepholes:
        inits.append(numpy_helper.from_array(np.zeros((1, 3 * HIDDEN), np.float32), "P"))
        inputs[7] = "P"
    while inputs and inputs[-1] == "":
        inputs.pop()
    if dirs == 2:
        attributes = dict(attributes or {}, direction="bidirectional")
    node = helper.make_node(op, inputs, ["y"], name="rnn", hidden_size=HIDDEN, layout=layout, **(attributes or {}))
    y_dims = ["N", time_dim, dirs, HIDDEN] if layout else [time_dim, dirs, "N", HIDDEN]
    graph = helper.make_graph([node], "recurrent", graph_inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tightfit = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        def path(name):
            return os.path.join(folder, name)

        def write(name, m):
            onnx.save(m, path(name))
            return path(name)

        cases = [
            ("symbolic time axis", write("time.onnx", model(time="T")),
             ["time.onnx", "'rnn' (LSTM)", "time axis (axis 0 of X) is symbolic ('T')", "unrolled",
              "batch_first=True", "dynamic_batch=False"]),
            ("symbolic time axis, layout 1", write("time1.onnx", model(op="GRU", time="T", layout=1)),
             ["time1.onnx", "'rnn' (GRU)", "time axis (axis 1 of X) is symbolic ('T')"]),
            ("shorter sequence_lens", write("lengths.onnx", model(sequence_lens=[5, 3])),
             ["lengths.onnx", "'rnn' (LSTM)", "sequence_lens[1] is 3", "5 steps", "PackedSequence"]),
            ("sequence_lens from the data", write("lengths_data.onnx", model(op="GRU", sequence_lens="data")),
             ["lengths_data.onnx", "'rnn' (GRU)", "sequence_lens 'lengths' is computed from the data",
              "PackedSequence"]),
            ("peepholes", write("peepholes.onnx", model(peepholes=True)),
             ["peepholes.onnx", "'rnn' (LSTM)", "peephole weights (input P 'P')"]),
            ("clip", write("clip.onnx", model(attributes={"clip": 3.0})),
             ["clip.onnx", "'rnn' (LSTM)", "the clip attribute (3)"]),
            ("a non-default activation", write("relu.onnx", model(op="GRU", attributes={"activations": ["Relu",
                                                                                                      "Tanh"]})),
             ["relu.onnx", "'rnn' (GRU)", "activations other than the defaults (Sigmoid, Tanh, per direction)"]),
            ("input_forget", write("forget.onnx", model(attributes={"input_forget": 1})),
             ["forget.onnx", "'rnn' (LSTM)", "input_forget=1"]),
            ("an RNN activation tightfit lacks", write("softsign.onnx", model(op="RNN", attributes={
                "activations": ["Softsign"]})),
             ["softsign.onnx", "'rnn' (RNN)", "activations 'Softsign' are not supported", "Tanh, Relu or Sigmoid"]),
            ("an RNN with another activation per direction", write("mixed.onnx", model(op="RNN", dirs=2, attributes={
                "activations": ["Tanh", "Relu"]})),
             ["mixed.onnx", "'rnn' (RNN)", "activations 'Tanh', 'Relu' are not supported", "the same in both directions"]),
            ("an RNN with clip", write("rnn_clip.onnx", model(op="RNN", attributes={"clip": 2.0})),
             ["rnn_clip.onnx", "'rnn' (RNN)", "the clip attribute (2)"]),
        ]
        for what, onnx_path, words in cases:
            out = path("out.tfg")
            result = subprocess.run([tightfit, "import", onnx_path, "-o", out], capture_output=True, text=True)
            message = result.stderr.strip()
            left = sorted(f for f in os.listdir(folder) if f.startswith("out"))
            ok = result.returncode == 2 and all(w in message for w in words) and not left
            print(f"{what}: exit {result.returncode}, left {left or 'nothing'}: {message}")
            if not ok:
                failures.append(f"{what}: wanted exit 2, no files and {[w for w in words if w not in message]}")
            for name in left:  # so that the next case starts clean
                os.remove(path(name))
        for what, m in [("LSTM with a fixed time axis and full sequence_lens", model(sequence_lens=[5, 5])),
                        ("GRU, layout 1, default activations given", model(op="GRU", layout=1, attributes={
                            "activations": ["Sigmoid", "Tanh"], "linear_before_reset": 1})),
                        ("bidirectional RNN, Relu", model(op="RNN", dirs=2, attributes={"activations": ["Relu", "Relu"]})),
                        ("RNN, layout 1, Sigmoid", model(op="RNN", layout=1, attributes={"activations": ["Sigmoid"]}))]:
            result = subprocess.run([tightfit, "import", write("good.onnx", m), "-o", path("good.tfg")],
                                    capture_output=True, text=True)
            print(f"{what}: exit {result.returncode}: {result.stdout.strip()} {result.stderr.strip()}")
            if result.returncode != 0 or not os.path.exists(path("good.tfg")):
                failures.append(f"{what} did not import")
    for failure in failures:
        print("FAIL:", failure)
    print("import_recurrent:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
