#!/bin/sh
# The step profiles (TIGHTFIT_VULKAN_PROFILE, TIGHTFIT_CUDA_PROFILE) through train: the file names
# the backend, every step of the plan and every run; the op totals add up to the total and their
# step counts to the plan's steps; the products table has a row a shape with the plan's FLOPs over
# its time, with and without accumulation (check_profile_products.py); the losses are those of the
# same run unprofiled (the profile only adds barriers or events); a path that cannot be written
# fails the session's creation (exit 2) before any step. Which op is heaviest is not asserted: that
# is timing, and under a loaded or instrumented run it varies. Vulkan runs on lavapipe in CI; CUDA
# where a GPU is present, else it says skip.
# Usage: test_profile.sh path/to/tightfit (run from the repository root).
tf="$1"
# Leak checks off under ASan, as for the other CLI tests' Vulkan runs: lavapipe leaks a small cache
# from a module it has unloaded, which no suppression can name.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
. "$(dirname "$0")/harness.sh"

"$tf" zoo gpt --param layers=2 -o "$dir/gpt.tfg" >/dev/null || fail "zoo gpt"
"$tf" devices >"$dir/devices" 2>&1
losses() { sed -n 's/^step \([0-9]*\)\/[0-9]*  loss \([0-9.]*\).*/\1 \2/p' "$1"; }

for backend in vulkan cuda; do
  variable=TIGHTFIT_$(echo $backend | tr a-z A-Z)_PROFILE
  if ! grep -q "^$backend:0" "$dir/devices"; then
    echo "skip: no $backend device, its profile is not checked here"
    continue
  fi
  "$tf" compile "$dir/gpt.tfg" --target $backend --set N=2,T=32 -o "$dir/$backend.tfplan" >"$dir/compile" 2>&1 ||
    { fail "compile for $backend: $(tail -n 1 "$dir/compile")"; continue; }
  steps=$(sed -n 's/.* plan for .*: \([0-9]*\) steps,.*/\1/p' "$dir/compile")
  env "$variable=$dir/$backend.profile" "$tf" train "$dir/$backend.tfplan" --device $backend:0 \
    --data models/data/text/train --steps 3 --log-every 1 >"$dir/profiled" 2>&1 ||
    fail "$backend: profiled train: $(tail -n 1 "$dir/profiled")"
  "$tf" train "$dir/$backend.tfplan" --device $backend:0 --data models/data/text/train --steps 3 --log-every 1 \
    >"$dir/plain" 2>&1 || fail "$backend: train: $(tail -n 1 "$dir/plain")"
  [ -n "$(losses "$dir/plain")" ] && [ "$(losses "$dir/profiled")" = "$(losses "$dir/plain")" ] ||
    fail "$backend: the profiled losses differ from the plain run's"
  p="$dir/$backend.profile"
  head -n 1 "$p" | grep -q "^# tightfit $( [ $backend = cuda ] && echo CUDA || echo Vulkan) profile: $steps steps, 6 runs, " ||
    fail "$backend: the header is not '$steps steps, 6 runs' (3 steps of a micro-batch and an optimizer run): $(head -n 1 "$p")"
  awk -v steps="$steps" '
    NR == 1 { total = $(NF - 3) }
    /^# slowest/ { ops = 0 }
    NR > 2 && ops != 0 { sum += $2; count += $3 }
    NR == 2 { ops = 1 }
    END {
      d = sum - total; if (d < 0) d = -d
      if (count != steps || d > 0.001 * NR + 0.01 || total <= 0) {
        printf "op totals %.3f ms over %d steps; header %.3f ms over %d steps\n", sum, count, total, steps; exit 1 }
    }' "$p" >"$dir/awk" 2>&1 || fail "$backend: $(cat "$dir/awk")"
  [ "$(sed -n '/^# slowest steps/,/^# products by shape/p' "$p" | wc -l)" -eq 27 ] || fail "$backend: not 25 slowest steps"
  "$tf" dump "$dir/$backend.tfplan" -o "$dir/plan.json" || fail "$backend: dump"
  /usr/bin/python3 "$(dirname "$0")/check_profile_products.py" "$p" "$dir/plan.json" 3 1 >"$dir/products" 2>&1 ||
    fail "$backend: the products table: $(cat "$dir/products")"
  # with 2 micro-batches a step: the weight gradients become matmul_accumulate (C is their first input)
  # and run twice as often as the optimizer's steps
  "$tf" compile "$dir/gpt.tfg" --target $backend --set N=2,T=32 --accumulate 2 -o "$dir/$backend-2.tfplan" \
    >"$dir/compile" 2>&1 || fail "compile --accumulate 2 for $backend: $(tail -n 1 "$dir/compile")"
  "$tf" dump "$dir/$backend-2.tfplan" -o "$dir/plan-2.json" || fail "$backend: dump"
  env "$variable=$dir/$backend-2.profile" "$tf" train "$dir/$backend-2.tfplan" --device $backend:0 \
    --data models/data/text/train --steps 2 >"$dir/profiled" 2>&1 || fail "$backend: --accumulate 2: $(tail -n 1 "$dir/profiled")"
  /usr/bin/python3 "$(dirname "$0")/check_profile_products.py" "$dir/$backend-2.profile" "$dir/plan-2.json" 2 2 \
    >"$dir/products-2" 2>&1 || fail "$backend: --accumulate 2: the products table: $(cat "$dir/products-2")"
  env "$variable=$dir/no/such/folder/x" "$tf" train "$dir/$backend.tfplan" --device $backend:0 \
    --data models/data/text/train --steps 1 >"$dir/bad" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "$variable: cannot write the profile to '$dir/no/such/folder/x'" "$dir/bad" &&
    ! grep -q "^step 1" "$dir/bad" || fail "$backend: an unwritable profile path: exit $rc, $(tail -n 1 "$dir/bad")"
  [ "$failed" -eq 0 ] && pass "$backend profile: $(head -n 1 "$p"); top op $(sed -n 3p "$p" | awk '{print $1, $2 " ms"}'); $(tail -n 1 "$dir/products"); --accumulate 2: $(tail -n 1 "$dir/products-2")"
done

finish profile
