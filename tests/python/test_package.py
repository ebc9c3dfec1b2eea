"""The Python package (python/tightfit, issue 17): build, check and train `mlp` from Python.

- a graph built with the Python builder and the public layer helpers equals the zoo's mlp (plan
  bytes), and `check` returns the fields of `tightfit check --json`, the report those of
  `tightfit report --json`;
- 10 training steps from numpy arrays: the loss falls, and every step's loss equals what the CLI
  prints for the same plan, seed and data (`tightfit train --json`);
- bad inputs raise TightfitError carrying the library's message.
usage: test_package.py TIGHTFIT-CLI   (run from the repository root, PYTHONPATH=python)"""
import gc
import json
import os
import subprocess
import sys
import tempfile

import warnings

import numpy as np

import tightfit
from tally import finish, ok

cli = sys.argv[1]


def raises(what, needle, function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except tightfit.TightfitError as error:
        ok(needle in str(error), f"{what} raises TightfitError: {error}", f"(expected '{needle}' in the message)")
        return
    except Exception as error:  # noqa: BLE001  (the wrong kind of error is a failure, shown)
        ok(False, what, f"raised {type(error).__name__}: {error}")
        return
    ok(False, what, "did not raise")


print("library:", tightfit.library_path())
work = tempfile.mkdtemp()

# ---- build: the Python builder with the layer helpers gives the zoo's mlp ----
g = tightfit.Graph("mlp")
n = g.symbol("N", 8)
x = g.input("x", [n, 64])
labels = g.label("labels", [n], dtype="i32")
h = x
for i, (d_in, d_out) in enumerate([(64, 128), (128, 128)]):
    h = g.relu(g.linear(h, d_in, d_out, f"hidden.{i}"))
logits = g.linear(h, 128, 10, "head")
g.scope("loss")
g.finish(logits, g.cross_entropy(logits, labels), optimizer="sgd")
built = tightfit.compile(g, set={"N": 32})
zoo = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32})
# mlp at N=32: 380,736 bytes as the compiler's plain choices; by default its updates run in the
# backward pass (every gradient an arena temporary: no gradients region), 324,096 bytes
PLAIN_MLP, DEFAULT_MLP = 380736, 324096
ok(built.total_bytes == zoo.total_bytes == DEFAULT_MLP,
   f"the Python-built mlp plans {built.total_bytes} bytes, the zoo's {zoo.total_bytes}")
plain_plan = tightfit.compile(g, set={"N": 32}, no_smallest=True)
ok(plain_plan.total_bytes == PLAIN_MLP and plain_plan.report()["regions"]["gradients"] > 0,
   f"no_smallest=True: the plain plan, {plain_plan.total_bytes} bytes with its gradients region")
ok(built.inputs == {"x": ("f32", (32, 64)), "labels": ("i32", (32,))}, f"plan inputs {built.inputs}")
ok((built.micro_batch, built.accumulate) == (32, 1), "micro-batch 32 x 1")

# ---- check and report: the CLI's JSON fields ----
graph_path = os.path.join(work, "mlp.tfg")
subprocess.run([cli, "zoo", "mlp", "-o", graph_path], check=True, capture_output=True)
result = tightfit.check(g, budget="1MiB", set={"N": 32})
expected = json.loads(subprocess.run([cli, "check", graph_path, "--budget", "1MiB", "--set", "N=32", "--json"],
                                     capture_output=True, text=True).stdout)
ok(set(expected) <= set(result) and result["fits"] is True and result["exit_code"] == 0,
   f"check: fits, and every field of check --json ({len(expected)}) is there")
ok(result["categories"] == expected["categories"] and result["regions"] == expected["regions"],
   f"check: categories equal the CLI's {result['categories']}")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    small = tightfit.check(tightfit.zoo("mlp"), budget="100KiB", set={"N": 32})
ok(any("assuming the cpu target" in str(w.message) for w in caught),
   "check without a target: the CLI's warning comes as a Python warning")
ok(small["fits"] is False and small["exit_code"] == 1 and small["shortfall_bytes"] == DEFAULT_MLP - 100 * 1024,
   f"check: a budget too small is a result (fits False, shortfall {small['shortfall_bytes']})")
ok(tightfit.check(g, gpu="t4", set={"N": 32}, remat="checkpoints", precision="bf16")["remat"] == "checkpoints",
   "check: --gpu, --remat and --precision options pass through")
listed = tightfit.devices()
ok(listed[0]["device"] == "cpu:0" and listed[0]["available"] and
   all(("description" in e) == e["available"] and ("why" in e) != e["available"] for e in listed),
   f"devices: {[(e['backend'], e['available']) for e in listed]}, each with its description or why")
