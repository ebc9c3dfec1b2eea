"""Frozen parameters through tightfit.from_torch (issue 43 item 1): a parameter whose requires_grad is
False is frozen in the imported graph, and training leaves it alone as PyTorch does.
- A 16 -> 32 -> 4 MLP with its first layer frozen: the plan holds gradients and AdamW state for the
  second layer only (528 and 1,056 bytes, where the whole MLP's are 2,704 and 5,408), the report
  splits trainable and frozen parameter bytes, 10 AdamW steps (weight decay 0.01) give PyTorch's
  losses within 1e-6, the frozen weights come back bit for bit, the trained ones within 1e-5 of
  PyTorch's (which trains only the parameters that require a gradient).
- A frozen encoder (two Linear + ReLU layers) under a trainable head: the backward pass stops at the
  head. No backward step belongs to an encoder node (tightfit dump of the plan: every backward step's
  name is grad/<forward node>/...), no backward step reads the encoder's weights or the model input,
  and the losses and weights match PyTorch's as above.
- A weight tied to two names (one Parameter used twice) frozen under either name: no warning, frozen;
  a frozen parameter the graph holds under none of its names is named in a warning.
usage: test_from_torch_frozen.py   (PYTHONPATH=python)"""
import copy
import json
import warnings

import numpy as np
import torch

import tightfit
from tally import finish, verdict
from torch_training import adamw_losses

print("library:", tightfit.library_path())
torch.set_num_threads(1)
BATCH, STEPS, LR, DECAY = 8, 10, 1e-2, 0.01


def check(ok, label, seen):
    verdict(label, ok, seen)


def dump(path):
    return json.loads(tightfit._run("dump", [path])[1])


def train_both(model, xs, ys):
    """Imports `model` (cross_entropy), trains STEPS AdamW steps in tightfit and in PyTorch from the same
    weights; returns (graph, plan, tightfit losses, PyTorch losses, weights before, tightfit's after,
    PyTorch's after)."""
    before = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    said = [str(w.message) for w in caught if "frozen" in str(w.message)]
    check(not said, "from_torch says nothing about the frozen parameters it found", said or "no warning")
    # (plans that keep their gradients whole, no_update_in_backward, so the gradients region is what is checked)
    plan = tightfit.compile(graph, set={"N": BATCH}, optimizer="adamw", lr=LR, weight_decay=DECAY, clip=0,
                            no_update_in_backward=True)
    session = tightfit.Session(plan, seed=0)
    feed = {"x": xs.numpy(), "labels": ys.numpy().astype(np.int32)}
    losses = [session.step(feed) for _ in range(STEPS)]
    trained = session.state_dict()
    reference = copy.deepcopy(model)
    expected = adamw_losses(reference, (xs,), ys, STEPS, LR, DECAY)
    after = {k: v.detach().numpy() for k, v in reference.state_dict().items()}
    return graph, plan, losses, expected, before, trained, after


def compare(label, model, losses, expected, before, trained, after):
    worst = max(abs(a - b) for a, b in zip(losses, expected))
    check(worst <= 1e-6, f"{label}: {STEPS} AdamW steps give PyTorch's losses",
          f"{losses[0]:.7f} -> {losses[-1]:.7f} (PyTorch {expected[0]:.7f} -> {expected[-1]:.7f}), worst "
          f"difference {worst:.1e}")
    frozen = [k for k, p in model.named_parameters() if not p.requires_grad]
    same = [k for k in frozen if k in trained and np.array_equal(trained[k], before[k])]
    check(frozen and same == frozen, f"{label}: the frozen weights come back bit for bit",
          f"{same} of {frozen}")
    moved = {k: float(np.max(np.abs(trained[k] - after[k]))) for k, p in model.named_parameters()
             if p.requires_grad and k in trained}
    changed = all(not np.array_equal(trained[k], before[k]) for k in moved)
    check(moved and changed and max(moved.values()) <= 1e-5, f"{label}: the trained weights are PyTorch's",
          ", ".join(f"{k} {v:.1e}" for k, v in moved.items()))


# ---- the case: the first layer of a 16 -> 32 -> 4 MLP frozen ----
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
for p in mlp[0].parameters():
    p.requires_grad_(False)
xs, ys = torch.randn(BATCH, 16), torch.randint(0, 4, (BATCH,))
graph, plan, losses, expected, before, trained, after = train_both(mlp, xs, ys)
check(not graph.is_trainable("0.weight") and not graph.is_trainable("0.bias") and graph.is_trainable("2.weight"),
      "the graph marks 0.weight and 0.bias frozen, 2.weight trainable", "Graph.is_trainable")
report = plan.report()
roles, split = report["roles"], report.get("parameters", {})
seen = (f"gradients {roles['gradient']['bytes']} bytes in {roles['gradient']['buffers']} buffers, optimizer state "
        f"{roles['optimizer_state']['bytes']}, parameters {split}")
check(roles["gradient"]["bytes"] == 4 * (32 * 4 + 4) and roles["gradient"]["buffers"] == 2 and
      roles["optimizer_state"]["bytes"] == 2 * 4 * (32 * 4 + 4),
      "gradients and AdamW state for the second layer only (528 and 1,056 bytes)", seen)
check(split == {"trainable_bytes": 528, "trainable_buffers": 2, "frozen_bytes": 4 * (16 * 32 + 32),
                "frozen_buffers": 2}, "report --json splits trainable and frozen parameters", split)
