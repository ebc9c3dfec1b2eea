#!/usr/bin/python3
"""The command-line path of an imported model, run from another folder than the files': export the
zoo's cnn, `tightfit import --loss cross_entropy --weights w.safetensors`, `compile` an inference
plan and `run` it into a folder it creates (its outputs must equal PyTorch's to 1e-5), then
`compile` a training plan and `train` 3 steps (the weights are found beside the plan, whatever the
working folder); imported without a loss, `run --json` says null for the loss and the accuracy.
A static export (no dynamic_axes: x [8, 1, 8, 8], what torch.onnx.export writes by default) trains
on its whole files every step: 3 SGD steps give PyTorch's full-batch losses (issue 49: the feed cut
x into 8 samples, filled one and trained on uninitialised bytes). torch.where of two Python numbers,
which PyTorch 1.13 exports as float64, imports with --narrow-float64 (refused without, saying so) and
runs to PyTorch's outputs.

usage: import_cli.py TIGHTFIT       exits 77 (ctest skip) without torch
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError as error:
    print(f"import_cli.py: skipped, cannot import torch ({error})")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
import torch_reference  # noqa: E402


def run(args, cwd):
    result = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    print("$", " ".join(os.path.basename(a) if a.startswith("/tmp") else a for a in args))
    print((result.stdout + result.stderr).strip())
    if result.returncode != 0:
        raise SystemExit(f"import_cli: FAIL (exit {result.returncode})")
    return result.stdout


def scored_accuracy(tightfit, plan, logits, labels, folder, elsewhere):
    """`run` scores an imported model's i64 labels, leaving out the ignored ones (-100): its accuracy
    is PyTorch's argmax accuracy over the labels that count (issue 44: it said none)."""
    scored = os.path.join(folder, "scored")
    os.makedirs(scored)
    x = np.load(os.path.join(folder, "data", "x.npy"))
    np.save(os.path.join(scored, "x.npy"), x)
    ignored = labels.copy()
    ignored[[1, 4]] = -100
    np.save(os.path.join(scored, "labels.npy"), ignored)
    said = json.loads(run([tightfit, "run", plan, "--data", scored, "--json"], elsewhere))
    counted = ignored != -100
    theirs = float(np.mean(np.argmax(logits, axis=1)[counted] == ignored[counted]))
    print(f"accuracy of i64 labels, 2 of 8 ignored: tightfit {said['accuracy']}, PyTorch {theirs}")
    if said["accuracy"] is None or abs(said["accuracy"] - theirs) > 1e-6:  # JSON prints 6 decimals
        raise SystemExit("import_cli: FAIL (the accuracy is not PyTorch's over the labels that count)")


def static_training(tightfit, module, x, labels, folder, elsewhere):
    """3 SGD steps of a statically exported cnn on all 8 samples at once, against PyTorch's."""
    onnx = os.path.join(folder, "static.onnx")
    torch.onnx.export(module, (torch.from_numpy(x),), onnx, input_names=["x"], output_names=["logits"],
                      opset_version=14, do_constant_folding=False)
    graph, plan = os.path.join(folder, "static.tfg"), os.path.join(folder, "static.tfplan")
    run([tightfit, "import", onnx, "-o", graph, "--loss", "cross_entropy"], elsewhere)
    run([tightfit, "compile", graph, "--optimizer", "sgd", "--lr", "0.05", "--weight-decay", "0", "--clip", "0",
         "-o", plan], elsewhere)
    said = run([tightfit, "train", plan, "--data", os.path.join(folder, "data"), "--steps", "3", "--json",
                "--log-every", "1"], elsewhere)
    ours = [json.loads(line)["loss"] for line in said.splitlines() if line.startswith("{") and '"step"' in line]
    reference = copy.deepcopy(module)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    theirs = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(reference(torch.from_numpy(x)), torch.from_numpy(labels))
        loss.backward()
        optimizer.step()
        theirs.append(loss.item())
    print(f"static export, 3 full-batch SGD steps: tightfit {ours}, PyTorch {theirs}")
    if len(ours) != 3 or max(abs(a - b) for a, b in zip(ours, theirs)) > 1e-5:
        raise SystemExit("import_cli: FAIL (the static export trains otherwise than PyTorch)")