report = zoo.report()
ok(report["total_bytes"] == DEFAULT_MLP and report["micro_batch"] == 32 and "peak" in report,
   f"report: total {report['total_bytes']}, peak step {report['peak']['step']}")

# ---- train 10 steps from numpy arrays: the loss falls and equals the CLI's ----
data = "models/data/digits/train"
xs, ys = np.load(f"{data}/x.npy"), np.load(f"{data}/labels.npy")
session = tightfit.Session(zoo, seed=0)
losses = session.train({"x": xs, "labels": ys}, steps=10)
ok(len(losses) == 10 and losses[-1] < losses[0], f"10 steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}")
plan_path = os.path.join(work, "mlp.tfplan")
zoo.save(plan_path)
out = subprocess.run([cli, "train", plan_path, "--data", data, "--steps", "10", "--seed", "0", "--log-every", "1",
                      "--json"], capture_output=True, text=True, check=True).stdout
cli_losses = [json.loads(line)["loss"] for line in out.splitlines() if line.startswith('{"step"')]
ok(len(cli_losses) == 10 and all(abs(a - b) < 1e-6 for a, b in zip(losses, cli_losses)),
   f"every step's loss equals the CLI's (last: Python {losses[-1]:.6f}, CLI {cli_losses[-1]:.6f})",
   f"{losses} vs {cli_losses}")
# The session's own counters, as the binding returns them: equal to what `tightfit train --json` reports
# for the same plan. (Whether the runtime really allocates nothing more is measured from outside it,
# by the allocation probe: tests/alloc_probe, alloc_probe_train_cli.)
memory = session.memory()
cli_memory = [json.loads(line) for line in out.splitlines() if line.startswith('{"steps"')][-1]
ok(all(memory[k] == cli_memory[k] for k in ("planned_bytes", "allocated_bytes", "allocations_after_create")),
   f"session memory {memory} as the CLI reports it", f"CLI: {cli_memory}")
before = session.forward({"x": xs[:32], "labels": ys[:32]})
step_loss = session.step({"x": xs[:32], "labels": ys[:32]})
ok(abs(step_loss - before) < 1e-5 and session.steps == 11, f"step() on one batch: loss {step_loss:.6f}, 11 steps")

# ---- fp16: the loss scale and skipped steps, as `tightfit train` has them ----
half = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32}, precision="fp16", loss_scale=1024)
scaled = tightfit.Session(half, seed=0, loss_scale_window=4)
scaled_losses = scaled.train({"x": xs, "labels": ys}, steps=9)
ok(scaled.scaling == {"scaled": True, "loss_scale": 4096.0, "skipped_steps": 0, "last_skipped": False,
                      "good_steps": 1}, f"fp16: 9 good steps with a window of 4 double 1024 twice: {scaled.scaling}")
big = {"x": xs[:32] * 1e7 + 1e7, "labels": ys[:32]}
before_skip = scaled.read("hidden.0.weight", shape=(64, 128))
scaled.step(big)
ok(scaled.scaling["last_skipped"] and scaled.scaling["loss_scale"] == 2048.0 and
   (scaled.read("hidden.0.weight", shape=(64, 128)) == before_skip).all(),
   f"fp16: an overflowing batch skips the update (weights unchanged) and halves the scale: {scaled.scaling}")
ok(tightfit.Session(zoo).scaling["scaled"] is False, "an f32 plan does not scale its loss")
kept = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32}, precision="bf16",
                        precision_override={"hidden.0/relu": "f32", "hidden.1/relu": "f32"})
notes = kept.report()["notes"]
ok("node overrides applied on 2 nodes" in str(notes) and "kept 2 f32" in str(notes),
   "precision_override={node: 'f32'} reaches compile: the plan keeps those two nodes f32 under bf16")

# ---- a graph on bf16 data: cast, an input fed and read back in bf16, the loss as numpy computes it ----
hg = tightfit.Graph("half")
hx = hg.input("x", [4, 8], dtype="bf16")
hw = hg.parameter("w", [8, 3], init="normal", dtype="f32")
hy = hg.cast(hg.matmul(hx, hg.cast(hw, "bf16")), "f32")
hg.finish(hy, hg.reduce("sum", hg.mul(hy, hy), [0, 1]))
half_plan = tightfit.compile(hg)
hs = tightfit.Session(half_plan, seed=2)
x_values = np.linspace(-2.0, 2.0, 32, dtype=np.float32).reshape(4, 8) + np.float32(1e-3)
half_loss = hs.forward({"x": x_values})
x_back = hs.read("x")
w_values = hs.read("w", shape=(8, 3))
bf16 = lambda a: (tightfit._to_bf16_bits(a).astype(np.uint32) << 16).view(np.float32)  # noqa: E731
y_expected = bf16(bf16(x_values).astype(np.float64) @ bf16(w_values).astype(np.float64))
expected_loss = float((y_expected.astype(np.float64) ** 2).sum())
ok(x_back.dtype == np.float32 and (x_back == bf16(x_values)).all(),
   "a bf16 input is fed rounded to nearest even and read back as float32")
