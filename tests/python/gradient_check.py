"""One SGD step of an imported model checked against PyTorch's gradients in float64 (the protocol of
test_from_torch_torchvision.py and test_from_torch_timm.py): tightfit takes the step at a learning rate of
1e7, so that (w0 - w1) / lr is each parameter's gradient to f32's precision; the loss, every parameter's
gradient and the BatchNorm running statistics after the step are compared with PyTorch's on the same batch in
float64. Deep networks on small batches are ill-conditioned, so each tensor's tolerance is ten times
PyTorch's own noise on it (the farthest from float64 of PyTorch's float32 result and of float64's after two
random 2^-24 changes of the weights, float32's rounding), and at least 1e-4 (1e-5 for the running statistics
and the loss): a wrong op or gradient is off by far more."""
import copy

import numpy as np
import torch

import tightfit

LR = 1e7


def criterion(loss):
    return torch.nn.functional.cross_entropy if loss == "cross_entropy" else torch.nn.functional.mse_loss


def pytorch_step(model, x, target, loss, dtype):
    """One forward and backward pass of a copy of `model` in `dtype`: the loss, each parameter's
    gradient and the running statistics after it (float64)."""
    model = copy.deepcopy(model).to(dtype).train()
    value = criterion(loss)(model(x.to(dtype)), target if loss == "cross_entropy" else target.to(dtype))
    value.backward()
    gradients = {k: p.grad.double().numpy() for k, p in model.named_parameters() if p.grad is not None}
    running = {k: v.double().numpy() for k, v in model.state_dict().items()
               if k.endswith(("running_mean", "running_var"))}
    return value.item(), gradients, running


def tightfit_step(graph, x, target, loss, device="cpu"):
    """One SGD step at LR: the loss, each parameter's gradient (w0 - w1) / LR and the running statistics."""
    plan = tightfit.compile(graph, set={"N": x.shape[0]}, optimizer="sgd", lr=LR, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0, device=device, threads=1)
    before = session.state_dict()
    feed = {"x": x.numpy(), "labels": target.numpy().astype(np.int32) if loss == "cross_entropy" else target.numpy()}
    value = session.step(feed)
    after = session.state_dict()
    gradients = {k: (before[k].astype(np.float64) - after[k].astype(np.float64)) / LR for k in before}
    return value, gradients, after


def apart(got, want):
    """Norm-wise relative distance of two float64 arrays (want's norm, or 1 where it is 0)."""
    return float(np.linalg.norm(np.asarray(got) - np.asarray(want))) / (float(np.linalg.norm(want)) or 1.0)


def rounded(model, seed):
    """A float64 copy of `model` with each weight moved by a random 2^-24 of itself (about float32's
    rounding): how far that moves a gradient measures how ill-conditioned it is."""
    model = copy.deepcopy(model).double()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + 2.0 ** -24 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return model


def farthest(got, want64, others, floor):
    """Each tensor of `want64` against `got`: those farther from float64 than they may be (10 times the
    farthest of `others` (float32 PyTorch's, float64's of rounded weights), at least `floor`), and the
    one nearest its limit (a text)."""
    worst, worst_text, wrong = -1.0, "none", []
    for k, want in want64.items():
        distance, own = apart(got[k], want), max(apart(other[k], want) for other in others)
        text = f"{k} {distance:.1e} from float64 (PyTorch's own noise {own:.1e})"
        limit = max(10 * own, floor)
        if distance > limit:
            wrong.append(text)
        if distance / limit > worst:
            worst, worst_text = distance / limit, text
    return worst_text, wrong


def references(model, x, target, loss):
    """PyTorch's steps the checks measure against: float64, float32, and float64 of two roundings of the
    weights."""
    return {"64": pytorch_step(model, x, target, loss, torch.float64),
            "32": pytorch_step(model, x, target, loss, torch.float32),
            "rounded": [pytorch_step(rounded(model, seed), x, target, loss, torch.float64) for seed in (0, 1)]}


def judge(step, refs, where):
    """One tightfit step (loss, gradients, state) against the references: (problem or None, seen)."""
    value, gradients, state = step
    (loss64, gradients64, running64), (loss32, gradients32, running32) = refs["64"], refs["32"]
    moved = [gradients for _, gradients, _ in refs["rounded"]]
    moved_running = [running for _, _, running in refs["rounded"]]
    missing = sorted(k for k in gradients64 if k not in gradients)
    if missing:
        return f"{where}: parameters not in the plan: {missing[:4]}", ""
    gradient_worst, gradient_wrong = farthest(gradients, gradients64, [gradients32] + moved, 1e-4)
    stats_worst, stats_wrong = farthest(state, running64, [running32] + moved_running, 1e-5)
    loss_apart = abs(value - loss64) / abs(loss64)
    seen = (f"{where}: {len(gradients64)} gradients, loss {value:.6f} (float64 {loss64:.6f}, float32 {loss32:.6f}), "
            f"worst gradient {gradient_worst}, {len(running64)} running statistics (worst {stats_worst})")
    if loss_apart > max(10 * abs(loss32 - loss64) / abs(loss64), 1e-5):
        return f"{where}: the loss is {loss_apart:.1e} from float64's", seen
    if gradient_wrong or stats_wrong:
        return f"{where}: {len(gradient_wrong)} gradients, {len(stats_wrong)} running statistics apart: " \
               f"{(gradient_wrong + stats_wrong)[:3]}", seen
    return None, seen


def compare(model, x, target, loss, vulkan):
    """The check of one model on the CPU (and on Vulkan when `vulkan`; skipped, saying so, without a device):
    (problem or None, what was seen)."""
    graph = tightfit.from_torch(model, (x,), loss=loss, input_names=["x"])
    refs = references(model, x, target, loss)
    problem, seen = judge(tightfit_step(graph, x, target, loss), refs, "cpu")
    if problem or not vulkan:
        return problem, seen
    try:
        step = tightfit_step(graph, x, target, loss, device="vulkan")
    except tightfit.TightfitError as error:
        if "no Vulkan" in str(error):
            return None, f"{seen}; skipped on Vulkan: no Vulkan device"
        raise
    problem, on_vulkan = judge(step, refs, "vulkan")
    return problem, f"{seen}; {on_vulkan}"
