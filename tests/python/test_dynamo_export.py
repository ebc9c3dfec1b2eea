"""`tightfit import` of PyTorch 2.x's dynamo exporter (torch.onnx.export's default from 2.9, opset 18):
what imports and what it imports as, beside tightfit.from_torch, which uses the TorchScript exporter.
  - an MLP, a CNN whose BatchNorm the eval-mode export folds, and a tied embedding/LayerNorm/GELU head,
    exported with dynamo=True, opset_version=18, external_data=False, import; compiled --inference and
    run, each output is the module's eval output within 1e-5; the GELU the export decomposes into
    x * (0.5 * (1 + erf(x / sqrt 2))) is one gelu op
  - what that export changes (docs/import.md): the BatchNorm is gone and the head's transposed weight is
    a parameter of its own (the tie broken), as in the TorchScript exporter's eval-mode export
  - the default export (external_data=True) writes the weights beside the file: refused, saying to
    pass external_data=False; its default opset (20) imports and gives the module's output
Skips (77) where torch.onnx.export has no dynamo exporter (PyTorch 1.13).
usage: test_dynamo_export.py   (PYTHONPATH=python; run by the *_torch2 tests in .venv-torch2)"""
import collections
import inspect
import json
import os
import sys
import tempfile
import warnings

import numpy as np
import torch

import tightfit
from tally import check, finish

if "dynamo" not in inspect.signature(torch.onnx.export).parameters:
    print(f"SKIP: torch {torch.__version__} has no dynamo exporter (torch.onnx.export(dynamo=...), PyTorch 2.x)")
    sys.exit(77)
print("library:", tightfit.library_path(), "torch", torch.__version__)
torch.manual_seed(0)
torch.set_num_threads(1)
folder = tempfile.mkdtemp()


def export(model, x, name, **options):
    path = os.path.join(folder, name + ".onnx")
    with warnings.catch_warnings(), open(os.devnull, "w") as quiet:
        warnings.simplefilter("ignore")
        saved, sys.stdout = sys.stdout, quiet  # the exporter's progress lines
        try:
            torch.onnx.export(model.eval(), (x,), path, dynamo=True, input_names=["x"], output_names=["y"],
                              **{"opset_version": 18, **options})
        finally:
            sys.stdout = saved
    return path


def run(path, x):
    """(the imported graph's output for x, its ops, its parameter names) through the CLI."""
    tfg, plan = path[:-5] + ".tfg", path[:-5] + ".tfplan"
    tightfit._run("import", [path, "-o", tfg])
    tightfit._run("compile", [tfg, "--inference", "-o", plan])
    data, out = path[:-5] + ".data", path[:-5] + ".out"
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "x.npy"), x.numpy())
    tightfit._run("run", [plan, "--data", data, "--output", out])
    dump = json.loads(tightfit._run("dump", [tfg])[1])
    parameters = sorted(t["name"] for t in dump["tensors"] if t.get("kind") == "parameter")
    return np.load(os.path.join(out, "y.npy")), collections.Counter(n["op"] for n in dump["nodes"]), parameters


class TiedHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.norm = torch.nn.Embedding(20, 8), torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(torch.nn.functional.gelu(self.norm(self.emb(x))))


cases = [
    ("an MLP", torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)),
     torch.randn(4, 8), {"relu": 1}, []),
    ("a CNN with a BatchNorm (folded by the export)",
     torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                         torch.nn.Linear(36, 3)), torch.randn(3, 2, 5, 5), {"conv2d": 1, "batch_norm": 0}, []),
    ("a tied embedding, LayerNorm, GELU head", TiedHead(), torch.randint(0, 20, (3, 5)),
     {"gelu": 1, "layer_norm": 1}, ["head.weight", "norm.bias", "norm.weight"]),
]
for label, model, x, ops_wanted, named in cases:
    try:
        model.eval()
        with torch.no_grad():
            want = model(x).numpy()
        got, ops, parameters = run(export(model, x, label.split()[1], external_data=False), x)
        worst = float(np.max(np.abs(got - want))) if got.shape == want.shape else None
        wrong_ops = {op: ops.get(op, 0) for op, n in ops_wanted.items() if ops.get(op, 0) != n}
        problem = None
        if worst is None or worst > 1e-5:
            problem = f"output {got.shape} differs from PyTorch's {want.shape} by {worst}"
        elif wrong_ops:
            problem = f"ops {wrong_ops}, wanted {ops_wanted}"
        elif named and not (set(named) < set(parameters) and len(parameters) == len(named) + 1):
            problem = f"parameters {parameters}: wanted {named} and the transposed head of the export's own"
        check(f"dynamo export of {label} imports", problem,
              f"worst difference {worst}, ops {dict(ops)}, parameters {parameters}")
    except (tightfit.TightfitError, RuntimeError) as error:
        check(f"dynamo export of {label} imports", f"{type(error).__name__}: {str(error)[:300]}", "")


def refused(label, path, phrases, otherwise):
    """`tightfit import path` refuses the file with every one of `phrases` in its message."""
    try:
        tightfit._run("import", [path, "-o", path[:-5] + ".tfg"])
        check(label, "imported", "")
    except tightfit.TightfitError as error:
        message = str(error)
        check(label, None if all(phrase in message for phrase in phrases) else otherwise, message)


model = torch.nn.Sequential(torch.nn.Linear(64, 32))  # 8 KiB of weights: onnx keeps tensors under 1 KiB inline
refused("the default dynamo export (weights in a file beside it) is refused",
        export(model, torch.randn(2, 64), "external"),
        ["data in an external file is not supported", "external_data=False"],
        "without saying to pass external_data=False")
# Its default opset (20 in PyTorch 2.9 to 2.11) imports since tightfit reads opsets 7 to 21: the GPU run of
# 2026-12-04 found it refused (import/onnx_decode.c).
try:
    x = torch.randn(2, 64)
    with torch.no_grad():
        want = model.eval()(x).numpy()
    path = export(model, x, "default", opset_version=None, external_data=False)
    import onnx
    written = [o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx")]
    got, _, _ = run(path, x)
    worst = float(np.max(np.abs(got - want))) if got.shape == want.shape else None
    check("the dynamo exporter's default opset imports", None if worst is not None and worst <= 1e-5 else
          f"output {got.shape} differs from PyTorch's {want.shape} by {worst}",
          f"opset {written}, worst difference {worst}")
except (tightfit.TightfitError, RuntimeError) as error:
    check("the dynamo exporter's default opset imports", f"{type(error).__name__}: {str(error)[:300]}", "")

finish("dynamo_export")
