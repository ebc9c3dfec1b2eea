#!/usr/bin/python3
"""ONNX's own backend node tests (Debian's libonnx-testdata: a model, its inputs and expected outputs
per test), each through `tightfit import`, `compile --inference` and `run --output`.

Every test ends in one of:
  pass      the outputs match the expected ones (rtol 1e-3, atol 1e-5, same shape and dtype)
  refused   `import` exits 2 naming the operator (or the dtype) and why: tightfit does not take it
  baddata   the test's own data does not fit its model (an input of another shape than the model
            declares: tightfit compiles for the declared shapes and refuses such data at run)
  known     a listed disagreement with the test data, with its reason (KNOWN below); it must
            still differ, or the test fails (then remove it from the list)
  FAIL      anything else: wrong or missing outputs, a refusal after import (compile or run), a
            crash, a signal, a sanitizer report, a timeout, an exit code other than 0 or 2
The test fails if any test FAILs. It prints a line per test and the totals, and with --list the
refusal reasons grouped by operator.

An input the importer must know (Resize's scales and sizes, a Reshape's shape, ...: constants in any
exported model, fed as graph inputs by these tests) is baked into a copy of the model as an
initializer holding the test's value, where the test has one data set; such a test says which. A
model the importer refuses for float64 (an input, an output or a Cast to DOUBLE), naming
--narrow-float64, is imported again with it: its float64 data fed and compared as float32.

usage: node_tests.py TIGHTFIT [--device cpu|vulkan:0] [--root DIR] [--only SUBSTRING] [--list]
Exits 77 (ctest's skip) when the test data or python3-onnx is missing.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = "/usr/share/libonnx-testdata/data/node"
# Tests whose expected outputs tightfit knowingly does not give, and why.
ALIGN_CORNERS_BY_SCALE = ("Debian's data (onnx 1.12) maps align_corners by the unrounded length in x scale; tightfit "
                          "by the output's whole length, as PyTorch's F.interpolate and onnxruntime 1.20 (which gives "
                          "tightfit's values on this file)")
KNOWN = {
    "test_cast_FLOAT_to_BFLOAT16": "Debian's data (onnx 1.12) truncates float32 to bfloat16; tightfit rounds to "
                                   "nearest even, as PyTorch and ONNX since 1.14 (whose regenerated test expects it)",
    "test_resize_downsample_scales_linear_align_corners": ALIGN_CORNERS_BY_SCALE,
    "test_resize_downsample_scales_cubic_align_corners": ALIGN_CORNERS_BY_SCALE,
    "test_training_dropout": "training mode (baked true): a random mask, tightfit's own, where the data holds numpy's",
    "test_training_dropout_default": "training mode (baked true): a random mask, tightfit's own, where the data holds "
                                     "numpy's",
}
# Bernoulli and RandomUniformLike draw tightfit's own numbers (import/onnx_random.c; the seed attribute is not
# read), where the data holds numpy's: their statistics are checked by python_from_torch_math instead.
KNOWN.update({f"test_bernoulli{form}": "a random draw, tightfit's own numbers, where the data holds numpy's"
              for form in ("", "_double", "_seed", "_expanded", "_double_expanded", "_seed_expanded")})
RTOL, ATOL = 1e-3, 1e-5
TIMEOUT = 60


def skip(why):
    print(f"node_tests.py: skipped: {why}")
    sys.exit(77)


try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as error:
    skip(f"cannot import numpy and onnx ({error}); scripts/setup installs python3-onnx")


def run(argv, env=None):
    """(exit code, stdout + stderr); a timeout is exit code -999."""
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL, env=env)
        return done.returncode, done.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return -999, f"timed out after {TIMEOUT} s"


def sanitizer_report(text):
    return "Sanitizer" in text or "runtime error:" in text


def load_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor.name, numpy_helper.to_array(tensor)


def as_tightfit_reads(array, elem_type):
    """bfloat16 data (which NumPy lacks: the test files hold its bits as uint16) as float32, as
    tightfit reads a bf16 input's data and writes a bf16 output; bool data as uint8 0s and 1s, the
    type tightfit reads and writes bool data as (it has no bool type)."""
    if elem_type == onnx.TensorProto.BFLOAT16 and array.dtype == np.uint16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    if elem_type == onnx.TensorProto.BOOL and array.dtype == np.bool_:
        return array.astype(np.uint8)
    return array


def narrowed_data(array, narrowed):
    """A float64 array as float32 when the model was imported with --narrow-float64 (its float64 inputs
    and outputs are float32 in the plan; the expected values are compared rounded to float32)."""
    return array.astype(np.float32) if narrowed and array.dtype == np.float64 else array


def data_sets(test_dir):
    """[(inputs [(name, array)], outputs [(name, array)])] per test_data_set_K."""
    sets = []
    for entry in sorted(os.listdir(test_dir)):
        folder = os.path.join(test_dir, entry)
        if not entry.startswith("test_data_set_") or not os.path.isdir(folder):
            continue
        files = sorted(os.listdir(folder), key=lambda f: (f.split("_")[0], int(re.sub(r"\D", "", f) or 0)))
        inputs = [load_tensor(os.path.join(folder, f)) for f in files if f.startswith("input_")]
        outputs = [load_tensor(os.path.join(folder, f)) for f in files if f.startswith("output_")]
        sets.append((inputs, outputs))
    return sets


def graph_io(model_path):
    """The model's fed inputs (initializers excluded) and outputs: (name, element type), in order."""
    model = onnx.load(model_path)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input if i.name not in initializers]
    outputs = [(o.name, o.type.tensor_type.elem_type) for o in model.graph.output]
    return inputs, outputs


