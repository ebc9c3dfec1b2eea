#!/bin/sh
# TIGHTFIT_CPU_PROFILE through train (issue 50): the file names every op kind of the mlp's plan with
# its step count, every phase with how many times its steps ran (3 optimizer steps, and 3 x 2
# micro-batches with --accumulate 2), non-negative times that add up to the header's, and the runs
# (check_cpu_profile.py compares it with `tightfit dump` of the plan); the losses are those of the
# same run unprofiled; "-" writes to stderr; a path that cannot be written fails the session's
# creation (exit 2) before any step.
# Usage: test_cpu_profile.sh path/to/tightfit (run from the repository root).
tf="$1"
. "$(dirname "$0")/harness.sh"
check_profile="$(dirname "$0")/check_cpu_profile.py"
losses() { sed -n 's/^step \([0-9]*\)\/[0-9]*  loss \([0-9.]*\).*/\1 \2/p' "$1"; }

"$tf" zoo mlp -o "$dir/mlp.tfg" >/dev/null || fail "zoo mlp"
for accumulate in 1 2; do
  plan="$dir/mlp-$accumulate.tfplan"
  "$tf" compile "$dir/mlp.tfg" --threads 2 --accumulate $accumulate -o "$plan" >"$dir/compile" 2>&1 ||
    { fail "compile --accumulate $accumulate: $(tail -n 1 "$dir/compile")"; continue; }
  "$tf" dump "$plan" -o "$dir/plan.json" || fail "dump"
  TIGHTFIT_CPU_PROFILE="$dir/cpu.profile" "$tf" train "$plan" --threads 2 --data models/data/digits/train \
    --steps 3 --log-every 1 >"$dir/profiled" 2>&1 || fail "profiled train: $(tail -n 1 "$dir/profiled")"
  "$tf" train "$plan" --threads 2 --data models/data/digits/train --steps 3 --log-every 1 >"$dir/plain" 2>&1 ||
    fail "train: $(tail -n 1 "$dir/plain")"
  [ -n "$(losses "$dir/plain")" ] && [ "$(losses "$dir/profiled")" = "$(losses "$dir/plain")" ] ||
    fail "--accumulate $accumulate: the profiled losses differ from the plain run's"
  if /usr/bin/python3 "$check_profile" "$dir/cpu.profile" "$dir/plan.json" 3 $accumulate 2 >"$dir/check" 2>&1; then
    pass "--accumulate $accumulate: $(head -n 1 "$dir/cpu.profile"); $(tail -n 1 "$dir/check")"
  else
    fail "--accumulate $accumulate: $(cat "$dir/check")"
    cat "$dir/cpu.profile"
  fi
done

plan="$dir/mlp-1.tfplan"
expect_message 0 "TIGHTFIT_CPU_PROFILE=- writes the profile to stderr" '^# tightfit CPU profile: ' \
  env TIGHTFIT_CPU_PROFILE=- "$tf" train "$plan" --data models/data/digits/train --steps 1
env TIGHTFIT_CPU_PROFILE="$dir/no/such/folder/x" "$tf" train "$plan" --data models/data/digits/train --steps 1 \
  >"$dir/bad" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "TIGHTFIT_CPU_PROFILE: cannot write the profile to '$dir/no/such/folder/x'" "$dir/bad" &&
  ! grep -q "^step 1" "$dir/bad" && pass "an unwritable path: exit 2, $(grep TIGHTFIT_CPU_PROFILE "$dir/bad")" ||
  fail "an unwritable profile path: exit $rc, $(tail -n 1 "$dir/bad")"

finish cpu_profile
