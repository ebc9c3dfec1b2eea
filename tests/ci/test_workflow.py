#!/usr/bin/python3
"""Runs the `run:` commands of .github/workflows/memory-budget.yml, in order, in a clean clone of
this repository, as GitHub's runner would (bash -eo pipefail, from the checkout's root), and checks
the gate both ways (issue 17):
- the workflow passes as committed: setup + build, the model, `check --json` into the result file,
  the comparison with the committed baseline;
- the upload step runs `if: always()` and the result file it uploads is check's JSON;
- a model that grew more than 5% over the baseline fails the comparison step (exit 1, with the diff).
`uses:` steps are GitHub's: the checkout is the clone, the upload is checked as above. The YAML is
read by a small reader for the subset the workflow uses, so the test needs no YAML package.
usage: test_workflow.py SOURCE-DIR [WORKFLOW]"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def read_steps(path):
    """The workflow's steps (dicts of their top-level keys), in order."""
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "steps:")
    steps, step, step_indent, i = [], None, None, start + 1
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("- ") and (step_indent is None or indent == step_indent):
            step_indent, step = indent, {}
            steps.append(step)
            stripped, indent = stripped[2:], indent + 2
        elif step_indent is not None and indent <= step_indent:
            break  # past the steps list
        if indent != step_indent + 2:
            continue  # nested under a key (with:, env:)
        key, _, value = stripped.partition(":")
        value = value.strip()
        if value in ("|", ">"):
            block = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i])
                i += 1
            margin = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            block = [b[margin:] for b in block]
            value = "\n".join(block).rstrip() if value == "|" else " ".join(b.strip() for b in block if b.strip())
        step[key] = value
    return steps


passed = failed = 0


def ok(condition, what, detail=""):
    global passed, failed
    passed += bool(condition)
    failed += not condition
    print(("ok: " if condition else "FAIL: ") + what + ("" if condition else " " + detail), flush=True)


def run(command, cwd):
    started = time.time()
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command], cwd=cwd,
                          capture_output=True, text=True)
    return done, time.time() - started


source = os.path.abspath(sys.argv[1])
workflow = sys.argv[2] if len(sys.argv) > 2 else ".github/workflows/memory-budget.yml"
if subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], capture_output=True).returncode != 0:
    print(f"SKIP: {source} is not a git checkout with a commit to clone")
    sys.exit(77)
steps = read_steps(os.path.join(source, workflow))
print(f"{workflow}: {len(steps)} steps")
work = tempfile.mkdtemp(prefix="tightfit-ci-")
try:
    clone = os.path.join(work, "repo")
    subprocess.run(["git", "clone", "-q", source, clone], check=True)
    head = subprocess.run(["git", "-C", clone, "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout
    print(f"clean clone of {source} at {head.strip()[:80]}")
    uploads, compare = [], None
    for step in steps:
        name = step.get("name", step.get("uses", step.get("run", "")[:40]))
        if "uses" in step:
            if step["uses"].startswith("actions/upload-artifact"):
                uploads.append(step)
                ok(step.get("if") == "always()", f"step '{name}': runs if: always() (the result also when the gate fails)")
            else:
                print(f"step '{name}': {step['uses']} (the clone stands for it)")
            continue
        done, seconds = run(step["run"], clone)
        ok(done.returncode == 0, f"step '{name}': exit {done.returncode} in {seconds:.0f} s",
           "\n" + done.stdout[-3000:] + done.stderr[-3000:])
        if done.returncode != 0:
            break
        if "--baseline" in step["run"]:
            compare = step
            print("  " + "\n  ".join(done.stdout.strip().splitlines()[-10:]))
    result_path = os.path.join(clone, "memory-budget.json")
    try:
        result = json.load(open(result_path))
        ok(result["fits"] is True and result["categories"]["total"] == result["device_total_bytes"],
           f"the uploaded file is check's JSON: fits, device total {result['device_total_bytes']} bytes")
    except (OSError, ValueError, KeyError) as error:
        ok(False, "the uploaded file is check's JSON", str(error))
    ok(len(uploads) == 1, "one upload step")
    ok(compare is not None, "a step compares with the baseline")
    if compare is not None and failed == 0:
        # A growth of 10% over the baseline: the same comparison must fail, naming the categories.
        baseline_path = os.path.join(clone, ".github/memory-budget/baseline.json")
        baseline = json.load(open(baseline_path))
        shrink = baseline["categories"]["total"] // 11
        baseline["categories"]["activations"] -= shrink
        baseline["categories"]["total"] -= shrink
        json.dump(baseline, open(baseline_path, "w"), indent=2)
        done, _ = run(compare["run"], clone)
        ok(done.returncode == 1 and "FAILS" in done.stdout and "activations" in done.stdout,
           "a model 10% over the baseline fails the comparison step (exit 1, with the per-category diff)",
           done.stdout[-2000:] + done.stderr[-2000:])
finally:
    shutil.rmtree(work, True)
print(f"ci_workflow: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