ok(abs(half_loss - expected_loss) <= 4 / 256 * float((y_expected.astype(np.float64) ** 2).sum()) + 1e-6 and
   "run the target's half kernels" in str(half_plan.report()["notes"]),
   f"Graph.cast: a matmul on bf16 data runs on the CPU's half kernels, loss {half_loss:.6g} vs numpy's "
   f"{expected_loss:.6g}")
cast_plan = tightfit.compile(hg, no_half_kernels=True)
cast_loss = tightfit.Session(cast_plan, seed=2).forward({"x": x_values})
ok(cast_loss == half_loss and "computed in f32 between casts" in str(cast_plan.report()["notes"]),
   f"no_half_kernels=True: the matmul between casts, the same loss bit for bit ({cast_loss:.9g})")

# ---- Graph.abs and an L1 loss, mean |x w - t|: the loss and the weight's gradient step as numpy's ----
lg = tightfit.Graph("l1")
lx, lt = lg.input("x", [4, 5]), lg.input("t", [4, 3])
lw = lg.parameter("w", [5, 3], init="normal")
ly = lg.matmul(lx, lw)
lg.finish(ly, lg.reduce("mean", lg.abs(lg.sub(ly, lt)), [0, 1]))
ls = tightfit.Session(tightfit.compile(lg, optimizer="sgd", lr=0.5), seed=4)
l_x, l_t = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5), np.linspace(1, -1, 12, dtype=np.float32).reshape(4, 3)
l_w = ls.read("w", shape=(5, 3)).astype(np.float64)
l_r = l_x.astype(np.float64) @ l_w - l_t
l_loss = ls.step({"x": l_x, "t": l_t})
l_w_expected = l_w - 0.5 * (l_x.T.astype(np.float64) @ (np.sign(l_r) / l_r.size))
ok(abs(l_loss - np.abs(l_r).mean()) < 1e-6 and np.abs(ls.read("w", shape=(5, 3)) - l_w_expected).max() < 1e-6,
   f"Graph.abs: an L1 loss {l_loss:.6f} (numpy {np.abs(l_r).mean():.6f}) and one SGD step as numpy's")

# ---- stop_gradient: loss = mean(y * stop_gradient(y)), y = x w: dw = x^T y / n, not 2 x^T y / n ----
sg = tightfit.Graph("detached")
sx = sg.input("x", [4, 5])
sy = sg.matmul(sx, sg.parameter("w", [5, 3], init="normal"))
sg.finish(sy, sg.reduce("mean", sg.mul(sy, sg.stop_gradient(sy)), [0, 1]))
ss = tightfit.Session(tightfit.compile(sg, optimizer="sgd", lr=0.5), seed=4)
s_w = ss.read("w", shape=(5, 3)).astype(np.float64)
s_y = l_x.astype(np.float64) @ s_w
ss.step({"x": l_x})
s_expected = s_w - 0.5 * (l_x.T.astype(np.float64) @ (s_y / s_y.size))
ok(np.abs(ss.read("w", shape=(5, 3)) - s_expected).max() < 1e-6,
   "Graph.stop_gradient: one SGD step of mean(y * stop_gradient(y)) as numpy's, the gradient through one factor")

# ---- matmul_math: stored in the plan and reported; an unknown value raises ----
half = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32}, matmul_math="bf16")
ok(half.report()["matmul_math"] == "bf16" and kept.report()["matmul_math"] == "f32",
   "matmul_math='bf16' reaches compile and the plan's report says bf16 (f32 by default)")
raises("matmul_math='fp8'", "unknown matmul math 'fp8'", tightfit.compile, tightfit.zoo("mlp"), set={"N": 32},
       matmul_math="fp8")

# ---- updates in the backward pass: the same weights as the plain plan, a smaller gradients region ----
plain = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32}, optimizer="adamw")
moved = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32}, optimizer="adamw", update_in_backward=True)
runs = [tightfit.Session(p, seed=3) for p in (plain, moved)]
for run in runs:
    run.train({"x": xs, "labels": ys}, steps=3)
