"""from_torch's check that the imported graph computes what the module computes: the module's first
output on the example inputs (run as the export ran it: layers in eval mode, a BatchNorm in training
mode on batch statistics) against the graph's, from an inference plan on the CPU backend. A trace
records one path through the module's Python: code that branches on torch.jit.is_tracing(), on
torch.onnx.is_in_onnx_export() or on a value the trace freezes exports something else, and training
that graph would train another model without a word."""
import warnings

from ._lib import TightfitError

# |graph - module| allowed: this many times PyTorch's own rounding error on the inputs (its output
# against the module's in float64: the graph computes in another order, with other kernels), and at
# least this share of the output's largest magnitude (at least 1)
NOISE_FACTOR = 64
FLOOR = 1e-5
# where the module does not run in float64: a share of the output's largest magnitude, by its dtype
TOLERANCE = {"f32": 1e-3, "f64": 1e-3, "f16": 2e-2, "bf16": 5e-2}
# the check holds the weights three times more (in float64, the graph's): above this many bytes of
# parameters from_torch(verify=None) skips it
AUTO_LIMIT_BYTES = 2 << 30


def first_tensor(torch, value):
    """The first tensor of a module's output as torch.onnx.export flattens it (tensors, tuples, lists,
    dicts and Hugging Face ModelOutputs in order, None left out), or None."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for item in value:
            found = first_tensor(torch, item)
            if found is not None:
                return found
    return None


def module_output(torch, module, example_inputs, patches):
    """module(*example_inputs)'s first output as the export computed it: under `patches`, functions
    of the module that set it up as the export did (modes, configs) and return the function that
    undoes it; every buffer the run updates (BatchNorm's statistics, a step counter) put back."""
    statistics = [(b, b.detach().clone()) for b in module.buffers()]
    restores = []
    try:
        for patch in patches:
            restores.append(patch(module))
        with torch.no_grad():
            return first_tensor(torch, module(*example_inputs))
    finally:
        for restore in reversed(restores):
            if restore:
                restore()
        with torch.no_grad():
            for b, value in statistics:
                b.copy_(value)


def parameter_bytes(module):
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _label(dtype, shape, loss):
    """A label the loss accepts for any output: class 0, a CTC target ended at once (empty), zeros."""
    import numpy as np
    if dtype in ("i32", "i64"):
        return np.full(shape, -1 if loss == "ctc" else 0, dtype=np.int64 if dtype == "i64" else np.int32)
    return np.zeros(shape, dtype=np.float32)


def _array(x):
    """A tensor as numpy (bf16, which numpy lacks, as its exact f32 values)."""
    x = x.detach().cpu()
    array = (x.float() if str(x.dtype) == "torch.bfloat16" else x).numpy()
    return array.astype("uint8") if array.dtype == bool else array


def graph_output(graph, example_inputs, names, loss, bindings=None):
    """The graph's output "output" on the example inputs: an inference plan's forward pass on the CPU,
    its symbols bound as `bindings` says (None: their defaults). Inputs the graph does not take (the
    module never read them) are left out, with a warning where `bindings` is None."""
    from . import Session, compile
    plan = compile(graph, inference=True, target="cpu", set=bindings)
    head_buffers = plan._buffers()
    if "output" not in head_buffers:
        raise TightfitError("from_torch: verify: the inference plan has no buffer 'output' to compare")
    dtype, shape = head_buffers["output"]
    batch = {name: _array(x) for name, x in zip(names, example_inputs) if name in plan.inputs}
    unused = [name for name in names if name not in plan.inputs]
    if unused and bindings is None:
        warnings.warn(f"from_torch: the module's forward pass does not use input{'s' if len(unused) > 1 else ''} "
                      f"{', '.join(repr(n) for n in unused)}, which the export leaves out: the graph takes "
                      f"{', '.join(repr(n) for n in names if n in plan.inputs) or 'no input'} (feed its steps "
                      f"without {'them' if len(unused) > 1 else 'it'})", stacklevel=4)
    for name, (label_dtype, label_shape) in plan.inputs.items():
        if name not in batch:
            batch[name] = _label(label_dtype, label_shape, loss)
    with Session(plan, threads=1) as session:
        session.forward(batch)
        return session.read("output", shape=shape, dtype=dtype)


def _float64_output(torch, module, example_inputs, patches):
    """The module's first output computed in float64 (its parameters and buffers converted meanwhile,
    then the module given back its own tensor objects and their data), or None where it does not run so
    (and for a TorchScript module, whose tensors are its compiled module's)."""
    if isinstance(module, torch.jit.ScriptModule):
        return None
    held = [(m, dict(m._parameters), dict(m._buffers)) for m in module.modules()]
    data = [(p, p.data) for _, parameters, _ in held for p in parameters.values() if p is not None]
    try:
        module.double()
        inputs = tuple(x.double() if x.is_floating_point() else x for x in example_inputs)
        output = module_output(torch, module, inputs, patches)
    except Exception:  # a layer without float64 kernels, a tensor attribute left in float32: coarser bounds
        return None
    finally:
        for p, value in data:
            p.data = value
        for m, parameters, buffers in held:
            m._parameters.update(parameters)
            m._buffers.update(buffers)
    return None if output is None or not output.is_floating_point() else output.detach().cpu().numpy()


def _tolerance(torch, module, example_inputs, patches, reference, dtype):
    """(allowed |difference|, what it is, in words) for the module's output `reference` (numpy f32/f64)."""
    import numpy as np
    scale = max(1.0, float(np.max(np.abs(reference))) if reference.size else 1.0)
    exact = _float64_output(torch, module, example_inputs, patches)
    finite = np.isfinite(reference)
    if exact is None or exact.shape != reference.shape or not np.all(np.isfinite(exact[finite])):
        # (CANINE's float64 forward gives NaN where its float32 one is finite: no measure of its rounding)
        return TOLERANCE[dtype] * scale, f"{TOLERANCE[dtype]:g} x {scale:.3g} (the module does not run in float64)"
    noise = float(np.nanmax(np.abs(reference.astype(np.float64) - exact))) if reference.size else 0.0
    allowed = max(NOISE_FACTOR * noise, FLOOR * scale)
    return allowed, f"{allowed:.3g} ({NOISE_FACTOR} x PyTorch's own rounding error {noise:.3g} against float64, at " \
                    f"least {FLOOR:g} x {scale:.3g})"


def _nondeterministic(first, second):
    import numpy as np
    a, b = first.detach().cpu(), second.detach().cpu()
    return a.shape != b.shape or not np.array_equal(a.float().numpy() if a.is_floating_point() else a.numpy(),
                                                   b.float().numpy() if b.is_floating_point() else b.numpy(),
                                                   equal_nan=a.is_floating_point())


def compare(torch, module, example_inputs, graph, names, loss, patches=(), batch_symbol=None):
    """Raises TightfitError where the graph's output differs from the module's (run under `patches`,
    as module_output) by more than _tolerance allows: on the example inputs, and where the batch axis is
    symbol `batch_symbol`, on them twice over (a batch the trace froze computes something else at
    another size, which the budget search may choose). Warns and returns where the module's own output
    changes from one run to the next (random numbers drawn in its forward)."""
    expected = module_output(torch, module, example_inputs, patches)
    if expected is None:
        return
    if _nondeterministic(expected, module_output(torch, module, example_inputs, patches)):
        warnings.warn("from_torch: verify: the module's output changes from one run to the next on the same inputs "
                      "(random numbers drawn in its forward?): the import is not checked against it", stacklevel=3)
        return
    _compare_at(torch, module, example_inputs, expected, graph, names, loss, patches, None, "on the example inputs")
    if batch_symbol is None:
        return
    doubled = tuple(torch.cat([x, x]) for x in example_inputs)
    size = int(doubled[0].shape[0])
    _compare_at(torch, module, doubled, module_output(torch, module, doubled, patches), graph, names, loss, patches,
                {batch_symbol: size}, f"at {batch_symbol}={size} (the example inputs twice over; a size the trace "
                                      f"froze at {size // 2} differs there: from_torch(..., dynamic_batch=False) "
                                      f"imports the batch fixed)")


def _compare_at(torch, module, inputs, expected, graph, names, loss, patches, bindings, where):
    """compare()'s check of the module's output `expected` on `inputs` against the graph's."""
    import numpy as np
    if expected is None:
        return
    dtype = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16"}.get(expected.dtype)
    reference = expected.detach().float().cpu().numpy() if dtype else expected.detach().cpu().numpy()
    try:
        actual = graph_output(graph, inputs, names, loss, bindings)
    except TightfitError as error:
        raise TightfitError(f"from_torch: verify: the graph's forward pass {where} (an inference plan on the CPU) "
                            f"failed: {error}; from_torch(..., verify=False) imports without the check",
                            error.code) from error
    if tuple(actual.shape) != tuple(reference.shape):
        if actual.size != reference.size:
            raise TightfitError(f"from_torch: verify: {where}, the imported graph's output has shape "
                                f"{list(actual.shape)}, the module's {list(reference.shape)}{_HINT}")
        actual = actual.reshape(reference.shape)
    if dtype is None:  # integer or bool outputs: equal or wrong
        wrong = np.argwhere(actual.astype(np.int64) != reference.astype(np.int64))
        if len(wrong):
            at = tuple(int(i) for i in wrong[0])
            raise TightfitError(f"from_torch: verify: {where}, the imported graph's output differs from the module's at "
                                f"{len(wrong)} of {reference.size} elements: at {list(at)} {actual[at]} where the module "
                                f"gives {reference[at]}{_HINT}")
        return
    difference = np.abs(actual.astype(np.float64) - reference.astype(np.float64)).reshape(-1)
    difference[(np.isnan(actual) & np.isnan(reference)).reshape(-1)] = 0.0
    difference[np.isnan(difference)] = np.inf
    if not difference.size:
        return
    allowed, why = _tolerance(torch, module, inputs, patches, reference, dtype)
    if not np.max(difference) <= allowed:
        at = tuple(int(i) for i in np.unravel_index(int(np.argmax(difference)), reference.shape))
        raise TightfitError(f"from_torch: verify: the imported graph computes another output than the module {where}: "
                            f"|difference| {float(np.max(difference)):.3g} at {list(at)} (graph "
                            f"{float(actual[at]):.7g}, module {float(reference[at]):.7g}), more than {why}{_HINT}")


_HINT = ("; the export traced another computation than the module runs (code that branches on "
         "torch.jit.is_tracing() or torch.onnx.is_in_onnx_export(), or on a value the trace froze), or an "
         "operator imports wrongly (please report it): training this graph would train another model. "
         "from_torch(..., verify=False) imports it anyway")
