"""tightfit.from_torch (issue 17): a small PyTorch module, exported with torch.onnx.export and imported
by the C importer (tf_onnx_import), compiles, starts from the module's weights (the first forward
loss equals PyTorch's on the same batch) and trains. Fails, not skips, when libtightfit.so has no
ONNX importer: from_torch is part of the package's promise.
usage: test_from_torch.py   (PYTHONPATH=python)"""
import sys

import numpy as np
import torch

import tightfit

print("library:", tightfit.library_path())
torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
batch = 4
xs = torch.randn(batch, 8)
ys = torch.tensor([0, 2, 1, 2])
try:
    graph = tightfit.from_torch(module, (xs,), loss="cross_entropy")
except tightfit.TightfitError as error:
    print(f"FAIL: from_torch: {error}")
    sys.exit(1)
parameters = sum(p.numel() for p in module.parameters())
plan = tightfit.compile(graph, set={"N": batch})
result = tightfit.check(graph, budget="1MiB", target="cpu", set={"N": batch})
failed = 0
if result["regions"]["parameters"] < 4 * parameters:
    print(f"FAIL: the parameters region ({result['regions']['parameters']} bytes) is smaller than the module's "
          f"{parameters} f32 parameters")
    failed += 1
else:
    print(f"ok: {parameters} parameters imported; plan {plan.total_bytes} bytes, inputs {plan.inputs}")
session = tightfit.Session(plan, seed=0)
feed = {"x": xs.numpy(), "labels": ys.numpy().astype(np.int32)}
loss = session.forward(feed)
with torch.no_grad():
    expected = torch.nn.functional.cross_entropy(module(xs), ys).item()
if abs(loss - expected) > 1e-5:
    print(f"FAIL: the first loss {loss:.6f} is not PyTorch's {expected:.6f}: the weights did not come across")
    failed += 1
else:
    print(f"ok: the first loss equals PyTorch's: {loss:.6f} vs {expected:.6f}")
losses = [session.step(feed) for _ in range(5)]
if not losses[-1] < losses[0]:
    print(f"FAIL: 5 steps on one batch did not lower the loss: {losses}")
    failed += 1
else:
    print(f"ok: 5 steps on one batch: loss {losses[0]:.6f} -> {losses[-1]:.6f}")
print(f"from_torch: {3 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