same = all((runs[0].read(n, shape=s) == runs[1].read(n, shape=s)).all()
           for n, s in (("hidden.0.weight", (64, 128)), ("head.bias", (10,))))
ok(same and "each update in the backward pass" in str(moved.report()["notes"]),
   "update_in_backward=True reaches compile and trains the same weights as the plain plan")
# ---- 8-bit AdamW from the builder and as a keyword: about a quarter of AdamW's optimizer state ----
eight = tightfit.Graph("mlp8")
e_n = eight.symbol("N", 8)
e_x, e_y = eight.input("x", [e_n, 64]), eight.label("labels", [e_n], dtype="i32")
e_logits = eight.linear(eight.relu(eight.linear(e_x, 64, 128, "hidden.0")), 128, 10, "head")
eight.finish(e_logits, eight.cross_entropy(e_logits, e_y), optimizer="adamw8bit", learning_rate=1e-3)
def optimizer_state(graph, **kw):
    return tightfit.compile(graph, set={"N": 32}, **kw).report()["regions"]["optimizer_state"]


ratios = (optimizer_state(eight) / optimizer_state(eight, optimizer="adamw"),
          optimizer_state(tightfit.zoo("mlp"), optimizer="adamw8bit") /
          optimizer_state(tightfit.zoo("mlp"), optimizer="adamw"))
ok(all(0.24 < r < 0.27 for r in ratios),
   f"finish(optimizer='adamw8bit') and optimizer='adamw8bit' plan 8-bit state: {ratios[0]:.4f} and {ratios[1]:.4f} "
   "of AdamW's")
raises("finish with an unknown optimizer", "'adamw8bit'", eight.finish, e_logits, eight.cross_entropy(e_logits, e_y),
       optimizer="lion")
raises("update_in_backward with accumulation", "it accumulates micro-batches", tightfit.compile,
       tightfit.zoo("mlp"), set={"N": 32}, accumulate=2, update_in_backward=True)

# ---- bad inputs raise with the library's message ----
raises("load of a missing file", "nope.tfg", tightfit.load, os.path.join(work, "nope.tfg"))
raises("an unknown zoo preset", "nosuch", tightfit.zoo, "nosuch")
raises("an unknown zoo knob", "wings", tightfit.zoo, "mlp", wings=3)
raises("check without a budget", "missing --budget", tightfit.check, g)
raises("an unknown compile option", "unknown option '--warp'", tightfit.compile, g, warp=9)
raises("compile with a budget the plan misses", f"does not fit: device total {DEFAULT_MLP} bytes, budget 102400",
       tightfit.compile, g, set={"N": 32}, budget="100KiB")
raises("a bad symbol binding", "N", tightfit.compile, g, set={"N": 0})
raises("a batch of the wrong size", "x", session.write, "x", xs[:5])
raises("a name that is not an input", "not an input or label", session.write, "weights", xs[:5])
raises("a shape mismatch in the builder", "matmul", g.matmul, x, labels)
raises("an undeclared symbol", "unknown symbol 'T'", g.input, "tokens", ["T"])
leaky = tightfit.Graph("leaky")
raises("leaky_relu with a NaN slope", "slope alpha nan", leaky.leaky_relu, leaky.input("x", [4]), float("nan"))
clip = tightfit.Graph("clip")
raises("clip with a NaN bound", "must be finite", clip.clip, clip.input("x", [4]), 0.0, float("nan"))
bn = tightfit.Graph("bn")
raises("batch_norm without a channel axis", "batch_norm needs [N, C, ...]", bn.batch_norm, bn.input("v", [4]),
       bn.parameter("g", [4], "ones"), bn.parameter("b", [4]))
bad = {"x": xs, "labels": np.full(len(ys), 99, dtype=np.int32)}
raises("labels past the class count", "labels", tightfit.Session(zoo).train, bad, 1)
raises("a folder without data", "x.npy", tightfit.Session(zoo).train, work, 1)
raises("a session on a device that is not there", "nosuch", tightfit.Session, zoo, device="nosuch:0")


def work_folders():
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("tightfit-")}


fresh = tightfit.zoo("mlp")
before = work_folders()
for bad_options, needle in (({"warp": 9}, "--warp"), ({"set": {"N": 0}}, "N"), ({"matmul_math": "fp8"}, "fp8")):
    raises(f"compile with {bad_options}", needle, tightfit.compile, fresh, **bad_options)
del fresh  # its own folder (the .tfg the compiles read) goes with it
gc.collect()
left = work_folders() - before
ok(not left, "a compile that fails leaves no temporary folder behind", f"left: {sorted(left)}")

finish("python package")
