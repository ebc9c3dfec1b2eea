"""What the from_torch test files share (test_from_torch.py and the test_from_torch_attention, _operators and
_convolution files split from it): the batch size, tally.py's case() and counts,
the importer check each file starts with, and the helpers that train an import beside PyTorch. Imported by
those files (Python puts the script's own folder on sys.path)."""
import json
import os
import sys
import tempfile

import numpy as np
import torch

import tally
import tightfit
from tally import case  # noqa: F401 (the files import it from here)
from torch_training import adamw_losses

batch = 4


def report_ok(text):
    """Prints an ok line and counts it (tally.py's count)."""
    tally.ok(True, text)


def report_failure(text):
    """Prints a FAIL line and counts it."""
    tally.ok(False, text)


def require_importer():
    """Prints the library and exits 1 (a failure, not a skip) when from_torch cannot import a small
    module, as when libtightfit.so has no ONNX importer: from_torch is part of the package's promise."""
    print("library:", tightfit.library_path())
    try:
        tightfit.from_torch(torch.nn.Linear(8, 3), (torch.randn(batch, 8),), loss="cross_entropy")
    except tightfit.TightfitError as error:
        print(f"FAIL: from_torch: {error}")
        sys.exit(1)


def finish(name, failed=0):
    """tally.finish(name) with `failed` more failures (those a file counted outside case() and report_failure)."""
    tally.counts["failed"] += failed
    tally.finish(name)


def dumped(graph):
    """`tightfit dump` of `graph` (JSON text)."""
    with tempfile.TemporaryDirectory() as folder:
        graph.save(os.path.join(folder, "graph.tfg"))
        return tightfit._run("dump", [os.path.join(folder, "graph.tfg")])[1]


def adamw_both(graph, model, xs, ys, steps, sessions=None, inputs=None):
    """`steps` AdamW steps (lr 1e-2, no weight decay, no clipping) on one batch, by tightfit on `graph`
    and by PyTorch on `model`: (tightfit's losses, PyTorch's, the worst relative difference). The
    session is appended to `sessions` when given. `inputs` ({name: tensor}) replaces the single input
    `x` = xs for a model of several inputs, given to it in that order."""
    plan = tightfit.compile(graph, set={"N": batch}, optimizer="adamw", lr=1e-2, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0)
    if sessions is not None:
        sessions.append(session)
    inputs = inputs or {"x": xs}
    feed = {name: t.numpy() if t.is_floating_point() else t.numpy().astype(np.int64) for name, t in inputs.items()}
    feed["labels"] = ys.numpy().astype(np.int32)
    losses = [session.step(feed) for _ in range(steps)]
    expected = adamw_losses(model, inputs.values(), ys, steps, 1e-2)
    return losses, expected, tally.relative_apart(losses, expected)


def own_loss_both(graph, model, inputs, steps, bindings=None, device="cpu"):
    """`steps` AdamW steps (lr 1e-2, no weight decay, no clipping) of a graph whose output is the module's
    own loss (from_torch(loss="output")), by tightfit on `device` (the plan for its backend, symbols bound
    as `bindings`) and by PyTorch on `model`, on `inputs` ({name: tensor}, in the module's order): (tightfit's
    losses, PyTorch's, the worst relative difference); PyTorch's side is skipped (None, inf) off the CPU."""
    plan = tightfit.compile(graph, target=device.split(":")[0], set=bindings, optimizer="adamw", lr=1e-2,
                            weight_decay=0, clip=0)
    with tightfit.Session(plan, seed=0, device=device) as session:
        losses = [session.step({name: t.numpy() for name, t in inputs.items()}) for _ in range(steps)]
    if device != "cpu":
        return losses, None, float("inf")
    expected = adamw_losses(model, tuple(inputs.values()), None, steps, 1e-2, criterion=lambda loss, _: loss)
    return losses, expected, tally.relative_apart(losses, expected)


def own_loss_everywhere(graph, model, inputs, steps, bindings, seen=""):
    """own_loss_both on the CPU beside PyTorch (within 1e-5), then the same plan's ops on Vulkan (lavapipe
    in CI) beside the CPU's losses (within 1e-5; skipped, saying so, without a device): (a problem or
    None, what was seen after `seen`)."""
    losses, expected, worst = own_loss_both(graph, model, inputs, steps, bindings)
    seen += f"{steps} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst " \
        f"relative difference {worst:.1e}"
    if not worst <= 1e-5:
        return f"tightfit {losses} vs PyTorch {expected}", seen
    try:
        on_vulkan = own_loss_both(graph, model, inputs, steps, bindings, device="vulkan")[0]
    except tightfit.TightfitError as error:
        if "no Vulkan" in str(error) or "unsupported" in str(error).lower():
            return None, seen + f"; Vulkan skipped: no device ({error})"
        raise
    apart = tally.relative_apart(on_vulkan, losses)
    seen += f"; on Vulkan within {apart:.1e} of the CPU's"
    return (None if apart <= 1e-5 else f"Vulkan {on_vulkan} vs CPU {losses}"), seen


def beside_torch(model, xs, ys, counted, steps=5):
    """from_torch of `model` (cross_entropy), then `steps` AdamW steps by tightfit and by PyTorch:
    (a problem or None, what was seen, the graph's ops), what was seen counting the ops in `counted`."""
    graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    losses, expected, worst = adamw_both(graph, model, xs, ys, steps)
    seen = ", ".join(f"{ops.count(op)} {op}" for op in counted) + f"; {steps} AdamW steps {losses[0]:.6f} -> " \
        f"{losses[-1]:.6f} (PyTorch {expected[-1]:.6f}), worst relative difference {worst:.1e}"
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen, ops


def each_beside_torch(forms, steps=4):
    """beside_torch for each (label, make) of `forms` (make() -> (model, xs), labels of 5 classes drawn
    after it): the first problem with what was seen, or (None, every form's worst difference)."""
    seen = []
    for label, make in forms:
        model, xs = make()
        problem, text, _ = beside_torch(model, xs, torch.randint(0, 5, (batch,)), [], steps=steps)
        if problem:
            return f"{label}: {problem}", text
        seen.append(f"{label} {text.split('difference ')[-1]}")
    return None, "worst relative differences: " + ", ".join(seen)
