#!/usr/bin/python3
"""Masks of data holding NaN and infinities in an inference plan (whose inputs may hold them), each
model written with onnx.helper, imported, compiled (--inference) and run on the CPU and on Vulkan
(lavapipe in CI; skipped, saying so, without a device), against numpy's answers:

  Greater, Less, GreaterOrEqual, LessOrEqual of x and 0.5 x (both data): a NaN compares false,
      inf >= inf and -inf <= -inf true, inf > inf false (PyTorch's and numpy's rules)
  Equal of x and 1 x (inf == inf true, NaN == NaN false), of x and +inf, of x and -inf
  IsNaN, IsInf (both signs and each alone) of x, and of a constant (folded at import)
  Where(x > 0, x, 0), Where(IsNaN(x), 0, x) (nan_to_num's first step): the branch taken, exactly
  Pow(x, e) of an exponent of several values (as of data): C's pow at 0, NaN, +-inf, a negative base
      to a whole and to a fractional power, and e = 0 (1 for any x), within 1e-6; Pow(x, 0): all 1

usage: import_nonfinite.py TIGHTFIT       exits 77 (ctest skip) without the onnx package
"""
import os
import sys
import tempfile

try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from imported_runs import ImportedRuns
except ImportError as error:
    print(f"import_nonfinite.py: skipped, cannot import onnx or numpy ({error})")
    sys.exit(77)

F32, N = TensorProto.FLOAT, 12


def model(nodes, initializers=()):
    graph = helper.make_graph(nodes, "nonfinite", [helper.make_tensor_value_info("x", F32, [N])],
                              [helper.make_tensor_value_info("y", F32, [N])], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnx.helper",
                             ir_version=8)


