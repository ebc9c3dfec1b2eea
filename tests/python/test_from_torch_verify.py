"""from_torch's check of the import against the module (verify, python/tightfit/_verify.py): a module
whose export computes another function (a branch on torch.jit.is_tracing() or
torch.onnx.is_in_onnx_export(), as transformers' RecurrentGemma takes) is refused with where and by
how much; verify=False imports it; integer outputs compare exactly; a Dropout layer, kept for training,
is left out of the comparison (inference plans run dropout as the identity); a module that draws random numbers
is not compared; a batch size the trace froze imports fixed, with a warning; a custom autograd Function, whose backward the export loses, is named (a warning says so); verify=None skips a module past the size limit with a warning.
usage: test_from_torch_verify.py   (PYTHONPATH=python)"""
import warnings

import torch

import tightfit
from tally import case, finish
from tightfit import _verify
from from_torch_cases import own_loss_both

print("library:", tightfit.library_path())


class Traced(torch.nn.Module):
    """Scales its output by 2 only when not traced (`when` says how it asks)."""
    def __init__(self, when):
        super().__init__()
        self.when = when
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 5)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        if not self.when():
            h = h * 2.0
        return self.b(h)


class SlightlyTraced(Traced):
    """RecurrentGemma's case in small: a multiplier sqrt(1 - a^2) with a near 0 left out under tracing,
    so the outputs differ by ~1e-4 of their size, far below a fixed tolerance of 1e-3."""
    def forward(self, x):
        h = torch.tanh(self.a(x))
        if not self.when():
            h = h * torch.sqrt(1.0 - torch.full_like(h, 0.02) ** 2)
        return self.b(h)


def refused(model, what):
    try:
        tightfit.from_torch(model, (torch.randn(4, 8),), loss="cross_entropy")
    except tightfit.TightfitError as error:
        text = str(error)
        for part in ("verify", "another output than the module", "|difference|", "graph ", "module ",
                     "verify=False", what):
            if part not in text:
                return f"the message lacks {part!r}: {text}", ""
        return None, text[:150] + "..."
    return "imported without a word", ""


def tracing_branch():
    torch.manual_seed(1)
    return refused(Traced(torch.jit.is_tracing), "PyTorch's own rounding error")


def export_branch():
    torch.manual_seed(2)
    return refused(Traced(torch.onnx.is_in_onnx_export), "at least")


def slight_branch():
    torch.manual_seed(3)
    return refused(SlightlyTraced(torch.jit.is_tracing), "64 x")


def verify_off():
    torch.manual_seed(4)
    model = Traced(torch.jit.is_tracing)
    x = torch.randn(4, 8)
    graph = tightfit.from_torch(model, (x,), loss="cross_entropy", verify=False)
    plan = tightfit.compile(graph, set={"N": 4})
    with tightfit.Session(plan) as session:
        loss = session.forward({"x": x.numpy(), "labels": torch.zeros(4, dtype=torch.int64).numpy()})
    return None, f"imported; its first loss {loss:.4f} (the traced function's)"


class NaNInFloat64(Traced):
    """CANINE's case in small: its float64 forward gives NaN where its float32 one is finite (here a mask
    value that is -inf only in float64), so float64 measures no rounding error of it."""
    def forward(self, x):
        h = torch.tanh(self.a(x))
        floor = -3.0e38 if h.dtype == torch.float32 else float("-inf")
        weights = torch.softmax(torch.cat([h, torch.full_like(h[:, :1], floor)], 1), 1)
        return self.b(weights[:, :16] * (0.0 * floor if h.dtype == torch.float64 else 1.0))


