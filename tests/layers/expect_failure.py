"""Runs a checker on a tree broken on purpose and passes only when the checker fails (exit 1) and names
every planted fault. usage: expect_failure.py 'EXPECTED LINE' [...] -- COMMAND ARG..."""
import subprocess
import sys

split = sys.argv.index("--")
expected, command = sys.argv[1:split], sys.argv[split + 1:]
run = subprocess.run(command, capture_output=True, text=True)
output = run.stdout + run.stderr
print(output)
missing = [e for e in expected if e not in output]
for e in missing:
    print(f"FAIL: the checker did not say: {e}")
if run.returncode != 1:
    print(f"FAIL: the checker exited {run.returncode}, not 1")
print(f"expect_failure: {len(expected) - len(missing) + (run.returncode == 1)} passed, "
      f"{len(missing) + (run.returncode != 1)} failed")
sys.exit(1 if missing or run.returncode != 1 else 0)