class AdditiveMask(torch.nn.Module):
    """torch.where of two Python numbers (an additive mask), which PyTorch 1.13 exports as float64: a
    Cast of the scores to DOUBLE and a DOUBLE output, though eager PyTorch computes in f32."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 6)

    def forward(self, x, keys):
        return self.a(x) + torch.where(keys > 0, 0.0, float("-inf"))


def narrowed_float64(tightfit, folder, elsewhere):
    """Refused without --narrow-float64 (saying so) where the export wrote float64; with it, `run`
    gives PyTorch's outputs, -inf included."""
    module = AdditiveMask()
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    keys = np.array([[1, 1, 0, 1, 1, 0]] * 4, dtype=np.float32)
    onnx = os.path.join(folder, "mask.onnx")
    torch.onnx.export(module, (torch.from_numpy(x), torch.from_numpy(keys)), onnx, input_names=["x", "keys"],
                      output_names=["y"], opset_version=14)
    graph = os.path.join(folder, "mask.tfg")
    refused = subprocess.run([tightfit, "import", onnx, "-o", graph], capture_output=True, text=True, cwd=elsewhere)
    print(f"without --narrow-float64: exit {refused.returncode}: {(refused.stdout + refused.stderr).strip()}")
    if refused.returncode != 0 and "--narrow-float64" not in refused.stderr:
        raise SystemExit("import_cli: FAIL (the float64 refusal does not name --narrow-float64)")
    run([tightfit, "import", onnx, "-o", graph, "--narrow-float64"], elsewhere)
    data, out, plan = (os.path.join(folder, name) for name in ("mask-data", "mask-out", "mask.tfplan"))
    os.makedirs(data)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "keys.npy"), keys)
    run([tightfit, "compile", graph, "--inference", "-o", plan], elsewhere)
    run([tightfit, "run", plan, "--data", data, "--output", out], elsewhere)
    ours = np.load(os.path.join(out, "y.npy"))
    with torch.no_grad():
        theirs = module(torch.from_numpy(x), torch.from_numpy(keys)).numpy()
    same_inf = np.array_equal(np.isinf(ours), np.isinf(theirs)) and theirs.dtype == np.float32
    finite = np.isfinite(theirs)
    error = float(np.max(np.abs(ours[finite] - theirs[finite])))
    print(f"--narrow-float64 run vs PyTorch: {int((~finite).sum())} -inf alike: {same_inf}, max |difference| "
          f"{error:.2e}")
    if not same_inf or error > 1e-5:
        raise SystemExit("import_cli: FAIL (the narrowed model computes otherwise than PyTorch)")


def main():
    tightfit = os.path.abspath(sys.argv[1])
    torch.manual_seed(0)
    module = torch_reference.build("cnn").eval()
    with tempfile.TemporaryDirectory(prefix="tf-import-cli-") as folder, \
            tempfile.TemporaryDirectory(prefix="tf-elsewhere-") as elsewhere:
        x = np.random.default_rng(0).standard_normal((8, 1, 8, 8)).astype(np.float32)
        labels = np.arange(8, dtype=np.int64) % 10
        os.makedirs(os.path.join(folder, "data"))
        np.save(os.path.join(folder, "data", "x.npy"), x)
        np.save(os.path.join(folder, "data", "labels.npy"), labels)
        onnx = os.path.join(folder, "cnn.onnx")
        torch.onnx.export(module, (torch.from_numpy(x[:4]),), onnx, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, opset_version=14,
                          do_constant_folding=False)
        graph = os.path.join(folder, "cnn.tfg")
        run([tightfit, "import", onnx, "-o", graph, "--loss", "cross_entropy", "--weights", "w.safetensors"],
            elsewhere)
        if not os.path.exists(os.path.join(folder, "w.safetensors")):
            raise SystemExit("import_cli: FAIL (no w.safetensors beside the graph)")
        infer = os.path.join(folder, "infer.tfplan")
        run([tightfit, "compile", graph, "--inference", "--set", "N=4", "-o", infer], elsewhere)
        outputs = os.path.join(folder, "out")  # run creates it
        run([tightfit, "run", infer, "--data", os.path.join(folder, "data"), "--output", outputs], elsewhere)
        ours = np.load(os.path.join(outputs, "logits.npy")).reshape(8, 10)
        with torch.no_grad():
            theirs = module(torch.from_numpy(x)).numpy()
        error = float(np.max(np.abs(ours - theirs)))
        print(f"run vs PyTorch: max |difference| {error:.2e} over {ours.size} logits")
        scored_accuracy(tightfit, infer, theirs, labels, folder, elsewhere)
        train = os.path.join(folder, "train.tfplan")
        run([tightfit, "compile", graph, "--set", "N=4", "--optimizer", "sgd", "--lr", "0.05", "-o", train],
            elsewhere)
        run([tightfit, "train", train, "--data", os.path.join(folder, "data"), "--steps", "3"], elsewhere)
        # Without --loss: a plan without a loss, whose run says so (JSON null, not nan).
        bare = os.path.join(folder, "bare.tfg")
        run([tightfit, "import", onnx, "-o", bare], elsewhere)
        run([tightfit, "compile", bare, "--inference", "--set", "N=4", "-o", infer], elsewhere)
        said = run([tightfit, "run", infer, "--data", os.path.join(folder, "data"), "--json"], elsewhere)
        if said.strip() != '{"loss": null, "accuracy": null}':
            raise SystemExit(f"import_cli: FAIL (run of a plan without a loss said {said.strip()!r})")
        if error > 1e-5:
            raise SystemExit("import_cli: FAIL (outputs differ)")
        static_training(tightfit, module, x, labels, folder, elsewhere)
        narrowed_float64(tightfit, folder, elsewhere)
    print("import_cli: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
