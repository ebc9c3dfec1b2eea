#!/usr/bin/env python3
"""Helper of scripts/gpu-verify (standard library only; any Python 3.8+).

  gpu-verify-report.py report ITEMS_DIR OUT_DIR [--mode strict|allow-skip] [--budget S]
      Reads every item folder of ITEMS_DIR (files: name, title, status, reason, seconds, command,
      log, optional runs.jsonl and facts.json) and writes OUT_DIR/report.md and OUT_DIR/report.json.
      gpu-verify calls it after every item, so a run killed at its limit still leaves a report.

  gpu-verify-report.py train-log LOG --label L --backend B --model M --n N --t T [--warmup W]
                       [--smi-device FILE] [--smi-apps FILE] [--smi-baseline MIB] [--compile LOG]...
      Parses the output of `tightfit train` (text mode: "step k/S  loss X  R samples/s" lines,
      "trained S steps in X s", "memory:", "device memory:") and prints one JSON object: losses,
      the first step's time, the steady step time (from the cumulative rates and the total), and,
      when given, nvidia-smi samples (device-wide MiB used, per-process MiB used) and `tightfit
      compile` outputs (regions total, device total).

  gpu-verify-report.py tail FILE [LINES]
      The last lines of FILE (for the shell fallback).

exit codes: 0 done, 2 bad usage.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import sys

STATUSES = ("PASS", "FAIL", "SKIP")


def read(path, default=""):
    try:
        with open(path, "r", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def tail(text, lines):
    rows = text.rstrip("\n").split("\n") if text.strip() else []
    return rows[-lines:]


def finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def clean(value):
    """JSON without NaN/Infinity (they are not JSON): non-finite floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


# ---------------------------------------------------------------- train-log

STEP_RE = re.compile(r"^step\s+(\d+)/(\d+)\s+loss\s+(\S+)\s+(\S+)\s+samples/s")
TRAINED_RE = re.compile(r"^trained (\d+) steps in ([0-9.]+) s; final loss (\S+)")
THROUGHPUT_RE = re.compile(r"^throughput: data feed ([0-9.]+) ms of ([0-9.]+) ms a step \(([0-9.]+)%.*; "
                           r"model ([0-9.eE+-]+) (TFLOP|GFLOP) a step")
BYTES_RE = re.compile(r"^\s*(regions total|device total|total)\s+.*\((\d+) bytes")


def parse_number(text):
    try:
        return float(text)
    except ValueError:
        return float("nan")


def parse_compile(path):
    out = {}
    for line in read(path).splitlines():
        m = BYTES_RE.match(line)
        if m:
            out[m.group(1).replace(" ", "_") + "_bytes"] = int(m.group(2))
    if "regions_total_bytes" not in out and "total_bytes" in out:
        out["regions_total_bytes"] = out["total_bytes"]
    if "device_total_bytes" not in out and "total_bytes" in out:
        out["device_total_bytes"] = out["total_bytes"]
    out.pop("total_bytes", None)
    return out


def parse_smi_device(path):
    """nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms ...: MiB per line."""
    values = []
    for line in read(path).splitlines():
        try:
            values.append(float(line.strip().split(",")[0]))
        except ValueError:
            pass
    return values


def parse_smi_apps(path, pid=None):
    """nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms ...."""
    values = []
    for line in read(path).splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            p, mib = int(parts[0]), float(parts[1])
        except ValueError:
            continue
        if pid is None or p == pid:
            values.append(mib)
    return values


