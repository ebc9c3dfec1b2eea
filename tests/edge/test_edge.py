#!/usr/bin/python3
"""bench/edge/run's parts that decide, checked without a GPU: the verdict (every way a run fails),
the ballast's walk down to the budget on a simulated free counter, the per-pid reading of
nvidia-smi's rows, the .npy writer against NumPy, scripts/gpu-verify's memory check (by pid, against
the plan for the device, within 3% either way), a --dry-run that compiles three scenarios
(a seed scenario's answer within its budget, a recompute-auto plan between its bounds, an imported
model when torch is there), and that the dry run compiles with the very command lines the real run
does (its GPU parts stubbed), the cpu reference's included. usage: test_edge.py TIGHTFIT WORK"""
import importlib.machinery
import importlib.util
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(ROOT, "bench", "edge", "run")
loader = importlib.machinery.SourceFileLoader("edge_run", HARNESS)
spec = importlib.util.spec_from_loader("edge_run", loader)
edge = importlib.util.module_from_spec(spec)
loader.exec_module(edge)
MIB = edge.MIB

failures = []


def check(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def good_run(**changes):
    run = {"exit": 0, "steps": 3, "losses": [4.0, 3.5, 3.0], "planned_bytes": 1000 * MIB, "budget_bytes": 1010 * MIB,
           "pid_peak_bytes": 980 * MIB, "device_peak_bytes": 990 * MIB, "reference": "cpu",
           "reference_losses": [4.0, 3.5000001, 3.0], "loss_tolerance": 1e-3}
    run.update(changes)
    return run


def expect(label, run, status, wanted=""):
    got, reasons = edge.judge(run, 0.03)
    ok = got == status and (not wanted or any(wanted in r for r in reasons))
    check(ok, "%s: %s %s" % (label, got, "; ".join(reasons)))


def test_judge():
    expect("a good run", good_run(), "PASS")
    expect("device counter over the plan", good_run(device_peak_bytes=1001 * MIB), "FAIL", "over the planned")
    expect("process peak over the plan", good_run(pid_peak_bytes=1000 * MIB + 1, device_peak_bytes=None), "FAIL",
           "nvidia-smi process peak")
    expect("only the device counter", good_run(pid_peak_bytes=None), "PASS")
    expect("nothing measured", good_run(pid_peak_bytes=None, device_peak_bytes=None), "FAIL", "nothing was measured")
    expect("slack past 3% of the budget", good_run(pid_peak_bytes=None, device_peak_bytes=960 * MIB), "FAIL",
           "more than 3.0%")
    expect("slack just within 3%", good_run(pid_peak_bytes=None, device_peak_bytes=int(1000 * MIB - 0.0299 * 1010 * MIB)),
           "PASS")
    expect("the trainer failed", good_run(exit=1), "FAIL", "exited 1")
    expect("out of memory", good_run(out_of_memory="cuda: out of memory"), "FAIL", "out of memory")
    expect("fewer steps", good_run(losses=[4.0, 3.5]), "FAIL", "trained 2 of 3")
    expect("a nan loss", good_run(losses=[4.0, float("nan"), 3.0], reference_losses=None, reference=None), "FAIL",
           "not finite")
    expect("losses off the reference", good_run(reference_losses=[4.0, 3.51, 3.0]), "FAIL", "step 2")
    expect("within a looser tolerance", good_run(reference_losses=[4.0, 3.51, 3.0], loss_tolerance=2e-2), "PASS")
    expect("no reference losses", good_run(reference_losses=None), "FAIL", "no cpu reference")
    expect("a shorter reference", good_run(reference_losses=[4.0]), "FAIL", "reference trained 1")
    expect("a plan over its budget", good_run(planned_bytes=1020 * MIB, pid_peak_bytes=None, device_peak_bytes=1015 * MIB),
           "FAIL", "over its budget")
    expect("no reference asked", good_run(reference=None, reference_losses=None), "PASS")
    expect("another card's plan: this card's larger context taken off",
           good_run(device_peak_bytes=1190 * MIB, pid_peak_bytes=None, context_adjust_bytes=200 * MIB), "PASS")
    expect("... and over the plan without it", good_run(device_peak_bytes=1190 * MIB, pid_peak_bytes=None), "FAIL",
           "over the planned")
    expect("a seed scenario's first steps against the cpu", good_run(reference_losses=[4.0], reference_steps=1), "PASS")
    expect("... and off", good_run(reference_losses=[4.1], reference_steps=1), "FAIL", "step 1")
    expect("the same steps skipped by an overflow", good_run(skipped_steps=[1, 2], reference_skipped_steps=[1, 2],
                                                             expect_skips=True), "PASS")
    expect("other steps skipped than on the cpu", good_run(skipped_steps=[1], reference_skipped_steps=[1, 2]), "FAIL",
           "the cpu backend's [1, 2]")
    expect("an injected overflow that did not happen", good_run(skipped_steps=[], expect_skips=True), "FAIL",
           "did not happen")


class FakeCuda:
    """A device with `free` bytes that hands out 2 MiB pages and refuses allocations above `largest`."""

    def __init__(self, free, largest=1 << 62):
        self.free_bytes, self.largest, self.live = free, largest, {}

    def mem_info(self):
        return self.free_bytes, 1 << 40

    def alloc(self, size):
        pages = -(-size // edge.GRAIN) * edge.GRAIN
        if size > self.largest or pages > self.free_bytes:
            return None
        self.free_bytes -= pages
        pointer = len(self.live) + 1
        self.live[pointer] = pages
        return pointer

    def free(self, pointer):
        self.free_bytes += self.live.pop(pointer)


def test_ballast():
    for free, target, largest in ((140 * 2**30 + 3 * MIB + 12345, 16 * 2**30, 1 << 62),
                                  (20 * 2**30, 14909 * MIB + 401, 300 * MIB),
                                  (2 * 2**30, 2 * 2**30, 1 << 62)):
        cuda = FakeCuda(free, largest)
        allocations, left = edge.leave_free(cuda, target)
        ok = target <= left < target + edge.GRAIN and left == cuda.free_bytes
        check(ok, "ballast from %d to %d bytes free (largest allocation %d): %d left in %d allocations" % (
            free, target, largest, left, len(allocations)))
        for pointer in allocations:
            cuda.free(pointer)
        check(cuda.free_bytes == free, "the ballast's allocations all freed")
    try:
        edge.leave_free(FakeCuda(1 * 2**30), 2 * 2**30)
        check(False, "a budget above the free memory is refused")
    except edge.EdgeError as e:
        check("less than the budget" in str(e), "a budget above the free memory is refused: %s" % e)


def test_smi(work):
    path = os.path.join(work, "apps.csv")
    with open(path, "w") as f:
        f.write("4242, 1500\n77, 9000\n4242, 1720\n[N/A], 3\n4242, [N/A]\n")
    check(edge.smi_apps(path, 4242) == 1720 * MIB, "nvidia-smi rows: the peak of pid 4242 only (1720 MiB)")
    check(edge.smi_apps(path, 5) is None, "nvidia-smi rows: none for a pid not listed")
    check(edge.smi_apps(os.path.join(work, "missing.csv"), 4242) is None, "nvidia-smi rows: no file, no peak")


def test_npy(work):
    try:
        import numpy
    except ImportError:
        print("note: no numpy: the .npy writer is checked by the dry run's tightfit reads only")
        return
    for kind, dtype, shape, high in (("f", "<f4", [3, 5, 7], 0), ("i", "<i4", [11], 9), ("i", "<i4", [2, 1, 4], 3)):
        count = math.prod(shape)
        data = edge.synthdata.array_bytes(kind, count, high, 1)
        path = os.path.join(work, "a.npy")
        edge.synthdata.write_npy(path, dtype, shape, data)
        array = numpy.load(path)
        ok = list(array.shape) == shape and array.dtype == numpy.dtype(dtype) and array.tobytes() == data
        if kind == "i":
            ok = ok and array.min() >= 0 and array.max() < high
        check(ok, ".npy %s %s: numpy reads it back" % (dtype, shape))


def test_dry_run(tf, work):
    out = os.path.join(work, "dry")
    names = "xtts-gpt-8g,gpt-remat-auto,imported-mlp"
    done = subprocess.run([sys.executable, HARNESS, out, "--tightfit", tf, "--dry-run", "--only", names],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="")
    check(done.returncode == 77, "--dry-run exits 77 (compiled, nothing trained): exit %d" % done.returncode)
    records = {r["name"]: r for r in map(json.loads, open(os.path.join(out, "edge.jsonl")))}
    x = records.get("xtts-gpt-8g", {})
    check(x.get("budget_bytes") == 8 * 2**30 and 0.9 * x["budget_bytes"] < x.get("planned_bytes", 0) <= x["budget_bytes"],
          "xtts-gpt at 8 GiB: the search's answer within 90-100% of the budget")
    a = records.get("gpt-remat-auto", {})
    check(a.get("planned_bytes", 1 << 62) <= a.get("budget_bytes", 0), "recompute auto: the plan within its budget")
    m = records.get("imported-mlp", {})
    check(m.get("status") == "SKIP" or "torch" in " ".join(m.get("reasons", [])).lower(),
          "the imported model compiled (or torch is missing): %s" % m.get("reasons"))
    data = os.path.join(out, "xtts-gpt-8g", "data")
    check(sorted(os.listdir(data)) == ["audio_codes.npy", "audio_labels.npy", "text_labels.npy", "text_tokens.npy"],
          "xtts-gpt's data: one .npy per input and label")


def compile_lines(tf, out, name, dry_run):
    """The compile command lines scenario `name` runs (out's path as OUT), its record and a problem or
    None. The real run's GPU parts are stubbed: the confined training returns nothing measured, each
    `train` (the cpu reference's) prints two steps, and `--device cuda:N` compiles as `--target cuda`
    (no GPU here), which is how the dry run spells it."""
    lines, original, confined = [], edge.run_tool, edge.train_confined

    def recording_run_tool(command, log=None, check=True):
        if command[1] == "train":
            return '{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 0.9}\n'
        if "--device" in command:
            i = command.index("--device")
            command = command[:i] + ["--target", "cuda"] + command[i + 2:]
        if command[1] == "compile":
            lines.append(" ".join(command).replace(out, "OUT"))
        return original(command, log, check)

    edge.run_tool = recording_run_tool
    edge.train_confined = lambda *a, **k: {"exit": 0, "losses": [1.0, 0.9]}
    try:
        args = edge.parse_args([out, "--tightfit", tf, "--only", name, "--steps", "2"] + (["--dry-run"] if dry_run else []))
        scenario = [s for s in edge.SCENARIOS if s.name == name][0]
        record = edge.run_scenario(tf, None, scenario, args)
    finally:
        edge.run_tool, edge.train_confined = original, confined
    return lines, record


def test_dry_run_compiles_as_the_run(tf, work):
    """The dry run executes the very compile command lines the real run does (issue of 2026-12-04: the
    dry run passed while the real run's cpu reference compile of gpt-remat-auto, `--remat auto`
    without `--budget`, failed), so a compile that fails on the GPU machine fails here first."""
    for name in ("gpt-remat-auto", "gpt-checkpoints"):
        dry, dry_record = compile_lines(tf, os.path.join(work, "same-dry"), name, True)
        real, real_record = compile_lines(tf, os.path.join(work, "same-real"), name, False)
        harness_errors = [r for r in real_record.get("reasons", []) if "exit" in r and "trainer" not in r]
        check(dry == real and not harness_errors and dry_record.get("status") == "SKIP",
              "%s: the dry run's %d compile lines are the real run's %d (dry run %s; real run's compile errors: %s)" % (
                  name, len(dry), len(real), dry_record.get("status"), harness_errors or "none"))
        for line in real:
            print("     %s" % line)
        if dry != real:
            for line in sorted(set(real) - set(dry)):
                print("     only in the real run: %s" % line)
            for line in sorted(set(dry) - set(real)):
                print("     only in the dry run: %s" % line)


REPORT = os.path.join(ROOT, "scripts", "gpu-verify-report.py")


def memory_check(work, runs):
    path = os.path.join(work, "runs.jsonl")
    with open(path, "w") as f:
        for run in runs:
            f.write(json.dumps(run) + "\n")
    done = subprocess.run([sys.executable, REPORT, "memory-check", path], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return done.stdout.strip()


def gpu_run(**changes):
    run = {"label": "steptime-cuda-8x1024", "steps_done": 12, "exit": 0, "smi_pid": 4242,
           "planned": {"device_total_bytes": 8000 * MIB}, "planned_measured_overhead": {"device_total_bytes": 7700 * MIB},
           "smi_process_mib": {"peak": 7600}, "smi_device_mib": {"peak": 7650, "baseline": 0}}
    run.update(changes)
    return run


def test_memory_check(work):
    """scripts/gpu-verify's memory items: fail unless measured, filtered by pid, within 3% of the plan for the
    device in either direction."""
    cases = [
        ("measured within 3% below the plan for the device", [gpu_run()], "PASS"),
        ("over the plan", [gpu_run(smi_device_mib={"peak": 7701, "baseline": 0})], "FAIL"),
        ("more than 3% below the plan", [gpu_run(smi_process_mib={"peak": 7400}, smi_device_mib={"peak": 7450, "baseline": 0})],
         "FAIL"),
        ("rows not filtered by pid", [gpu_run(smi_pid=None)], "FAIL"),
        ("a run that trained no step", [gpu_run(), gpu_run(label="bf16", steps_done=0)], "FAIL"),
        ("nothing measured", [gpu_run(smi_process_mib=None, smi_device_mib=None)], "FAIL"),
        ("the default plan when no device plan (4.4% below it)", [gpu_run(planned_measured_overhead=None)], "FAIL"),
        ("no runs", [], "SKIP"),
    ]
    for label, runs, wanted in cases:
        line = memory_check(work, runs)
        check(line.startswith(wanted), "memory-check, %s: %s" % (label, line[:220]))
    log = os.path.join(work, "train.txt")
    with open(log, "w") as f:
        f.write("step 1/4  loss 4.0000  10.0 samples/s\nstep 4/4  loss 3.0000  20.0 samples/s\n"
                "trained 4 steps in 1.00 s; final loss 3.0000\n"
                "throughput: data feed 0.50 ms of 250.00 ms a step (0.2%: the device waits while the host reads and "
                "uploads a batch); model 5.25 TFLOP a step at 21 TFLOP/s (the plan's estimate)\n")
    apps = os.path.join(work, "apps.csv")
    with open(apps, "w") as f:
        f.write("100, 7600\n200, 30000\n100, 7650\n")
    done = subprocess.run([sys.executable, REPORT, "train-log", log, "--label", "x", "--backend", "cuda", "--model",
                           "gpt", "--n", "8", "--smi-apps", apps, "--smi-pid", "100"], stdout=subprocess.PIPE, text=True)
    result = json.loads(done.stdout)
    check((result.get("smi_process_mib") or {}).get("peak") == 7650 and result.get("smi_pid") == 100,
          "train-log --smi-pid 100: the peak of pid 100 only (7650 MiB, not the other process's 30000)")
    check(result.get("feed_share") == 0.002 and result.get("flops_per_step") == 5.25e12,
          "train-log reads the throughput line: feed share 0.2%%, 5.25 TFLOP a step (%s, %s)" % (
              result.get("feed_share"), result.get("flops_per_step")))


def test_speed_check(work):
    """gpu-verify's speed_vs_torch: each cuda row against PyTorch's partner variant in the same call."""
    ours, theirs = os.path.join(work, "ours.jsonl"), os.path.join(work, "torch.jsonl")
    with open(ours, "w") as f:
        f.write(json.dumps({"label": "steptime-cuda-8x1024", "step_ms": 221.5}) + "\n")
        f.write(json.dumps({"label": "steptime-cuda-bf16-8x1024", "step_ms": 134.5}) + "\n")
    for label, torch_rows, wanted, text in (
            ("both partners there", [("fp32-sdpa", 161.1), ("bf16-sdpa", 46.3)], "PASS", "2.90x"),
            ("no bf16 partner", [("fp32-sdpa", 161.1)], "FAIL", "no PyTorch bf16-sdpa"),
            ("another size only", [], "FAIL", "no PyTorch fp32-sdpa")):
        with open(theirs, "w") as f:
            for variant, ms in torch_rows:
                f.write(json.dumps({"kind": "torch", "variant": variant, "N": 8, "T": 1024, "step_ms": ms}) + "\n")
            f.write(json.dumps({"kind": "torch", "variant": "fp32-sdpa", "N": 8, "T": 256, "step_ms": 40.0}) + "\n")
        done = subprocess.run([sys.executable, REPORT, "speed-check", ours, theirs], stdout=subprocess.PIPE, text=True)
        line = done.stdout.strip()
        check(line.startswith(wanted) and text in line, "speed-check, %s: %s" % (label, line[:200]))
    # a model other than a gpt: sizes with the graph's symbols, paired by model and size
    with open(ours, "w") as f:
        f.write(json.dumps({"label": "steptime-cuda-autocast-32xTa=605", "model": "xtts-gpt", "step_ms": 300.0}) + "\n")
    for label, model, size, wanted, text in (
            ("xtts-gpt beside its PyTorch twin", "xtts-gpt", "32xTa=605", "PASS", "1.50x"),
            ("another model at that size", "asr-256-12-6", "32xTa=605", "FAIL", "no PyTorch bf16-sdpa time for xtts-gpt"),
            ("another size", "xtts-gpt", "32xTa=256", "FAIL", "at 32xTa=605")):
        with open(theirs, "w") as f:
            f.write(json.dumps({"kind": "torch", "variant": "bf16-sdpa", "model": model, "size": size, "N": 32,
                                "T": 669, "step_ms": 200.0}) + "\n")
        done = subprocess.run([sys.executable, REPORT, "speed-check", ours, theirs], stdout=subprocess.PIPE, text=True)
        line = done.stdout.strip()
        check(line.startswith(wanted) and text in line, "speed-check, %s: %s" % (label, line[:200]))


def test_synthdata(tf, work):
    """bench/synthdata.py: one .npy per input and label in the vocabularies (a knob overrides the preset's),
    the label positions a sample has, the text stream for a gpt, a clear error without a range."""
    synthdata = edge.synthdata
    graph = os.path.join(work, "asr.tfg")
    subprocess.run([tf, "zoo", "asr-128-6-3", "--param", "vocab=300", "-o", graph], check=True, stdout=subprocess.DEVNULL)
    folder = os.path.join(work, "asr_data")
    result = synthdata.make_data(tf, graph, ["T=25,U=12"], synthdata.config_ints("asr-128-6-3 vocab=300"), 3, folder)
    check(result["label_positions"] == 12 and sorted(result["files"]) == ["labels.npy", "mel.npy", "tokens.npy"],
          "synthdata asr: mel, tokens, labels; 12 label positions a sample (%s)" % result)
    plan = os.path.join(work, "asr.tfplan")
    subprocess.run([tf, "compile", graph, "--set", "N=3,T=25,U=12", "-o", plan], check=True, stdout=subprocess.DEVNULL)
    done = subprocess.run([tf, "train", plan, "--data", folder, "--steps", "1"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    check(done.returncode == 0, "tightfit trains on synthdata's asr data (tokens within vocab=300): exit %d %s" % (
        done.returncode, done.stdout.strip()[-200:]))
    check(synthdata.config_ints("xtts-gpt text_vocab=10")["text_labels"] == 10 and
          synthdata.config_ints("xtts-gpt")["audio_codes"] == 1026, "synthdata: a vocabulary knob overrides the preset's")
    gpt = os.path.join(work, "gpt.tfg")
    subprocess.run([tf, "zoo", "gpt", "-o", gpt], check=True, stdout=subprocess.DEVNULL)
    result = synthdata.make_data(tf, gpt, ["T=32"], {}, 2, os.path.join(work, "gpt_data"))
    check(result["stream"] and result["label_positions"] == 32, "synthdata gpt: the text stream, 32 positions (%s)" % result)
    small = synthdata.make_data(tf, gpt, ["T=32"], synthdata.config_ints("gpt vocab=64"), 2, os.path.join(work, "gpt64"))
    check(not small["stream"] and sorted(small["files"]) == ["labels.npy", "tokens.npy"],
          "synthdata gpt vocab=64: random tokens, not the text stream's [0, 128) (%s)" % small)
    try:
        synthdata.make_data(tf, graph, ["T=25,U=12"], {}, 2, os.path.join(work, "none"))
        check(False, "synthdata without integer ranges: refused")
    except synthdata.DataError as e:
        check("tokens" in str(e), "synthdata without integer ranges: refused naming the input (%s)" % e)


def test_confined_run(tf, work):
    """train_confined's plumbing on the cpu under a simulated ballast: the child runs, its losses and
    skipped steps are read, the free counter is sampled, the ballast is released."""
    graph = os.path.join(work, "mlp.tfg")
    plan = os.path.join(work, "mlp.tfplan")
    subprocess.run([tf, "zoo", "mlp", "-o", graph], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([tf, "compile", graph, "--set", "N=32", "-o", plan], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    cuda = FakeCuda(4 * 2**30)
    cuda.lock = __import__("threading").Lock()
    folder = os.path.join(work, "confined")
    os.makedirs(folder, exist_ok=True)
    record = edge.train_confined(tf, cuda, plan, os.path.join(ROOT, "models", "data", "digits", "train"), 3, 2**30, 0,
                                 folder, device_arg="cpu")
    check(record.get("exit") == 0 and len(record.get("losses", [])) == 3 and record.get("skipped_steps") == [],
          "a confined run: exit %s, losses %s" % (record.get("exit"), record.get("losses")))
    check(record.get("free_samples", 0) >= 1 and record.get("device_peak_bytes") == 0,
          "the free counter sampled (%s samples; the simulated device did not move)" % record.get("free_samples"))
    check(1 * 2**30 <= record["free_before_bytes"] < 2**30 + edge.GRAIN and cuda.free_bytes == 4 * 2**30,
          "the ballast left the budget free, then was released")


def main():
    tf, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    test_judge()
    test_ballast()
    test_smi(work)
    test_npy(work)
    test_memory_check(work)
    test_confined_run(tf, work)
    test_speed_check(work)
    test_synthdata(tf, work)
    test_dry_run(tf, work)
    test_dry_run_compiles_as_the_run(tf, work)
    print("edge harness: %d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