def number(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def as_float(op, inputs, **attributes):
    """op(inputs) (a bool) cast to f32 as y."""
    return model([helper.make_node(op, inputs, ["b"], name="op", **attributes),
                  helper.make_node("Cast", ["b"], ["y"], name="to_f32", to=F32)])


def cases_of(x):
    """(what, name, model, numpy's output[, relative tolerance: else exact]) of each case on input x."""
    half = x * np.float32(0.5)
    halved = helper.make_node("Mul", ["x", "k"], ["h"], name="half")
    cases = []
    for op, want in (("Greater", x > half), ("Less", x < half), ("GreaterOrEqual", x >= half),
                     ("LessOrEqual", x <= half)):
        m = as_float(op, ["x", "h"])
        m.graph.node.insert(0, halved)
        m.graph.initializer.append(number("k", 0.5))
        cases.append((f"{op}(x, 0.5 x)", op, m, want))
    same = as_float("Equal", ["x", "h"])
    same.graph.node.insert(0, helper.make_node("Mul", ["x", "one"], ["h"], name="same"))
    same.graph.initializer.append(number("one", 1.0))
    cases.append(("Equal(x, 1 x)", "equal", same, x == x * np.float32(1)))
    for sign in (1, -1):
        m = as_float("Equal", ["x", "inf"])  # of a Constant node: a known number (an initializer is a weight)
        m.graph.node.insert(0, helper.make_node("Constant", [], ["inf"], name="inf", value=number("inf", sign * np.inf)))
        cases.append((f"Equal(x, {'+' if sign > 0 else '-'}inf)", f"equal_inf{sign}", m, x == sign * np.inf))
    cases += [("IsNaN(x)", "isnan", as_float("IsNaN", ["x"]), np.isnan(x)),
              ("IsInf(x)", "isinf", as_float("IsInf", ["x"]), np.isinf(x)),
              ("IsInf(x) of +inf", "posinf", as_float("IsInf", ["x"], detect_negative=0), np.isposinf(x)),
              ("IsInf(x) of -inf", "neginf", as_float("IsInf", ["x"], detect_positive=0), np.isneginf(x)),
              ("Where(x > 0, x, 0)", "relu_where", model(
                  [helper.make_node("Greater", ["x", "zero"], ["c"], name="gt"),
                   helper.make_node("Where", ["c", "x", "zero"], ["y"], name="sel")], [number("zero", 0.0)]),
               np.where(x > 0, x, np.float32(0))),
              ("Where(IsNaN(x), 0, x)", "nan_to_zero", model(
                  [helper.make_node("IsNaN", ["x"], ["c"], name="isnan"),
                   helper.make_node("Where", ["c", "zero", "x"], ["y"], name="sel")], [number("zero", 0.0)]),
               np.where(np.isnan(x), np.float32(0), x))]
    # of a Constant node: folded at import (Where(..., 0, 0) of x makes the output a tensor of x's shape)
    c = np.array([1.0, np.nan, np.inf, -np.inf] * 3, dtype=np.float32)
    cases.append(("IsNaN(c) + 2 IsInf(c, +inf only), c a constant (folded)", "folded", model(
        [helper.make_node("Constant", [], ["c"], name="c", value=number("c", c)),
         helper.make_node("IsNaN", ["c"], ["cn"], name="cn"),
         helper.make_node("IsInf", ["c"], ["ci"], name="ci", detect_negative=0),
         helper.make_node("Cast", ["cn"], ["cnf"], name="cnf", to=F32),
         helper.make_node("Cast", ["ci"], ["cif"], name="cif", to=F32),
         helper.make_node("IsNaN", ["x"], ["xn"], name="xn"),
         helper.make_node("Where", ["xn", "zero", "zero"], ["z"], name="z"),
         helper.make_node("Add", ["cif", "cif"], ["ci2"], name="ci2"),
         helper.make_node("Add", ["cnf", "ci2"], ["s"], name="s"),
         helper.make_node("Add", ["s", "z"], ["y"], name="y")], [number("zero", 0.0)]),
        np.isnan(c) + 2 * np.isposinf(c)))
    # (a subnormal x, 1e-40, only squared: its log is a GPU's own, which may flush it to 0)
    for name, e in (("pow_whole", [2, 0, 0.5, 3, -1, 2, 0, 3, 0.5, 2, 2, -2]),
                    ("pow_mixed", [0, 1, -0.5, 2, 0, 0.5, -2, 0, 3, 2, 3, 0.25]), ("pow_zero", 0.0)):
        e = np.array(e, dtype=np.float32)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            want = np.power(x, e)
        cases.append((f"Pow(x, {e.tolist()})", name, model(
            [helper.make_node("Constant", [], ["e"], name="e", value=number("e", e)),
             helper.make_node("Pow", ["x", "e"], ["y"], name="pow")]), want, 1e-6))
    return cases


def run_cases(runs, x, device):
    """Each case on `device` ("cpu", "vulkan:0"): the failures; none, saying so, without a Vulkan device."""
    failures = []
    for what, name, onnx_model, want, *tolerance in cases_of(x):
        got, ops = runs.run_model(name, onnx_model, x)
        if got is None and device != "cpu" and "vulkan: no " in ops.lower():
            print(f"{device}: skipped, no device ({ops})")
            return []
        want = np.asarray(want, dtype=np.float32)
        rtol = tolerance[0] if tolerance else 0.0
        same = got is not None and got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
        print(f"{device}: {what}: {'the same' if same else 'DIFFERENT'}: {got if got is not None else ops} "
              f"(numpy {want})")
        if not same:
            failures.append(f"{what} on {device}")
    return failures


def main():
    tightfit = os.path.abspath(sys.argv[1])
    x = np.array([1.5, np.nan, np.inf, -np.inf, 0.0, -2.0, 3.0, np.nan, -0.0, 1e-40, -np.inf, np.inf],
                 dtype=np.float32)
    failures = []
    for device in ("cpu", "vulkan:0"):
        with tempfile.TemporaryDirectory(prefix="tf-nonfinite-") as folder:
            failures += run_cases(ImportedRuns(tightfit, folder, device), x, device)
    print(f"import_nonfinite: {'FAIL: ' + ', '.join(failures) if failures else 'PASS'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
