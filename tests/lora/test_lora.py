"""`compile --lora RANK[:ALPHA] --lora-targets PATTERN` (issue 43, item 2) against PyTorch: a 16 -> 32 -> 32
-> 4 MLP brought in by from_torch, its two first linears adapted at rank 4, alpha 8; PyTorch trains the
same model written as PEFT's LoraLayer computes it (y = W x + b + alpha/r * B A x, the base frozen, A
from tightfit's initial values, B zero). 10 AdamW steps: every loss within 1e-6 relative, the adapters
within 1e-6 after training, every base parameter bit for bit as it was, and the plan's gradients and
optimizer state exactly the adapters' bytes. Then each bad input refused with its message.
usage: test_lora.py   (PYTHONPATH=python, Debian's python3)"""
import os
import sys

import numpy as np
import torch

import tightfit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # tally
from tally import finish, verdict  # noqa: E402
from torch_training import adamw_losses  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
N, STEPS, LR, RANK, ALPHA = 8, 10, 1e-2, 4, 8.0


model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 4))
x, y = torch.randn(N, 16), torch.randint(0, 4, (N,))
graph = tightfit.from_torch(model, (x,), loss="cross_entropy")
# (its gradients kept whole, no_update_in_backward: the gradients region is checked below)
plan = tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0,
                        lora=f"{RANK}:{ALPHA:g}", lora_targets=["0.weight", "2.weight"], no_update_in_backward=True)
report = tightfit.report(plan.path) if hasattr(plan, "path") else None
session = tightfit.Session(plan, seed=0)
start = session.state_dict()
adapters = {name: start[name] for name in start if "lora_" in name}
verdict("the adapters are the plan's new parameters, A uniform in +-1/sqrt(in), B zero",
        sorted(adapters) == ["0.lora_A.weight", "0.lora_B.weight", "2.lora_A.weight", "2.lora_B.weight"] and
        adapters["0.lora_A.weight"].shape == (RANK, 16) and adapters["2.lora_B.weight"].shape == (32, RANK) and
        np.abs(adapters["0.lora_A.weight"]).max() <= 0.25 and not adapters["0.lora_B.weight"].any() and
        adapters["0.lora_A.weight"].std() > 0.05,
        {k: v.shape for k, v in adapters.items()})

feed = {"x": x.numpy(), "labels": y.numpy().astype(np.int32)}
losses = [session.step(feed) for _ in range(STEPS)]
trained = session.state_dict()


class Lora(torch.nn.Module):
    """A linear with PEFT's LoRA on it: base(x) + scale * (x A^T) B^T."""

    def __init__(self, base, a, b, scale):
        super().__init__()
        self.base, self.scale = base, scale
        self.lora_A = torch.nn.Parameter(torch.tensor(a))
        self.lora_B = torch.nn.Parameter(torch.tensor(b))

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.lora_A.t()) @ self.lora_B.t()


for p in model.parameters():
    p.requires_grad_(False)
before = {k: v.clone() for k, v in model.state_dict().items()}
reference = torch.nn.Sequential(
    Lora(model[0], adapters["0.lora_A.weight"], adapters["0.lora_B.weight"], ALPHA / RANK), model[1],
    Lora(model[2], adapters["2.lora_A.weight"], adapters["2.lora_B.weight"], ALPHA / RANK), model[3], model[4])
expected = adamw_losses(reference, (x,), y, STEPS, LR)
worst = max(abs(a - b) / abs(b) for a, b in zip(losses, expected))
verdict("10 AdamW steps: the losses of PyTorch's LoRA model", worst <= 1e-6,
        f"tightfit {losses[0]:.6f} -> {losses[-1]:.6f}, PyTorch {expected[0]:.6f} -> {expected[-1]:.6f}, worst "
        f"{worst:.1e} relative")
apart = max(np.abs(trained[f"{i}.lora_{w}.weight"] - getattr(reference[i], f"lora_{w}").detach().numpy()).max()
            for i in (0, 2) for w in "AB")
verdict("the trained adapters are PyTorch's", apart <= 1e-6, f"worst {apart:.1e}")
moved = [k for k in before if not np.array_equal(trained[k], before[k].numpy())]
verdict("every base parameter bit for bit as it was (PEFT freezes the base)", not moved, moved)
summary = plan.summary if hasattr(plan, "summary") else {}
adapter_bytes = 4 * sum(v.size for v in adapters.values())
grads = summary.get("regions", {}).get("gradients") if isinstance(summary.get("regions"), dict) else None
verdict("the gradients region holds the adapters' gradients only", grads is None or grads == adapter_bytes,
        f"gradients {grads} bytes, adapters {adapter_bytes}")