def declared_shape_mismatch(model_path, given):
    """Why the test's input data does not have the static shape its model declares, or None."""
    model = onnx.load(model_path)
    declared = {i.name: i.type.tensor_type.shape.dim for i in model.graph.input}
    for name, array in given:
        dims = declared.get(name)
        if dims is None or any(not d.HasField("dim_value") for d in dims):
            continue
        shape = [d.dim_value for d in dims]
        if list(array.shape) != shape:
            return f"input '{name}' data is {list(array.shape)}, the model declares {shape}"
    return None


def compare(name, got, want):
    """None when got matches want, else why not."""
    if got.shape != want.shape:
        return f"output '{name}': shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"output '{name}': dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "fc":
        bad = ~np.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    else:
        bad = got != want
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"output '{name}': {int(bad.sum())} of {want.size} elements differ; at {list(where)} "
                f"{got[where]!r}, expected {want[where]!r}")
    return None


def device_env(device):
    """The environment of a run on `device`. Under LeakSanitizer a Vulkan run leaks lavapipe's small
    cache from the driver the loader has unloaded by then (an "unknown module" that no suppression
    can name): leak checks are off for those runs, as in tests/cli (the C Vulkan tests check leaks)."""
    if not device.startswith("vulkan"):
        return None
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env["ASAN_OPTIONS"] + ":" if env.get("ASAN_OPTIONS") else "") + "detect_leaks=0"
    return env


KNOWN_INPUT = re.compile(r"input '([^']+)' must be known when importing")


def baked(model_path, values, scratch):
    """A copy of the model with the graph inputs in `values` ({name: array}) as initializers."""
    model = onnx.load(model_path)
    kept = [i for i in model.graph.input if i.name not in values]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    for name, array in values.items():
        model.graph.initializer.append(numpy_helper.from_array(array, name))
    path = os.path.join(scratch, "baked.onnx")
    onnx.save(model, path)
    return path


def imported(tf, test_dir, graph, scratch):
    """`tightfit import` of the test's model into `graph`, baking each input the importer says it must
    know (one data set only), and again with --narrow-float64 where the importer refuses float64 and
    names that option: (exit code, output, the inputs baked {name: array}, whether narrowed)."""
    model, values, narrow = os.path.join(test_dir, "model.onnx"), {}, []
    while True:
        code, text = run([tf, "import", model, "-o", graph] + narrow)
        if code == 2 and not narrow and "--narrow-float64" in text:
            narrow = ["--narrow-float64"]
            continue
        wanted = KNOWN_INPUT.search(text) if code == 2 else None
        if not wanted or wanted.group(1) in values:
            return code, text, values, bool(narrow)
        try:
            inputs, _ = graph_io(os.path.join(test_dir, "model.onnx"))
            sets = data_sets(test_dir)
        except Exception:  # data that are no tensors: nothing to bake
            return code, text, values, bool(narrow)
        fed = {name: array for (_, array), (name, _) in zip(sets[0][0], inputs)} if len(sets) == 1 else {}
        if wanted.group(1) not in fed:
            return code, text, values, bool(narrow)
        values[wanted.group(1)] = fed[wanted.group(1)]
        model = baked(os.path.join(test_dir, "model.onnx"), values, scratch)


