#!/usr/bin/python3
"""scripts/make-data is deterministic and the checked-in models/data matches it: regenerate into a
scratch folder (twice) and compare every file byte for byte with the checked-in ones.

usage: check_data_sets.py SOURCE_ROOT
Exit 77 (skipped) when a source file is missing or is a different version than the checked-in data
came from (make-data exits 3 or 4): the data cannot be reproduced on such a machine."""
import filecmp
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
SCRIPT = os.path.join(ROOT, "scripts", "make-data")
CHECKED_IN = os.path.join(ROOT, "models", "data")


def files_under(folder):
    found = []
    for base, _, names in os.walk(folder):
        found += [os.path.relpath(os.path.join(base, n), folder) for n in names]
    return sorted(found)


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        outputs = []
        for run in range(2):
            out = os.path.join(scratch, "run%d" % run)
            result = subprocess.run([sys.executable, SCRIPT, "--out", out], capture_output=True, text=True)
            if result.returncode in (3, 4):
                print("skipped: " + result.stderr.strip())
                return 77
            if result.returncode != 0:
                print("FAIL make-data exited %d: %s" % (result.returncode, result.stderr.strip()))
                return 1
            outputs.append(out)
        made = files_under(outputs[0])
        expected = [f for f in files_under(CHECKED_IN) if f != "README.md"]
        if made != expected:
            print("FAIL make-data makes %s; models/data holds %s" % (made, expected))
            failures += 1
        for name in made:
            checked_in = os.path.join(CHECKED_IN, name)
            same = os.path.exists(checked_in) and all(
                filecmp.cmp(os.path.join(out, name), checked_in, shallow=False) for out in outputs)
            if not same:
                print("FAIL %s: a regenerated copy differs from models/data/%s (or it is missing)" % (name, name))
                failures += 1
            else:
                print("  %-24s %8d bytes, regenerated twice, identical to the checked-in file"
                      % (name, os.path.getsize(checked_in)))
    print("data_sets_reproducible: %d files compared, %d failed" % (len(made), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