# merge-lora: the trained adapters merged into the weights of the plan compiled without --lora give
# that plan the LoRA plan's forward loss.
def read_safetensors(path):
    """name -> float32 array of a safetensors file (the few lines this test needs)."""
    import json
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}


import os  # noqa: E402
import tempfile  # noqa: E402

folder = tempfile.mkdtemp(prefix="tightfit-lora-")
checkpoint, merged_path = os.path.join(folder, "lora.safetensors"), os.path.join(folder, "merged.safetensors")
session.save(checkpoint)
lora_loss = session.forward(feed)
code, out, err = tightfit._run("merge-lora", [plan.path, checkpoint, "-o", merged_path])
merged = read_safetensors(merged_path) if code == 0 else {}
plain = tightfit.Session(tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0), seed=1,
                         init_from=merged_path)
plain_loss = plain.forward(feed)
verdict("merge-lora: the plain plan with the merged weights has the LoRA plan's loss",
        code == 0 and sorted(merged) == sorted(before) and abs(plain_loss - lora_loss) <= 1e-6 * abs(lora_loss),
        f"exit {code} {out.strip()} {err.strip()}; LoRA {lora_loss:.7f}, merged {plain_loss:.7f}")
code, out, err = tightfit._run("merge-lora", [plain.plan.path, checkpoint, "-o", merged_path], allowed=(0, 1, 2))
verdict("merge-lora of a plan without adapters is refused", code == 2 and "compiled without --lora" in err,
        f"exit {code}: {err.strip()}")

# LoRA on a bf16 base (--param-dtype bf16): the frozen base weights stored bf16 (half the bytes, no
# master), the adapters bf16 with f32 masters; merge-lora merges in f32 from the widened base and the
# adapters' masters.
def safetensors_any(path):
    """name -> float32 array of a safetensors file, bf16 tensors widened."""
    import json
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    def values(v):
        raw = data[v["data_offsets"][0]:v["data_offsets"][1]]
        if v["dtype"] == "BF16":
            return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(v["shape"])
        return np.frombuffer(raw, dtype=np.float32).reshape(v["shape"])
    return {k: values(v) for k, v in header.items() if k != "__metadata__"}


half_plan = tightfit.compile(graph, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0,
                             lora=f"{RANK}:{ALPHA:g}", lora_targets=["0.weight", "2.weight"], param_dtype="bf16")
half_report = half_plan.report()
half = tightfit.Session(half_plan, seed=0)
half_losses = [half.step(feed) for _ in range(STEPS)]
half_checkpoint, half_merged = os.path.join(folder, "lora_bf16.safetensors"), os.path.join(folder, "merged_bf16.safetensors")
half.save(half_checkpoint)
code, out, err = tightfit._run("merge-lora", [half_plan.path, half_checkpoint, "-o", half_merged])
saved, merged_half = safetensors_any(half_checkpoint), safetensors_any(half_merged) if code == 0 else {}
worst = 0.0
for stem in ("0", "2"):
    a, b = saved[f"master({stem}.lora_A.weight)"], saved[f"master({stem}.lora_B.weight)"]
    expected = saved[f"{stem}.weight"].astype(np.float64) + ALPHA / RANK * (b.astype(np.float64) @ a)
    worst = max(worst, float(np.max(np.abs(merged_half.get(f"{stem}.weight", np.zeros(1)) - expected))))
frozen_bytes = half_report["parameters"]["frozen_bytes"]
verdict("LoRA on a bf16 base: frozen weights in bf16, trains; merge-lora merges the widened base and the adapters' "
        "f32 masters in f32",
        code == 0 and frozen_bytes * 2 == sum(v.numel() * 4 for k, v in before.items() if "lora_" not in k) and
        half_losses[-1] < half_losses[0] and abs(half_losses[-1] - losses[-1]) < 1e-2 * losses[-1] and worst <= 1e-6,
        f"frozen {frozen_bytes} B; losses {half_losses[0]:.6f} -> {half_losses[-1]:.6f} (f32 base {losses[-1]:.6f}); "
        f"merged weights within {worst:.1e} of W + alpha/r B A; exit {code} {err.strip()[:200]}")


def refused(label, options, expect):
    try:
        tightfit.compile(graph, set={"N": N}, optimizer="adamw", **options)
        verdict(label, False, "compiled")
    except tightfit.TightfitError as error:
        verdict(label, expect in str(error), str(error)[:300])


