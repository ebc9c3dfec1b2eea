"""The check every from_torch training test shares: a module imported with tightfit.from_torch and trained
STEPS AdamW steps by a tightfit Session and by PyTorch from the same weights, losses and trained weights
compared within 1e-5 and WEIGHT_TOLERANCE (train_both), each model one tally.case() that counts passes and failures.
Imported by the tests beside it (PYTHONPATH has this folder: it is the script's own)."""
import copy
import warnings

import numpy as np
import torch

import tightfit
from tally import relative_apart

BATCH, STEPS, LR = 3, 10, 1e-2
# Trained weights agree within WEIGHT_TOLERANCE (0.5% of one step of lr; ten steps move a weight by up
# to 0.1). 1e-5 held on the AVX-512 hosts; on an AVX2 host (2026-12-04: PyTorch's and OpenBLAS's
# AVX2 kernels round otherwise) WavLM's q_proj ended 2.0e-5 from PyTorch's with its losses 2.6e-6
# apart: AdamW turns a later step's near-cancelling gradient's rounding into up to lr. A wrong op
# moves weights by far more.
WEIGHT_TOLERANCE = 5e-5


def flags(model):
    """Each submodule's training flag and each MultiheadAttention's dropout probability."""
    return [(name, m.training, getattr(m, "dropout", None) if isinstance(m, torch.nn.MultiheadAttention) else None)
            for name, m in model.named_modules()]


def adamw_losses(model, inputs, labels, steps, lr, weight_decay=0, criterion=torch.nn.functional.cross_entropy):
    """PyTorch training the parameters of `model` that require grad `steps` AdamW steps on one batch
    (model(*inputs) against labels): the loss before each step."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                                  weight_decay=weight_decay)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(*inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def pytorch_steps(model, inputs, labels, loss):
    """PyTorch training `model` STEPS AdamW steps (train mode, lr LR, no weight decay) on one batch:
    the loss before each step, and the first step's gradients of the parameters that train."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0)
    criterion = torch.nn.functional.cross_entropy if loss == "cross_entropy" else torch.nn.functional.mse_loss
    expected, first_gradients = [], None
    for _ in range(STEPS):
        optimizer.zero_grad()
        value = criterion(model(*inputs.values()), labels)
        value.backward()
        if first_gradients is None:
            # None for a parameter the forward pass does not use (XLNet's mask_emb): AdamW leaves it
            first_gradients = {k: p.grad.detach().clone() if p.grad is not None else None
                               for k, p in model.named_parameters() if p.requires_grad}
        optimizer.step()
        expected.append(value.item())
    return expected, first_gradients


def train_both(model, inputs, labels, loss, before_training=None, fixed_batch=False):
    """Imports `model` (inputs: {name: tensor}, given to the model in that order) with `loss`, trains
    STEPS AdamW steps in tightfit, then in PyTorch from the same weights (train mode); returns what
    was seen and a problem (None when the losses agree within 1e-5, the trained weights within
    WEIGHT_TOLERANCE).
    before_training(graph, session, feed), when given, checks the imported graph before the first step
    and returns (problem or None, what was seen). fixed_batch: the export froze the batch size (from_torch
    warns so), and the graph has no symbol N to set."""
    before = flags(model)
    start = copy.deepcopy(model.state_dict())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = tightfit.from_torch(model, tuple(inputs.values()), loss=loss, input_names=list(inputs))
    said = [str(w.message) for w in caught if "from_torch" in str(w.message)]
    if flags(model) != before:
        return "from_torch changed the module's training flags or dropout probabilities", f"{flags(model)}"
    if any(not torch.equal(start[k], v) for k, v in model.state_dict().items()):
        return "from_torch changed the module's state", ""
    plan = tightfit.compile(graph, set={} if fixed_batch else {"N": BATCH}, optimizer="adamw", lr=LR, weight_decay=0,
                            clip=0)
    session = tightfit.Session(plan, seed=0)
    feed = {name: t.numpy() if t.is_floating_point() else t.numpy().astype(np.int64 if t.dtype != torch.bool
                                                                            else np.uint8)
            for name, t in inputs.items()}
    feed["labels"] = labels.numpy().astype(np.int32) if loss == "cross_entropy" else labels.numpy()
    checked = before_training(graph, session, feed) if before_training else (None, "")
    if checked[0]:
        return checked
    losses = [session.step(feed) for _ in range(STEPS)]
    expected, first_gradients = pytorch_steps(model, inputs, labels, loss)
    worst_loss = relative_apart(losses, expected)
    # An element whose first gradient nearly cancels (below 1e-6, where the gradients here are ~1e-3)
    # carries that cancellation's rounding (~1e-9, differently in each framework) into AdamW's first
    # step lr g / (|g| + eps), whose slope there is lr eps / g^2: 1e-9 of rounding moves it by over
    # 1e-5. The key projection's bias is such (zero in exact arithmetic: it adds q.b_k to every score
    # of a row, which the softmax ignores), and the odd weight. Those elements are left out of the
    # weight comparison, counted, and at most 5% of them. So are the elements whose first gradient
    # is exactly zero (an embedding's rows that no id of the batch looks up; a key bias's, which
    # PyTorch computes as exactly zero and tightfit as rounding), not counted.
    trained = session.state_dict()
    reference = {k: v.detach().numpy() for k, v in model.named_parameters()}
    # what the forward pass does not use is not in the exported graph, and PyTorch does not train it
    unused = sorted(k for k, g in first_gradients.items() if g is None)
    missing = sorted(set(reference) - set(trained) - set(unused))
    apart, noisy, left_out = {}, 0, {}
    frozen = [k for k, p in model.named_parameters() if not p.requires_grad]
    moved = [k for k in frozen if k in trained and not np.array_equal(trained[k], start[k].numpy())]
    for k, v in reference.items():
        if k in trained and k not in frozen and k not in unused:
            gradient = first_gradients[k].abs().numpy()
            decided = gradient >= 1e-6
            noisy += int(((gradient < 1e-6) & (gradient > 0)).sum())
            left_out[k] = int(((gradient < 1e-6) & (gradient > 0)).sum())
            apart[k] = float(np.max(np.abs(trained[k] - v)[decided], initial=0.0))
    worst_name = max(apart, key=apart.get)
    worst_weight = apart[worst_name]
    seen = (f"{len(reference)} tensors" + (f" ({len(frozen)} frozen)" if frozen else "") +
            (f" ({len(unused)} unused by the forward pass)" if unused else "") + f"; {STEPS} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch "
            f"{expected[0]:.6f} -> {expected[-1]:.6f}), worst loss difference {worst_loss:.1e} relative, worst "
            f"weight difference {worst_weight:.1e} ({worst_name}; {noisy} elements of a first gradient below "
            "1e-6 but not 0 left out)" + (f"; {checked[1]}" if checked[1] else "") + (f"; warned: {said}" if said else ""))
    if missing:
        return f"the trained weights lack {missing}", seen
    if moved:
        return f"parameters frozen in PyTorch (requires_grad False) were trained: {moved}", seen
    if worst_loss > 1e-5:
        return f"losses {losses} vs PyTorch's {expected}", seen
    if noisy > sum(v.size for v in reference.values()) // 20:
        most = sorted(left_out, key=left_out.get, reverse=True)[:3]
        return ("over 5% of the elements left out of the weight comparison: " +
                ", ".join(f"{left_out[k]} of {reference[k].size} in {k}" for k in most)), seen
    if worst_weight > WEIGHT_TOLERANCE:
        return "the trained weights are not PyTorch's", seen
    return None, seen
