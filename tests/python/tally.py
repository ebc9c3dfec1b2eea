"""The tally the Python tests keep: each check printed as "ok: ..." or "FAIL: ...", counted, and the
counts printed at the end with the exit status (1 when a check failed). Imported by the tests beside it
(Python puts the script's own folder on sys.path) and by those in other folders (tests/lora,
tests/init_from), which put this folder on sys.path."""
import math
import os
import sys
import traceback

counts = {"passed": 0, "failed": 0}


def count(passed):
    counts["passed" if passed else "failed"] += 1


def ok(condition, what, detail=""):
    """One check: "ok: what" when `condition` holds, else "FAIL: what detail"."""
    print(f"ok: {what}" if condition else f"FAIL: {what} {detail}")
    count(condition)


def expect(condition, message):
    """One check printed only when it fails ("FAIL: message"): for tests of many small checks."""
    if not condition:
        print(f"FAIL: {message}")
    count(condition)


def check(label, problem, seen):
    """One check that found `problem` (None or "" when it found none) after seeing `seen`."""
    print(f"FAIL: {label}: {problem} ({seen})" if problem else f"ok: {label}: {seen}")
    count(not problem)


def verdict(label, passed, seen):
    """One check: "ok: label: seen" when `passed`, else "FAIL: label: seen"."""
    print(f"{'ok' if passed else 'FAIL'}: {label}: {seen}")
    count(passed)


def case(label, run):
    """One check: run() returns (problem or None, what was seen); an exception is a failure. With
    TALLY_ONLY set (a developer's switch), only the cases whose label contains it run; with TALLY_TRACEBACK set, an
    exception's traceback is printed."""
    if os.environ.get("TALLY_ONLY", "") not in label:
        return
    try:
        problem, seen = run()
    except Exception as error:  # tightfit's refusals, and torch.onnx.export's own errors
        problem, seen = f"{type(error).__name__}: {str(error)[:400]}", ""
        if os.environ.get("TALLY_TRACEBACK"):
            traceback.print_exc()
    check(label, problem, seen)


def finish(name=None):
    """Prints "name: N passed, M failed" (without "name: " when None) and exits 1 when a check failed
    or none ran (a test that checked nothing proves nothing, as tf_test_finish in tests/check.h)."""
    print(f"{name + ': ' if name else ''}{counts['passed']} passed, {counts['failed']} failed")
    sys.exit(1 if counts["failed"] or not counts["passed"] else 0)


def relative_apart(got, want):
    """The worst relative difference of two sequences of losses, inf where either holds a value that is not
    finite (PyTorch's NaN after a step agrees with nothing: max() over NaN comparisons would skip it)."""
    if not all(math.isfinite(v) for v in list(got) + list(want)):
        return math.inf
    return max(abs(a - b) / abs(b) for a, b in zip(got, want))

