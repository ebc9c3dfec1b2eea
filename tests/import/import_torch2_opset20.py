#!/usr/bin/env python3
"""PyTorch 2.x's exporters at opset 20, their default since 2.9 (the GPU run of 2026-12-04 found
`tightfit import` refusing it): an MLP with both GELUs (exact and approximate="tanh") exported by
the TorchScript exporter (dynamo=False) and by the dynamo exporter, each at opset_version=20,
imported, compiled (--inference), run, and compared with the module's eval-mode output (within
1e-5). The file's opset must be 20, and each GELU must import as one gelu op.

usage: import_torch2_opset20.py TIGHTFIT    (under .venv-torch2's python; exits 77 without torch 2.x,
       or when an exporter cannot write opset 20 here, saying why)
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
except ImportError as error:
    print(f"SKIP: cannot import torch, onnx or numpy ({error})")
    sys.exit(77)

OPSET = 20


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        h = torch.nn.functional.gelu(self.b(h), approximate="tanh")
        return self.c(h)


def export(model, x, path, dynamo):
    """None, or why this exporter cannot write opset 20 here."""
    options = {"dynamo": dynamo}
    if dynamo:
        options.update(external_data=False, dynamic_shapes=({0: torch.export.Dim("N")},))
    else:
        options.update(dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    try:
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=OPSET, **options)
    except Exception as error:  # an exporter without opset 20 (or without onnxscript): a skip, said why
        return f"{type(error).__name__}: {str(error).strip()[:300]}"
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tightfit = sys.argv[1]
    if not torch.__version__.startswith("2."):
        print(f"SKIP: torch {torch.__version__} (this test is for PyTorch 2.x's exporters)")
        return 77
    torch.manual_seed(0)
    model = Mlp().eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        want = model(x).double().numpy()
    failures, skipped, ran = [], [], 0
    with tempfile.TemporaryDirectory() as folder:
        for dynamo in (False, True):
            label = "the dynamo exporter" if dynamo else "the TorchScript exporter (dynamo=False)"
            name = "dynamo" if dynamo else "torchscript"
            path = os.path.join(folder, name + ".onnx")
            why = export(model, x, path, dynamo)
            if why:
                print(f"{label}: cannot export at opset {OPSET} here: {why}")
                skipped.append(label)
                continue
            opsets = {o.domain: o.version for o in onnx.load(path).opset_import}
            written = opsets.get("", opsets.get("ai.onnx"))
            print(f"{label}: torch {torch.__version__} wrote opset {written} ({opsets})")
            if written != OPSET:
                failures.append(f"{label}: asked for opset {OPSET}, the file says {written}")
                continue
            tfg, plan, data, out = (os.path.join(folder, name + s) for s in (".tfg", ".tfplan", ".data", ".out"))
            steps = [[tightfit, "import", path, "-o", tfg], [tightfit, "compile", tfg, "--inference", "--set", "N=5",
                                                             "-o", plan]]
            os.makedirs(data)
            np.save(os.path.join(data, "x.npy"), x.numpy())
            steps.append([tightfit, "run", plan, "--data", data, "--output", out])
            error = None
            for command in steps:
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    error = f"{command[1]}: exit {done.returncode}: {done.stderr.strip()}"
                    break
            if error:
                print(f"{label}: {error}")
                failures.append(f"{label}: {error}")
                continue
            ran += 1
            got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
            worst = float(np.max(np.abs(got - want))) if got.shape == want.shape else None
            ops = [n["op"] for n in json.loads(subprocess.run([tightfit, "dump", tfg], capture_output=True,
                                                              text=True).stdout)["nodes"]]
            gelus = ops.count("gelu")
            print(f"{label}: output {list(got.shape)}, worst difference from the module {worst} (tolerance 1e-5); "
                  f"{gelus} gelu ops; ops {sorted(set(ops))}")
            if worst is None or not worst <= 1e-5:
                failures.append(f"{label}: output {list(got.shape)} vs {list(want.shape)}, worst difference {worst}")
            if gelus != 2:
                failures.append(f"{label}: {gelus} gelu ops in the imported graph (wanted 2): {ops}")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        print("import_torch2_opset20: FAIL")
        return 1
    if not ran:
        print(f"SKIP: no exporter here writes opset {OPSET} ({', '.join(skipped)})")
        return 77
    print("import_torch2_opset20: PASS" + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