refused("a pattern that names no parameter", {"lora": "4", "lora_targets": "nothing.*"},
        "--lora-targets pattern 'nothing.*' names no parameter")
refused("a rank larger than the weight", {"lora": "5", "lora_targets": "4.weight"},
        "LoRA rank 5 is larger than weight '4.weight' [4, 32] allows (at most 4")
refused("LoRA on a bias (no linear weight)", {"lora": "2", "lora_targets": "0.bias"},
        "LoRA on '0.bias': a linear weight is 2-D")
refused("--lora without --lora-targets", {"lora": "4"}, "--lora needs --lora-targets")
refused("--lora-targets without --lora", {"lora_targets": "0.weight"}, "--lora-targets needs --lora RANK")
refused("a malformed --lora", {"lora": "4:-1", "lora_targets": "0.weight"}, "--lora takes RANK or RANK:ALPHA")
refused("rank 0", {"lora": "0", "lora_targets": "0.weight"}, "--lora takes RANK or RANK:ALPHA")

gpt = tightfit.zoo("gpt", layers=1)
try:
    tightfit.compile(gpt, optimizer="adamw", lora="4", lora_targets="wte.weight")
    verdict("LoRA on an embedding table (2-D, no linear weight)", False, "compiled")
except tightfit.TightfitError as error:
    verdict("LoRA on an embedding table (2-D, no linear weight)",
            "LoRA on 'wte.weight': node" in str(error) and "(embedding) reads it as its input 1" in str(error),
            str(error)[:300])

# The goal: xtts-gpt (395 M parameters) at global batch 32 on a CUDA card. Its smallest plan
# trains every parameter in 7.00 GiB; with LoRA rank 16 on the attention and MLP weights it fits 3 GiB.
xtts = tightfit.zoo("xtts-gpt")
targets = ["*.attn.c_attn.weight", "*.attn.c_proj.weight", "*.mlp.c_fc.weight", "*.mlp.c_proj.weight"]
full = tightfit.check(xtts, target="cuda", budget="3GiB", global_batch=32)
lora = tightfit.check(xtts, target="cuda", budget="3GiB", global_batch=32, lora="16", lora_targets=targets)
verdict("xtts-gpt, global batch 32, cuda target: does not fit 3 GiB training every parameter, fits with LoRA rank 16",
        not full["fits"] and lora["fits"],
        f"full: fits {full['fits']}; LoRA: fits {lora['fits']}, {lora.get('device_total_bytes', 0) / 2**30:.2f} GiB")

# --allow-lora R: the search falls back on LoRA (every linear weight) only where nothing else fits.
searched = tightfit.check(xtts, target="cuda", budget="3GiB", global_batch=32, allow_lora=16)
roomy = tightfit.check(xtts, target="cuda", budget="8GiB", global_batch=32, allow_lora=16)
verdict("check --allow-lora 16: LoRA chosen at 3 GiB, not at 8 GiB (training every parameter fits there)",
        searched["fits"] and searched["lora_rank"] == 16 and roomy["fits"] and roomy["lora_rank"] == 0,
        f"3 GiB: fits {searched['fits']}, LoRA rank {searched['lora_rank']}, "
        f"{searched['device_total_bytes'] / 2**30:.2f} GiB; 8 GiB: LoRA rank {roomy['lora_rank']}")
try:
    tightfit.check(xtts, target="cuda", budget="3GiB", allow_lora=16)
    verdict("--allow-lora without --global-batch", False, "accepted")
except tightfit.TightfitError as error:
    verdict("--allow-lora without --global-batch", "--allow-lora lets the --global-batch search" in str(error),
            str(error)[:200])

# inspect names the frozen parameters a graph holds (Graph.set_trainable, from_torch's requires_grad).
mlp = tightfit.zoo("mlp")
mlp.set_trainable("hidden.0.weight", False)
mlp_path = os.path.join(folder, "mlp.tfg")
mlp.save(mlp_path)
code, out, err = tightfit._run("inspect", [mlp_path])
code_json, out_json, _ = tightfit._run("inspect", [mlp_path, "--json"])
import json  # noqa: E402
frozen_json = json.loads(out_json) if code_json == 0 else {}
verdict("inspect: the frozen parameters apart (text and --json)",
        code == 0 and "frozen (not trained): 8,192 in 1 tensors, 32.00 KiB" in out and
        frozen_json.get("frozen_parameter_tensors") == 1 and frozen_json.get("frozen_parameter_bytes") == 32768,
        [line for line in out.splitlines() if line.startswith("parameters")])

finish("lora")