def nan_in_float64():
    torch.manual_seed(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tightfit.from_torch(NaNInFloat64(lambda: False), (torch.randn(4, 8),), loss="cross_entropy")
    return None, "imported"


class ArgMax(torch.nn.Module):
    def __init__(self, shift=0):
        super().__init__()
        self.a = torch.nn.Linear(8, 6)
        self.shift = shift

    def forward(self, x):
        index = torch.argmax(self.a(x), dim=1)
        return index + self.shift if torch.jit.is_tracing() else index


def integer_outputs():
    torch.manual_seed(5)
    tightfit.from_torch(ArgMax(), (torch.randn(4, 8),))
    try:
        tightfit.from_torch(ArgMax(1), (torch.randn(4, 8),))
    except tightfit.TightfitError as error:
        if "differs from the module's at 4 of 4 elements" not in str(error):
            return f"the message: {error}", ""
        return None, "equal argmax imported; argmax + 1 under tracing refused: " + str(error)[:80] + "..."
    return "argmax + 1 under tracing imported", ""


class Noisy(torch.nn.Module):
    """Draws noise in its forward (as a VAE's reparameterisation does)."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = self.a(x)
        return y + torch.randn_like(y)


def random_forward():
    """A forward that draws (randn_like) imports; the check sees the module's two runs differ and warns
    instead of comparing (tightfit draws its own numbers, never PyTorch's)."""
    torch.manual_seed(6)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tightfit.from_torch(Noisy(), (torch.randn(4, 8),), loss="mse")
    texts = [str(w.message) for w in seen if "changes from one run to the next" in str(w.message)]
    return (None, "imported; the check warns: " + texts[0][:80] + "...") if texts \
        else (f"no warning: {[str(w.message) for w in seen]}", "")


def size_limit():
    torch.manual_seed(7)
    limit = _verify.AUTO_LIMIT_BYTES
    _verify.AUTO_LIMIT_BYTES = 64
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            tightfit.from_torch(Traced(torch.jit.is_tracing), (torch.randn(4, 8),), loss="cross_entropy")
        texts = [str(w.message) for w in seen if "not checked against the module" in str(w.message)]
        if not texts:
            return f"no warning: {[str(w.message) for w in seen]}", ""
        try:
            tightfit.from_torch(Traced(torch.jit.is_tracing), (torch.randn(4, 8),), loss="cross_entropy",
                                verify=True)
        except tightfit.TightfitError:
            return None, texts[0][:90] + "...; verify=True still checks (refused)"
        return "verify=True past the limit imported without a word", ""
    finally:
        _verify.AUTO_LIMIT_BYTES = limit


class Counting(torch.nn.Module):
    """Counts its calls in a buffer (forward updates it in place, as a step counter or an EMA does)."""
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.calls += 1
        return x


def module_untouched():
    """After from_torch (its export's trace and its check's runs) the module holds the same parameter and
    buffer objects, of the same dtypes and values (a call counter's too), in the same modes: PyTorch
    trains it on as before."""
    torch.manual_seed(8)
    model = torch.nn.Sequential(torch.nn.Conv1d(2, 4, 3), torch.nn.BatchNorm1d(4), torch.nn.GELU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 6, 3))
    model[1].eval()
    model.append(Counting())
    before = {name: (t, t.dtype, t.detach().clone()) for name, t in
              list(model.named_parameters()) + list(model.named_buffers())}
    modes = [m.training for m in model.modules()]
    tightfit.from_torch(model, (torch.randn(4, 2, 8),), loss="cross_entropy")
    after = dict(list(model.named_parameters()) + list(model.named_buffers()))
    for name, (t, dtype, value) in before.items():
        if after[name] is not t or t.dtype != dtype or not torch.equal(t, value):
            return f"{name}: {'another object' if after[name] is not t else after[name].dtype}", ""
    if [m.training for m in model.modules()] != modes:
        return "the modes changed", ""
    return None, f"{len(before)} parameters and buffers: same objects, dtypes and values; modes as before"


def kept_dropout():
    """A Dropout layer trains as tightfit's dropout, and the check still compares: an inference plan runs
    every dropout as the identity (PyTorch's eval mode), never a random mask on a prediction."""
    torch.manual_seed(9)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 4))
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    graph = tightfit.from_torch(model, (x,), loss="cross_entropy")
    losses = []
    for seed in (1, 2):
        with tightfit.Session(tightfit.compile(graph, set={"N": 16}), seed=seed) as session:
            losses.append(session.forward({"x": x.numpy(), "labels": y.numpy()}))
    model.eval()
    plain = torch.nn.functional.cross_entropy(model(x), y).item()
    model.train()
    if losses[0] == losses[1] or plain in losses:
        return f"training forward losses {losses} (seeds 1, 2), without dropout {plain}: no dropout drawn", ""
    return None, f"verified; training forward losses {losses[0]:.4f}, {losses[1]:.4f} (seeds 1, 2) vs {plain:.4f} without"


class RoundThrough(torch.autograd.Function):
    """A straight-through estimator: round forward, the gradient passed through unchanged."""
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, gradient):
        return gradient


class Quantised(torch.nn.Module):
    def __init__(self, through):
        super().__init__()
        self.a, self.b, self.through = torch.nn.Linear(8, 6), torch.nn.Linear(6, 4), through

    def forward(self, x):
        h = self.a(x) * 4
        return self.b((RoundThrough.apply(h) if self.through else h + (torch.round(h) - h).detach()) / 4)


def custom_functions():
    """A custom autograd Function's backward is not exported: from_torch names the Function; the
    straight-through estimator written as ops (x + (round(x) - x).detach()) imports without a word;
    torch.autograd.Function.apply is put back."""
    torch.manual_seed(10)
    before = torch.autograd.Function.__dict__.get("apply")
    said = {}
    for through in (True, False):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            tightfit.from_torch(Quantised(through), (torch.randn(4, 8),), loss="cross_entropy")
        said[through] = [str(w.message) for w in seen if "custom autograd Functions" in str(w.message)]
    if torch.autograd.Function.__dict__.get("apply") is not before:
        return "torch.autograd.Function.apply was not put back", ""
    if len(said[True]) != 1 or "(RoundThrough)" not in said[True][0] or said[False]:
        return f"warnings: applied {said[True]}, as ops {said[False]}", ""
    return None, said[True][0][:120] + "...; the estimator as ops: no warning"