compare("MLP, first layer frozen", mlp, losses, expected, before, trained, after)
# the same module fully trainable: the 2,704 bytes of gradients (2,752 with alignment) come back
free = copy.deepcopy(mlp)
for p in free.parameters():
    p.requires_grad_(True)
free_report = tightfit.compile(tightfit.from_torch(free, (xs,), loss="cross_entropy"), set={"N": BATCH},
                               optimizer="adamw", no_update_in_backward=True).report()
check(free_report["roles"]["gradient"]["bytes"] == 2704 and free_report["regions"]["gradients"] == 2752,
      "the same MLP fully trainable plans 2,704 bytes of gradients (region 2,752)",
      f"{free_report['roles']['gradient']['bytes']} (region {free_report['regions']['gradients']})")
# compile(freeze=...) freezes the same layer of the trainable graph: the same bytes
by_pattern = tightfit.compile(tightfit.from_torch(free, (xs,), loss="cross_entropy"), set={"N": BATCH},
                              optimizer="adamw", freeze=["0.*"], no_update_in_backward=True).report()
check(by_pattern["roles"]["gradient"]["bytes"] == 528 and by_pattern["parameters"]["frozen_bytes"] == 2176,
      "compile(freeze=['0.*']) plans as requires_grad=False does", by_pattern["parameters"])
only = tightfit.check(tightfit.from_torch(free, (xs,), loss="cross_entropy"), budget="1MiB", target="cpu",
                      set={"N": BATCH}, optimizer="adamw", train_only="2.*", no_update_in_backward=True)
check(only["regions"]["gradients"] == by_pattern["regions"]["gradients"],
      "check(train_only='2.*') sees the same gradients region", only["regions"])
try:
    tightfit.compile(tightfit.from_torch(free, (xs,), loss="cross_entropy"), set={"N": BATCH}, freeze=["enc*"])
    check(False, "compile(freeze=['enc*']) is refused", "it compiled")
except tightfit.TightfitError as error:
    check("freeze pattern 'enc*' names no parameter" in error.message and "'0.weight'" in error.message,
          "compile(freeze=['enc*']) is refused naming the pattern and the parameters", error.message.strip())

# ---- a frozen encoder under a trainable head: the backward pass stops at the head ----
torch.manual_seed(1)
encoder = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU())
model = torch.nn.Sequential(encoder, torch.nn.Linear(32, 4))
encoder.requires_grad_(False)
graph, plan, losses, expected, before, trained, after = train_both(model, xs, ys)
graph_nodes = dump(graph._file())
tensors = [t["name"] for t in graph_nodes["tensors"]]
encoder_weights = {"0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias"}
# an encoder node: one that reads an encoder weight, or reads what one wrote (the ReLUs, reshapes)
encoder_nodes, written = set(), set(encoder_weights)
for node in graph_nodes["nodes"]:
    if any(tensors[i] in written for i in node.get("inputs", [])) and not any(
            tensors[i] == "1.weight" for i in node.get("inputs", [])):
        encoder_nodes.add(node["name"])
        written.update(tensors[o] for o in node["outputs"])
plan_file = dump(plan.path)
buffers = [b["name"] for b in plan_file["buffers"]]
backward = [s for s in plan_file["steps"] if s.get("phase") == "backward"]
into_encoder = [s["name"] for s in backward if any(s["name"].startswith(f"grad/{n}/") for n in encoder_nodes)]
reads = sorted({buffers[i] for s in backward for i in s.get("inputs", []) if buffers[i] in encoder_weights | {"x"}})
check(encoder_nodes and backward and not into_encoder and not reads,
      "the frozen encoder gets no backward step, and no backward step reads its weights or the input",
      f"{len(encoder_nodes)} encoder nodes, {len(backward)} backward steps ({', '.join(s['name'] for s in backward)}); "
      f"into the encoder: {into_encoder}; reading its weights or x: {reads}")
split = plan.report()["parameters"]
check(split["trainable_bytes"] == 4 * (32 * 4 + 4) and split["frozen_bytes"] == 4 * (16 * 32 + 32 + 32 * 32 + 32),
      "report: the head trainable, the encoder frozen", split)
compare("frozen encoder, trainable head", model, losses, expected, before, trained, after)


# ---- a tied weight: one Parameter under two names, frozen ----
class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.b.weight = self.a.weight  # tied: one tensor, two state_dict names
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.relu(self.b(torch.relu(self.a(x)))))


torch.manual_seed(2)
tied = Tied()
tied.a.weight.requires_grad_(False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tied_graph = tightfit.from_torch(tied, (xs,), loss="cross_entropy")
said = [str(w.message) for w in caught if "frozen" in str(w.message)]
names = [t["name"] for t in dump(tied_graph._file())["tensors"] if t.get("kind") == "parameter"]
frozen_names = [n for n in names if not tied_graph.is_trainable(n)]
check(frozen_names in (["a.weight"], ["b.weight"]) and not said,
      "a tied weight is frozen under the name the export gave it, without a warning",
      f"parameters {names}, frozen {frozen_names}, warnings {said}")

# a frozen parameter the graph holds under no name of the module (an export that renamed it) is warned about
renamed = torch.nn.Linear(16, 4)
renamed.requires_grad_(False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tightfit._from_torch._freeze_as_torch(torch, renamed, tied_graph)
said = [str(w.message) for w in caught]
check(len(said) == 1 and "parameters weight, bias are not in the imported graph" in said[0] and
      "compile(freeze=[...])" in said[0], "a frozen parameter the graph lacks is named in a warning", said)

finish("from_torch_frozen")