def one_test(tf, device, test_dir, scratch):
    """(status, detail): status 'pass', 'refused' or 'FAIL'."""
    model = os.path.join(test_dir, "model.onnx")
    graph, plan = os.path.join(scratch, "model.tfg"), os.path.join(scratch, "model.tfplan")
    code, text, values, narrowed = imported(tf, test_dir, graph, scratch)
    if sanitizer_report(text):
        return "FAIL", f"import: sanitizer report: {text[-2000:]}"
    if code == 2:
        return "refused", text.strip().splitlines()[0] if text.strip() else "(no message)"
    if code != 0:
        return "FAIL", f"import: exit {code}: {text[-2000:]}"
    code, text = run([tf, "compile", graph, "--inference", "--target", device.split(":")[0], "-o", plan])
    if code != 0 or sanitizer_report(text):
        return "FAIL", f"compile (after a successful import): exit {code}: {text.strip()[-2000:]}"
    try:
        inputs, outputs = graph_io(model)
        sets = data_sets(test_dir)
    except Exception as error:  # a sequence or optional input: the importer should have refused it
        return "FAIL", f"the test's data cannot be read as tensors ({error}), yet import took the model"
    for given, _ in sets:
        why = declared_shape_mismatch(model, [(stored or name, array) for (stored, array), (name, _) in zip(given, inputs)])
        if why:
            return "baddata", why
    for k, (given, expected) in enumerate(sets):
        data, out = os.path.join(scratch, f"data{k}"), os.path.join(scratch, f"out{k}")
        os.makedirs(data)
        for (stored, array), (name, elem_type) in zip(given, inputs):
            if name not in values:
                np.save(os.path.join(data, (stored or name) + ".npy"), narrowed_data(as_tightfit_reads(array, elem_type),
                                                                                    narrowed))
        code, text = run([tf, "run", plan, "--data", data, "--output", out, "--device", device], device_env(device))
        if code != 0 or sanitizer_report(text):
            return "FAIL", f"run (data set {k}): exit {code}: {text.strip()[-2000:]}"
        for (stored, want), (name, elem_type) in zip(expected, outputs):
            path = os.path.join(out, (stored or name) + ".npy")
            if not os.path.exists(path):
                return "FAIL", f"run (data set {k}) wrote no {os.path.basename(path)}"
            why = compare(stored or name, np.load(path), narrowed_data(as_tightfit_reads(want, elem_type), narrowed))
            if why:
                return "FAIL", f"data set {k}: {why}"
    baked_note = (f" (baked: {', '.join(values)})" if values else "") + (" (float64 narrowed)" if narrowed else "")
    return "pass", f"{len(sets)} data set{'s' if len(sets) != 1 else ''}{baked_note}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tightfit")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--only", default="")
    parser.add_argument("--list", action="store_true", help="group the refusals by reason")
    args = parser.parse_args()
    if not os.path.isdir(args.root):
        skip(f"{args.root} is missing; scripts/setup installs libonnx-testdata")
    tests = sorted(t for t in os.listdir(args.root) if args.only in t)
    counts, failures, reasons = collections.Counter(), [], collections.Counter()
    for name in tests:
        scratch = tempfile.mkdtemp(prefix="node_")
        try:
            status, detail = one_test(args.tightfit, args.device, os.path.join(args.root, name), scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if name in KNOWN:
            status, detail = ("known", f"{detail} ({KNOWN[name]})") if status == "FAIL" and "differ" in detail else \
                ("FAIL", f"listed in KNOWN ({KNOWN[name]}) but now {status}: {detail}; update the list")
        counts[status] += 1
        if status == "FAIL":
            failures.append(name)
        if status == "refused":
            reasons[re.sub(r"^tightfit import: [^:]*: ", "", detail)[:160]] += 1
        print(f"{status:7} {name}: {detail}" if status != "refused" or args.list else f"{status:7} {name}")
    if args.list:
        print("\nrefusals by reason:")
        for reason, count in reasons.most_common():
            print(f"  {count:4}  {reason}")
    print(f"\n{len(tests)} node tests on {args.device}: {counts['pass']} give the expected outputs, "
          f"{counts['refused']} refused at import, {counts['baddata']} with data unlike their model, "
          f"{counts['known']} known differences, {counts['FAIL']} FAIL")
    if failures:
        print("FAILED: " + " ".join(failures))
    print(f"{len(tests) - counts['FAIL']} passed, {counts['FAIL']} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
