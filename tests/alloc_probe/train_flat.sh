#!/bin/sh
# `tightfit train` itself under the allocation probe: the main job (scripts/main-job: the mlp on the
# digits, with held-out evaluation and a checkpoint) and the character gpt on the text. TIGHTFIT is
# tightfit_probed, the CLI with its phases marked from outside (train_phases.c); the probe logs each
# one. Passes when
#   - 'train: steps' (every step after the first two) makes no heap allocation at all, and
#   - no allocation in 'train: warm-up' or 'train: steps' is region-sized: as large as the plan's
#     smallest region, clamped to [4 KiB, 64 KiB] (tests/alloc_probe/probe_client.h says why).
# usage: train_flat.sh TIGHTFIT PROBE_LIBRARY     (from the repository root; exits 77 without the probe)
tf=$1 probe=$2
[ -r "$probe" ] || { echo "SKIP: no allocation probe at $probe"; exit 77; }
. "$(dirname "$0")/../cli/harness.sh"   # $dir, check, finish
# The counts of phase $2 in the probe's log $1, both sides (program and driver) as one: "allocations
# largest". On the CPU backend nothing may come from a driver anyway.
phase() {
  sed -n "s/^alloc_probe: phase '$2': program \([0-9]*\) allocations, [0-9]* bytes, largest \([0-9]*\),.*; driver \([0-9]*\) allocations, [0-9]* bytes, largest \([0-9]*\),.*$/\1 \2 \3 \4/p" "$1" |
    awk '{ print $1 + $3, ($2 > $4 ? $2 : $4) }'
}
# The smallest non-empty region of plan $1 clamped to [4 KiB, 64 KiB], from `tightfit report --json`.
limit() {
  "$tf" report "$1" --json | awk '/"regions": \{/ { inside = 1; next } inside && /\}/ { inside = 0 }
    inside { gsub(/[^0-9]/, "", $2); v = $2 + 0; if (v > 0 && (smallest == 0 || v < smallest)) smallest = v }
    END { print (smallest < 4096 ? 4096 : (smallest > 65536 ? 65536 : smallest)) }'
}
# train NAME PLAN ARGS...: runs `tightfit train PLAN ARGS` under the probe and judges its phases.
train() {
  name=$1 plan=$2
  shift 2
  # An uninstrumented probe ahead of a sanitizer runtime: see probe_client.h.
  env LD_PRELOAD="$probe" TF_PROBE_LOG=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$tf" train "$plan" "$@" > "$dir/out" 2> "$dir/err"
  code=$?
  grep -v '^alloc_probe:' "$dir/err"
  grep '^alloc_probe: phase .train' "$dir/err"
  check "$name: tightfit train exits 0" "[ $code -eq 0 ]"
  max=$(limit "$plan")
  set -- $(phase "$dir/err" "train: warm-up")
  warm_largest=${2:--1}
  set -- $(phase "$dir/err" "train: steps")
  steps_allocations=${1:--1} steps_largest=${2:--1}
  echo "$name: after the 2 warm-up steps $steps_allocations heap allocations; largest allocation after create" \
    "$warm_largest (warm-up), $steps_largest (steps); region-sized limit $max bytes"
  check "$name: no heap allocation in the steps after warm-up" "[ '$steps_allocations' = 0 ]"
  check "$name: no region-sized allocation after create" \
    "[ $warm_largest -ge 0 ] && [ $warm_largest -lt $max ] && [ $steps_largest -lt $max ]"
}

"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null && "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/mlp.tfplan" > /dev/null
train "mlp main job" "$dir/mlp.tfplan" --data models/data/digits/train --eval models/data/digits/test --steps 100 \
  --log-every 50 --checkpoint "$dir/mlp-checkpoint"
"$tf" zoo gpt --param layers=1 --param d_model=32 --param heads=2 -o "$dir/gpt.tfg" > /dev/null &&
  "$tf" compile "$dir/gpt.tfg" --set N=8,T=32 --lr 3e-3 -o "$dir/gpt.tfplan" > /dev/null
train "character gpt" "$dir/gpt.tfplan" --data models/data/text/train --steps 30 --json
train "character gpt, 1 thread" "$dir/gpt.tfplan" --data models/data/text/train --steps 10 --threads 1
finish