def train_log(args):
    text = read(args.log)
    steps = []
    result = {"label": args.label, "backend": args.backend, "model": args.model, "size": args.size or None,
              "N": args.n, "T": args.t, "device": args.device, "exit": args.exit}
    for line in text.splitlines():
        m = STEP_RE.match(line.strip())
        if m:
            steps.append((int(m.group(1)), parse_number(m.group(3)), parse_number(m.group(4))))
        m = TRAINED_RE.match(line.strip())
        if m:
            result["steps_done"] = int(m.group(1))
            result["seconds"] = float(m.group(2))
            result["final_loss"] = finite(parse_number(m.group(3)))
        m = THROUGHPUT_RE.match(line.strip())
        if m:
            result["feed_share"] = float(m.group(3)) / 100.0
            result["flops_per_step"] = float(m.group(4)) * (1e12 if m.group(5) == "TFLOP" else 1e9)
        if line.startswith("memory:"):
            result["memory_line"] = line.strip()
        if line.startswith("device memory:"):
            result["device_memory_line"] = line.strip()
    samples = args.n  # a plan's global batch: micro-batch N x accumulation 1 here
    if steps:
        result["first_loss"] = finite(steps[0][1])
        result["last_loss"] = finite(steps[-1][1])
        result["losses"] = [[k, finite(loss)] for k, loss, _ in steps][:400]
        times = {k: (k * samples / rate if rate > 0 else None) for k, _, rate in steps}
        if 1 in times and times[1]:
            result["first_step_ms"] = round(1000 * times[1], 3)
        total_steps = result.get("steps_done", steps[-1][0])
        # The time of the last step two ways: "trained S steps in X.XX s" (+-0.005 s) and S x batch /
        # the last rate (printed to 0.1 samples/s); take the one with the smaller relative error.
        total_s = result.get("seconds")
        last_k, _, last_rate = steps[-1]
        if last_k == total_steps and last_rate > 0:
            from_rate = times[last_k]
            if total_s is None or 0.05 / last_rate < 0.005 / max(total_s, 1e-9):
                total_s = from_rate
        if total_s is None:
            total_s = times.get(steps[-1][0])
        warm = min(args.warmup, total_steps - 1)
        step_s = None
        if warm >= 1 and warm in times and times[warm] is not None and total_s and total_steps > warm:
            # steady state: the steps after the warm-up. The warm-up's end is known from a rate
            # printed to 0.1 samples/s: its rounding gives the uncertainty reported beside the time.
            rate_w = dict((k, r) for k, _, r in steps)[warm]
            if total_s > times[warm]:
                step_s = (total_s - times[warm]) / (total_steps - warm)
                result["timed_steps"] = total_steps - warm
                result["step_ms_method"] = "mean of the steps after %d warm-up step(s)" % warm
                result["step_ms_uncertainty"] = round(1000 * times[warm] * 0.05 / rate_w / (total_steps - warm), 3)
        if step_s is None and total_s and total_steps:
            step_s = total_s / total_steps
            result["timed_steps"] = total_steps
            result["step_ms_method"] = "mean of all steps, the first included (the rates are too coarse to leave it out)"
        if step_s:
            result["step_ms"] = round(1000 * step_s, 3)
            if args.t:
                result["tokens_per_s"] = round(args.n * args.t / step_s, 1) if step_s > 0 else None
    if args.compile:
        for path in args.compile:
            parsed = parse_compile(path)
            key = "planned" if "planned" not in result else "planned_measured_overhead"
            result[key] = parsed
    if args.smi_device:
        dev = parse_smi_device(args.smi_device)
        if dev:
            result["smi_device_mib"] = {"baseline": args.smi_baseline, "peak": max(dev), "last": dev[-1],
                                        "after_exit": args.smi_after, "samples": len(dev)}
            # flat after the first step: the second half of the samples should not move
            half = dev[len(dev) // 2:]
            result["smi_device_mib"]["second_half_spread"] = max(half) - min(half) if half else None
    if args.smi_apps:
        apps = parse_smi_apps(args.smi_apps, args.smi_pid)
        if args.smi_pid is not None:
            result["smi_pid"] = args.smi_pid
        if apps:
            half = apps[len(apps) // 2:]
            result["smi_process_mib"] = {"peak": max(apps), "last": apps[-1], "samples": len(apps),
                                         "second_half_spread": max(half) - min(half) if half else None}
    print(json.dumps(clean(result)))
    return 0


# ---------------------------------------------------------------- memory check

def memory_problems(run, tolerance):
    """(text, problems) for one run of runs.jsonl: measured against the plan for this device (its
    measured overhead, else the default model's), by pid and by the device's counter."""
    label = run.get("label", "?")
    if not run.get("steps_done"):
        return label, ["trained no step (exit %s)" % run.get("exit")]
    plan = run.get("planned_measured_overhead") or run.get("planned") or {}
    which = "the plan for this device" if run.get("planned_measured_overhead") else "the default-overhead plan"
    planned = plan.get("device_total_bytes")
    measures = []
    proc = run.get("smi_process_mib") or {}
    if proc.get("peak") is not None:
        measures.append((proc["peak"] * 2**20, "nvidia-smi peak of pid %s" % run.get("smi_pid", "?")
                         if run.get("smi_pid") is not None else "nvidia-smi process peak (no pid)"))
    dev = run.get("smi_device_mib") or {}
    if dev.get("peak") is not None and dev.get("baseline") is not None:
        measures.append(((dev["peak"] - dev["baseline"]) * 2**20, "device used peak - baseline"))
    if planned is None:
        return label, ["no planned device total"]
    if not measures:
        return label, ["nothing was measured"]
    measured, how = max(measures)
    text = "%s: %s %.1f MiB vs %s %.1f MiB (%+.1f%%)" % (label, how, measured / 2**20, which, planned / 2**20,
                                                        100.0 * (measured - planned) / planned)
    problems = []
    if run.get("smi_pid") is None and proc.get("peak") is not None:
        problems.append("the process rows were not filtered by pid")
    if measured > planned:
        problems.append("over the plan")
    elif planned - measured > tolerance * planned:
        problems.append("more than %.1f%% below the plan (the plan over-reserves)" % (100 * tolerance))
    return text, problems


def memory_check(path, tolerance):
    """One line: "PASS ...", "FAIL ..." or "SKIP ..." (no runs at all) for runs.jsonl."""
    runs = [json.loads(line) for line in read(path).splitlines() if line.strip()]
    if not runs:
        return "SKIP no runs in %s" % path
    good, bad = [], []
    for run in runs:
        text, problems = memory_problems(run, tolerance)
        (bad if problems else good).append(text + (": " + ", ".join(problems) if problems else ""))
    if bad:
        return "FAIL " + "; ".join(bad + good)
    return "PASS " + "; ".join(good)


# ---------------------------------------------------------------- speed against PyTorch

# The PyTorch variant each tightfit step-time row is compared with (its label's tag).
TORCH_PARTNER = {"": "fp32-sdpa", "offload": "fp32-sdpa", "offload_gradients": "fp32-sdpa", "bf16": "bf16-sdpa",
                 "autocast": "bf16-sdpa", "autocast_split": "bf16-sdpa", "f32_default": "fp32-sdpa", "f32_tensor": "fp32-sdpa", "f32_cores": "fp32-sdpa", "f32_chunk": "fp32-sdpa",
                 "f32_gelu": "fp32-sdpa", "f32_unpadded": "fp32-sdpa", "autocast_gelu": "bf16-sdpa", "master": "bf16-sdpa"}
STEPTIME_RE = re.compile(r"^steptime-cuda-(?:(.+)-)?(\d+x[0-9A-Za-z=+]+)$")


def speed_check(paths, goal):
    """One line: each cuda step-time row's ms/step against PyTorch's in the same call (the same model
    and size, the partner variant); FAIL when a row has no time or no PyTorch time beside it."""
    rows, torch = [], {}
    for path in paths:
        for line in read(path).splitlines():
            if not line.strip().startswith("{"):
                continue
            run = json.loads(line)
            if run.get("kind") == "torch" and run.get("step_ms"):
                torch[(run.get("variant"), run.get("model"), size_of(run))] = run["step_ms"]
            elif STEPTIME_RE.match(run.get("label", "")):
                rows.append(run)
    if not rows:
        return "FAIL no cuda step-time rows to compare"
    good, bad = [], []
    for run in rows:
        tag, size = STEPTIME_RE.match(run["label"]).groups()
        partner = TORCH_PARTNER.get(tag or "", "fp32-sdpa")
        theirs = torch.get((partner, run.get("model"), size))
        if not run.get("step_ms"):
            bad.append("%s: no step time" % run["label"])
        elif theirs is None:
            bad.append("%s: %.1f ms, no PyTorch %s time%s at %s in this call" % (
                run["label"], run["step_ms"], partner, " for %s" % run["model"] if run.get("model") else "", size))
        else:
            ratio = run["step_ms"] / theirs
            good.append("%s %.1f ms vs PyTorch %s %.1f ms: %.2fx (goal <= %.2fx %s)" % (
                run["label"], run["step_ms"], partner, theirs, ratio, goal, "met" if ratio <= goal else "not met"))
    if bad:
        return "FAIL " + "; ".join(bad + good)
    return "PASS " + "; ".join(good)


# ---------------------------------------------------------------- report

def size_of(run):
    """A run's size as given (NxT or NxK=V+K=V); older runs have N and T only."""
    return run.get("size") or "%sx%s" % (run.get("N"), run.get("T"))


def load_items(items_dir):
    items = []
    for folder in sorted(glob.glob(os.path.join(items_dir, "*"))):
        if not os.path.isdir(folder):
            continue
        item = {
            "name": read(os.path.join(folder, "name")).strip() or os.path.basename(folder),
            "title": read(os.path.join(folder, "title")).strip(),
            "status": read(os.path.join(folder, "status")).strip() or "RUNNING",
            "reason": read(os.path.join(folder, "reason")).strip(),
            "seconds": None,
            "command": read(os.path.join(folder, "command")).strip(),
        }
        try:
            item["seconds"] = round(float(read(os.path.join(folder, "seconds")).strip()), 1)
        except ValueError:
            pass
        log = read(os.path.join(folder, "log"))
        item["log_tail"] = tail(log, 40)
        item["log_lines"] = len(log.splitlines())
        runs = []
        for line in read(os.path.join(folder, "runs.jsonl")).splitlines():
            line = line.strip()
            if line:
                try:
                    runs.append(json.loads(line))
                except ValueError:
                    runs.append({"unparsed": line})
        if runs:
            item["runs"] = runs
        facts = {}
        for line in read(os.path.join(folder, "facts.txt")).splitlines():
            key, sep, value = line.partition(": ")
            if sep:
                facts[key.strip()] = value.strip()
        if facts:
            item["facts"] = facts
        items.append(item)
    return items


def fmt_bytes(n):
    if n is None:
        return "?"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n


def fmt(x, digits=1):
    return "?" if x is None else ("%.*f" % (digits, x))


def md_escape(text):
    return text.replace("|", "\\|").replace("\n", " ")


def write_report(args):
    items = load_items(args.items_dir)
    counts = {s: sum(1 for i in items if i["status"] == s) for s in STATUSES + ("RUNNING",)}
    facts = {}
    for item in items:
        if "facts" in item:
            facts.update(item["facts"])
    if counts["FAIL"]:
        verdict = "FAILED"
    elif counts["RUNNING"]:
        verdict = "INCOMPLETE"
    elif counts["SKIP"] and args.mode == "strict":
        verdict = "NOT VERIFIED (items skipped)"
    elif args.mode == "strict":
        verdict = "VERIFIED"
    else:
        verdict = "PLUMBING OK (--allow-skip: skips allowed, not a GPU verification)" if counts["SKIP"] else "PASSED"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    step_rows, memory_rows, train_rows = [], [], []
    for item in items:
        for run in item.get("runs", []):
            if run.get("kind") == "torch" and "step_ms" in run:
                step_rows.append(("pytorch " + run.get("variant", "?"), run.get("model", "gpt2-small"), size_of(run),
                                  run.get("T"), run.get("step_ms"), run.get("tokens_per_s"), run.get("timed_steps"),
                                  run.get("peak_allocated_bytes"), run.get("device", ""), None, None))
            elif "step_ms" in run and run.get("label", "").startswith("steptime"):
                ms = run.get("step_ms")
                if ms is not None and run.get("step_ms_uncertainty"):
                    ms = "%.2f ± %.2f" % (ms, run["step_ms_uncertainty"])
                rate = (run["flops_per_step"] / (run["step_ms"] / 1e3) / 1e12
                        if run.get("flops_per_step") and run.get("step_ms") else None)
                step_rows.append(("tightfit " + run.get("backend", "?"), run.get("model"), size_of(run), run.get("T"),
                                  ms, run.get("tokens_per_s"), run.get("timed_steps"),
                                  (run.get("planned") or {}).get("device_total_bytes"), run.get("device", ""), rate,
                                  run.get("feed_share")))
            if "planned" in run or "smi_device_mib" in run or "device_memory_line" in run:
                memory_rows.append(run)
            if run.get("label", "").startswith("train"):
                train_rows.append(run)

    report = {
        "tool": "scripts/gpu-verify",
        "written": now,
        "mode": args.mode,
        "verdict": verdict,
        "counts": counts,
        "budget_seconds": args.budget,
        "host": facts,
        "items": items,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    tmp = os.path.join(args.out_dir, ".report.json.tmp")
    with open(tmp, "w") as f:
        json.dump(clean(report), f, indent=1, allow_nan=False, default=str)
    os.replace(tmp, os.path.join(args.out_dir, "report.json"))

    md = []
    md.append("# tightfit GPU verification report")
    md.append("")
    md.append("**Verdict: %s** — %d PASS, %d FAIL, %d SKIP%s; mode `%s`; written %s." % (
        verdict, counts["PASS"], counts["FAIL"], counts["SKIP"],
        (", %d unfinished" % counts["RUNNING"]) if counts["RUNNING"] else "", args.mode, now))
    md.append("")
    if facts:
        md.append("## Machine")
        md.append("")
        for key in sorted(facts):
            md.append("- %s: %s" % (key, md_escape(str(facts[key]))))
        md.append("")
    md.append("## Items")
    md.append("")
    md.append("| # | item | status | seconds | reason |")
    md.append("| ---: | --- | --- | ---: | --- |")
    for n, item in enumerate(items, 1):
        md.append("| %d | `%s` %s | **%s** | %s | %s |" % (
            n, item["name"], md_escape(item["title"]), item["status"], fmt(item["seconds"]), md_escape(item["reason"])))
    md.append("")
    if step_rows:
        md.append("## Step time (one optimizer step, the same GPU; tightfit: f32 unless the row names bf16, after 2 warm-up steps, ± the rounding of its printed rate)")
        md.append("")
        md.append("| what | model | size (NxT, NxK=V+K=V) | label positions a sample | ms/step | tokens/s (label positions) | timed steps | memory (tightfit: planned device total; torch: peak allocated) | model TFLOP/s (the plan's FLOPs) | data feed share | device |")
        md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for row in step_rows:
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                row[0], row[1], row[2], row[3], row[4] if isinstance(row[4], str) else fmt(row[4], 2), fmt(row[5], 0), row[6] if row[6] is not None else "?",
                fmt_bytes(row[7]) if row[7] is not None else "?", fmt(row[9], 1) if row[9] is not None else "-",
                ("%.2f%%" % (100 * row[10])) if row[10] is not None else "-", md_escape(str(row[8]))))
        md.append("")
    if memory_rows:
        md.append("## Device memory: planned vs measured")
        md.append("")
        md.append("| run | planned regions | planned device total | measured-overhead device total | nvidia-smi process peak | device used peak - baseline | after exit - baseline | 2nd-half spread | tightfit's own line |")
        md.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for run in memory_rows:
            planned = run.get("planned") or {}
            measured = run.get("planned_measured_overhead") or {}
            smi = run.get("smi_device_mib") or {}
            proc = run.get("smi_process_mib") or {}
            delta = after = None
            if smi.get("peak") is not None and smi.get("baseline") is not None:
                delta = (smi["peak"] - smi["baseline"]) * 2**20
            if smi.get("after_exit") is not None and smi.get("baseline") is not None:
                after = (smi["after_exit"] - smi["baseline"]) * 2**20
            spread = proc.get("second_half_spread", smi.get("second_half_spread"))
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                run.get("label"), fmt_bytes(planned.get("regions_total_bytes")), fmt_bytes(planned.get("device_total_bytes")),
                fmt_bytes(measured.get("device_total_bytes")),
                fmt_bytes(proc["peak"] * 2**20) if proc.get("peak") is not None else "?",
                fmt_bytes(delta) if delta is not None else "?",
                fmt_bytes(after) if after is not None else "?",
                ("%s MiB" % fmt(spread, 0)) if spread is not None else "?",
                md_escape(run.get("device_memory_line", ""))))
        md.append("")
    if train_rows:
        md.append("## Training runs")
        md.append("")
        for run in train_rows:
            md.append("- %s on %s: loss %s -> %s over %s steps (%s s)" % (
                run.get("model"), run.get("backend"), fmt(run.get("first_loss"), 4), fmt(run.get("last_loss"), 4),
                run.get("steps_done", "?"), fmt(run.get("seconds"), 2)))
        md.append("")
    md.append("## Logs (tails; full logs in logs.tar.gz)")
    md.append("")
    for item in items:
        lines = 40 if item["status"] == "FAIL" else 12
        md.append("### `%s` — %s" % (item["name"], item["status"]))
        md.append("")
        if item["reason"]:
            md.append(item["reason"])
            md.append("")
        if item["command"]:
            md.append("command: `%s`" % item["command"].replace("`", "'"))
            md.append("")
        body = item["log_tail"][-lines:]
        if body:
            md.append("```")
            md.extend(line.replace("```", "'''") for line in body)
            md.append("```")
            md.append("")
    tmp = os.path.join(args.out_dir, ".report.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md) + "\n")
    os.replace(tmp, os.path.join(args.out_dir, "report.md"))
    return 0


def main(argv):
    parser = argparse.ArgumentParser(prog="gpu-verify-report.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("report")
    p.add_argument("items_dir")
    p.add_argument("out_dir")
    p.add_argument("--mode", default="strict", choices=("strict", "allow-skip"))
    p.add_argument("--budget", type=float, default=None)
    p = sub.add_parser("train-log")
    p.add_argument("log")
    p.add_argument("--label", required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--t", type=int, default=0, help="label positions per sample (tokens/s counts them)")
    p.add_argument("--size", default="", help="the size as given: NxT or NxK=V+K=V (default NxT)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--smi-device")
    p.add_argument("--smi-apps")
    p.add_argument("--smi-pid", type=int, default=None, help="only nvidia-smi's rows of this process")
    p.add_argument("--smi-baseline", type=float)
    p.add_argument("--smi-after", type=float)
    p.add_argument("--compile", action="append")
    p.add_argument("--device", default="")
    p.add_argument("--exit", type=int, default=None)
    p = sub.add_parser("memory-check")
    p.add_argument("runs")
    p.add_argument("--tolerance", type=float, default=3.0,
                   help="planned - measured allowed, %% of the planned device total (default 3)")
    p = sub.add_parser("speed-check")
    p.add_argument("runs", nargs="+")
    p.add_argument("--goal", type=float, default=1.0, help="the ratio the issue asks for (default 1.0)")
    p = sub.add_parser("tail")
    p.add_argument("file")
    p.add_argument("lines", nargs="?", type=int, default=40)
    args = parser.parse_args(argv)
    if args.command == "report":
        return write_report(args)
    if args.command == "train-log":
        return train_log(args)
    if args.command == "memory-check":
        print(memory_check(args.runs, args.tolerance / 100.0))
        return 0
    if args.command == "speed-check":
        print(speed_check(args.runs, args.goal))
        return 0
    if args.command == "tail":
        print("\n".join(tail(read(args.file), args.lines)))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