case("a custom autograd Function (its backward not exported) is named", custom_functions)


class IgnoresMask(torch.nn.Module):
    """A forward that takes a mask it never reads (the export leaves the input out)."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 3)

    def forward(self, x, mask):
        return self.a(x)


def unused_input():
    """An input the forward pass never reads: the check runs without it and a warning names it (it
    failed, saying the verify's forward pass could not take 'mask'); the graph trains on x alone."""
    torch.manual_seed(11)
    model, x = IgnoresMask(), torch.randn(4, 6)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        graph = tightfit.from_torch(model, (x, torch.ones(4, 6)), loss="cross_entropy",
                                    input_names=["x", "mask"])
    said = [str(w.message) for w in seen if "does not use input" in str(w.message)]
    if len(said) != 1 or "'mask'" not in said[0] or "takes 'x'" not in said[0]:
        return f"warnings: {[str(w.message) for w in seen]}", ""
    plan = tightfit.compile(graph, set={"N": 4}, optimizer="sgd", lr=0.1)
    if sorted(plan.inputs) != ["labels", "x"]:
        return f"the plan's inputs: {sorted(plan.inputs)}", said[0]
    return None, said[0]


case("an input the forward pass never reads is named in a warning, and the graph takes the others", unused_input)
class FrozenCount(torch.nn.Module):
    """The batch mean as sum / n, n the traced batch as a Python number: right at the traced batch only."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 6)

    def forward(self, x):  # x [N, 6]
        h = self.a(x)
        return h - h.sum(0) / int(x.shape[0])


def frozen_count():
    """Right at the example's batch, wrong at any other: the check at twice the batch refuses it (the
    budget search may choose another micro-batch); dynamic_batch=False imports it fixed."""
    torch.manual_seed(12)
    try:
        tightfit.from_torch(FrozenCount(), (torch.randn(4, 6),), loss="mse")
    except tightfit.TightfitError as error:
        if "at N=8 (the example inputs twice over" not in str(error) or "dynamic_batch=False" not in str(error):
            return f"the message: {error}", ""
        tightfit.from_torch(FrozenCount(), (torch.randn(4, 6),), loss="mse", dynamic_batch=False)
        return None, str(error)[:150] + "...; dynamic_batch=False imports"
    return "imported without a word", ""


case("a count the trace froze, right at the example's batch only, is refused at twice the batch", frozen_count)


class ContrastiveByLength(torch.nn.Module):
    """CLIP's loss: cross_entropy(logits, torch.arange(len(logits))), len() a number the trace freezes."""
    def __init__(self):
        super().__init__()
        self.image, self.text = torch.nn.Linear(8, 6), torch.nn.Linear(8, 6)

    def forward(self, x):
        logits = self.image(x) @ self.text(x.flip(-1)).t()
        return torch.nn.functional.cross_entropy(logits, torch.arange(len(logits)))


def frozen_batch():
    """A batch size the trace froze: imported with the batch fixed, a warning naming where; trains as
    PyTorch's at that batch."""
    torch.manual_seed(11)
    model, x = ContrastiveByLength(), torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        graph = tightfit.from_torch(model, (x,), loss="output")
    said = [str(w.message) for w in seen if "froze the batch size 4" in str(w.message)]
    if len(said) != 1 or "SoftmaxCrossEntropyLoss" not in said[0] or "[N,N]" not in said[0]:
        return f"warnings: {[str(w.message) for w in seen]}", ""
    losses, expected, worst = own_loss_both(graph, model, {"x": x}, 3)  # no N to bind: the batch is fixed at 4
    return (None if worst < 1e-5 else f"losses {losses} vs {expected}"), \
        f"{said[0][:110]}...; 3 AdamW steps at the fixed batch, worst relative difference {worst:.1e}"


case("a batch size the trace froze (CLIP's arange(len(logits))) imports fixed, with a warning", frozen_batch)
case("a Dropout layer trains with seeded masks, and the check compares without them", kept_dropout)
case("the module is left as it was: the same tensors, dtypes, values and modes", module_untouched)
case("a branch on torch.jit.is_tracing() is refused with where and by how much", tracing_branch)
case("a branch on torch.onnx.is_in_onnx_export() is refused", export_branch)
case("a difference of 1e-4 of the output (RecurrentGemma's) is refused: the bound is PyTorch's own rounding",
     slight_branch)
case("verify=False imports it anyway", verify_off)
case("a module whose float64 forward gives NaN (CANINE's) is held to its dtype's tolerance, not refused",
     nan_in_float64)
case("integer outputs compare exactly", integer_outputs)
case("a forward that draws random numbers is not compared, and a warning says so", random_forward)
case("verify=None skips a module past the size limit with a warning; verify=True checks it", size_limit)
finish("from_torch_verify")
