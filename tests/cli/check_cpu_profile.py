"""Checks a TIGHTFIT_CPU_PROFILE file against the plan it profiled, for test_cpu_profile.sh:

    check_cpu_profile.py PROFILE PLAN.json OPTIMIZER_STEPS ACCUMULATE THREADS

PLAN.json is `tightfit dump` of the plan (the plan file read by another path than the profile's). The
profile must name every op kind of the plan with its number of steps, every phase with its steps and
how many times they ran (OPTIMIZER_STEPS x ACCUMULATE for a micro-batch step, OPTIMIZER_STEPS for an
optimizer step), totals that are not negative and add up to the header's, and the runs of the header
(one per micro-batch and one per optimizer step). Prints what it compared; exits 1 on a mismatch.
"""
import collections
import json
import re
import sys


def sections(lines):
    """The profile's lines by section: "ops" (after the header), then each "# name" that follows."""
    out, name = collections.defaultdict(list), "ops"
    for line in lines[1:]:
        if line.startswith("# "):
            name = line[2:].split(":")[0].strip()
            out[name].append(line)
        else:
            out[name].append(line)
    return out


def main():
    path, plan_path, optimizer_steps, accumulate, threads = sys.argv[1:]
    optimizer_steps, accumulate = int(optimizer_steps), int(accumulate)
    lines = open(path).read().splitlines()
    plan = json.load(open(plan_path))
    steps = plan["steps"]
    errors = []

    header = re.match(r"# tightfit CPU profile: (\d+) steps, (\d+) runs, ([0-9.]+) ms in steps$", lines[0])
    if not header:
        sys.exit(f"the header is not the CPU profile's: {lines[0]!r}")
    n_steps, runs, total = int(header[1]), int(header[2]), float(header[3])
    want_runs = optimizer_steps * accumulate + optimizer_steps
    if n_steps != len(steps) or runs != want_runs:
        errors.append(f"header: {n_steps} steps, {runs} runs; the plan has {len(steps)} steps, "
                      f"{want_runs} runs expected")
    if total <= 0:
        errors.append(f"header total {total} ms")

    parts = sections(lines)
    ops = {}
    for line in parts["ops"][1:]:  # after the column names
        name, ms, count, _ = line.split()
        ops[name] = (float(ms), int(count))
    want_ops = collections.Counter(step["op"] for step in steps)
    if {k: v[1] for k, v in ops.items()} != dict(want_ops):
        errors.append(f"op kinds and their steps: profile {sorted((k, v[1]) for k, v in ops.items())}, "
                      f"plan {sorted(want_ops.items())}")
    if any(ms < 0 for ms, _ in ops.values()):
        errors.append(f"a negative op total: {ops}")
    op_sum = sum(ms for ms, _ in ops.values())
    if abs(op_sum - total) > 0.001 * len(ops) + 0.01:
        errors.append(f"op totals add up to {op_sum:.3f} ms, the header says {total:.3f}")

    phases = {}
    for line in parts["phases"][2:]:  # after "# phases" and the column names
        name, ms, count, calls, _ = line.split()
        phases[name] = (float(ms), int(count), int(calls))
    want_phases = collections.defaultdict(lambda: [0, 0])
    for index, step in enumerate(steps):
        want_phases[step["phase"]][0] += 1
        want_phases[step["phase"]][1] += optimizer_steps * (accumulate if index < plan["micro_steps"] else 1)
    got = {k: [v[1], v[2]] for k, v in phases.items()}
    if got != dict(want_phases):
        errors.append(f"phases [steps, calls]: profile {got}, plan {dict(want_phases)}")
    if any(ms < 0 for ms, _, _ in phases.values()):
        errors.append(f"a negative phase total: {phases}")
    phase_sum = sum(ms for ms, _, _ in phases.values())
    if abs(phase_sum - total) > 0.001 * len(phases) + 0.01:
        errors.append(f"phase totals add up to {phase_sum:.3f} ms, the header says {total:.3f}")

    slowest = parts["slowest steps"][1:]
    times = [float(line.split()[-2]) for line in slowest]
    if len(slowest) != min(25, len(steps)) or times != sorted(times, reverse=True) or min(times) < 0:
        errors.append(f"slowest steps: {len(slowest)} lines, times {times}")
    blas = re.fullmatch(rf"# threads: {threads}; OpenBLAS \S+, \w+ kernels.*", "\n".join(parts["threads"]))
    if not blas:
        errors.append(f"threads line: {parts['threads']}")

    for error in errors:
        print("mismatch:", error)
    print(f"{len(steps)} steps, {runs} runs, {total:.3f} ms; ops {dict(want_ops)}; phases {dict(want_phases)}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
