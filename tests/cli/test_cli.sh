#!/bin/sh
# The command line end to end: exit codes of compile / check / train / run, the README's accuracy
# claim, and exact resume (100 steps + resume to 200 == 200 steps, checkpoints byte for byte).
# usage: test_cli.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"

expect 0 "zoo mlp" "$tf" zoo mlp -o "$dir/mlp.tfg"
expect 0 "compile" "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/mlp.tfplan"
expect 2 "compile: unknown option" "$tf" compile "$dir/mlp.tfg" --bogus
expect 2 "compile: missing file" "$tf" compile "$dir/none.tfg"
expect 2 "compile: unknown symbol" "$tf" compile "$dir/mlp.tfg" --set Q=3
expect 0 "check: fits in 1MiB" "$tf" check "$dir/mlp.tfg" --set N=32 --budget 1MiB
grep -q "fits" "$dir/out" && passed=$((passed + 1)) || fail "check did not say fits"
expect 1 "check: does not fit in 100KB" "$tf" check "$dir/mlp.tfg" --set N=32 --budget 100KB
grep -q "short by" "$dir/out" && passed=$((passed + 1)) || fail "check gave no shortfall"
expect 0 "check: search fits" "$tf" check "$dir/mlp.tfg" --budget 1MiB --global-batch 64
grep -q "micro-batch 64 x 1" "$dir/out" && passed=$((passed + 1)) || { fail "search choice"; cat "$dir/out"; }
expect 1 "check: search finds nothing" "$tf" check "$dir/mlp.tfg" --budget 200KB --global-batch 64
grep -q "smallest plan found" "$dir/out" && passed=$((passed + 1)) || fail "no smallest plan"
expect 0 "check: search --json" "$tf" check "$dir/mlp.tfg" --budget 1MiB --global-batch 64 --json
grep -q '"fits": true' "$dir/out" && passed=$((passed + 1)) || fail "json fits"
expect 2 "check: global batch and N both" "$tf" check "$dir/mlp.tfg" --budget 1MiB --global-batch 64 --set N=4
expect 2 "check: global batch 0" "$tf" check "$dir/mlp.tfg" --budget 1MiB --global-batch 0
expect 2 "compile: remat auto without budget" "$tf" compile "$dir/mlp.tfg" --remat auto
expect 0 "compile: remat checkpoints" "$tf" compile "$dir/mlp.tfg" --remat checkpoints --set N=32
expect 2 "check: bad size" "$tf" check "$dir/mlp.tfg" --budget 12XB
expect 2 "check: no budget" "$tf" check "$dir/mlp.tfg"
expect 2 "train: missing data" "$tf" train "$dir/mlp.tfplan" --steps 3
expect 2 "train: data of another model" "$tf" train "$dir/mlp.tfplan" --steps 3 --data models/data/text/train
expect 2 "report: not a plan" "$tf" report "$dir/mlp.tfg"

# Memory: the backend's own count here; the allocation probe measures the same run from outside
# (tests/alloc_probe/train_flat.sh, ctest alloc_probe_train_cli).
expect 0 "train 300 steps on digits" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train \
  --eval models/data/digits/test --steps 300 --json
accuracy=$(sed -n 's/.*"eval_accuracy": \([0-9.]*\).*/\1/p' "$dir/out")
echo "held-out accuracy after 300 steps: $accuracy"
check "held-out accuracy >= 0.95" "awk 'BEGIN { exit !($accuracy >= 0.95) }'"
grep -q '"allocations_after_create": 0' "$dir/out" && passed=$((passed + 1)) || fail "allocations after create"

expect 0 "train 200 steps straight" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 200 \
  --checkpoint "$dir/straight"
expect 0 "train 100 steps" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 100 \
  --checkpoint "$dir/split"
expect 0 "resume to step 200" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 200 \
  --checkpoint "$dir/split" --resume
check "resumed checkpoint == straight checkpoint, byte for byte" \
  "cmp -s '$dir/straight/latest.safetensors' '$dir/split/latest.safetensors'"
expect 2 "resume without a checkpoint" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 1 \
  --checkpoint "$dir/nothing" --resume

# A character GPT on the GPL text: the loss must fall.
expect 0 "zoo gpt" "$tf" zoo gpt --param layers=1 --param d_model=32 --param heads=2 -o "$dir/gpt.tfg"
expect 0 "compile gpt" "$tf" compile "$dir/gpt.tfg" --set N=8,T=32 --lr 3e-3 -o "$dir/gpt.tfplan"
expect 0 "train gpt on text" "$tf" train "$dir/gpt.tfplan" --data models/data/text/train --steps 60 --json
first=$(sed -n '1s/.*"loss": \([0-9.]*\).*/\1/p' "$dir/out")
last=$(sed -n 's/.*"final_loss": \([0-9.]*\).*/\1/p' "$dir/out")
echo "gpt char model: loss $first at step 1 -> $last after 60 steps"
check "gpt loss falls by at least 25%" "awk 'BEGIN { exit !($last < 0.75 * $first) }'"

expect 0 "compile inference" "$tf" compile "$dir/mlp.tfg" --inference --set N=40 -o "$dir/infer.tfplan"
expect 0 "run with weights" "$tf" run "$dir/infer.tfplan" --data models/data/digits/test \
  --weights "$dir/straight/latest.safetensors" --output "$dir" --json
check "run wrote logits.npy" "[ -s '$dir/logits.npy' ]"
expect 2 "train an inference plan" "$tf" train "$dir/infer.tfplan" --data models/data/digits/train --steps 1
# Listing Vulkan devices loads and unloads the driver; lavapipe leaks a small cache that LeakSanitizer
# then reports from an unloaded ("unknown") module, which no suppression can name. Leak checks of
# tightfit's own code run in every other command here and in the Vulkan suite.
expect 0 "devices" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$tf" devices
grep -q "^cpu:0" "$dir/out" && passed=$((passed + 1)) || fail "devices lists no cpu"
cp "$dir/out" "$dir/devices.out"
check "devices names the CPU's BLAS and its kernels" 'grep -Eq "^cpu:0 .*OpenBLAS [0-9.]+, [A-Za-z0-9_]+ kernels" "$dir/out"'
# The subgroup probe (backends/vulkan/vk_subgroup_probe.c) as devices shows it: lavapipe's 8 lanes
# pass it; at LP_NATIVE_VECTOR_WIDTH=1024 lavapipe reports 32 but runs 16, and the line says the
# subgroup shaders are off and why.
if grep -q "^vulkan:0  llvmpipe" "$dir/out"; then
  check "devices: lavapipe's subgroups pass the probe" 'grep -q "^vulkan:0 .*; subgroups of 8; " "$dir/out"'
  expect 0 "devices with lavapipe's vectors 1024 bits wide" env LP_NATIVE_VECTOR_WIDTH=1024 \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$tf" devices
  check "devices: subgroups reported as 32 but run 16 wide are refused, with the reason" \
    'grep -q "^vulkan:0 .*subgroups of 32 (subgroup shaders off: the driver reports subgroups of 32, but invocation" "$dir/out"'
fi
# OpenBLAS's core forced to a 256-bit one (OPENBLAS_CORETYPE=Haswell, as some machines' environments
# set): on a CPU with AVX-512 the line says so and how to widen it; with SkylakeX forced, no hint.
avx512=no
for flag in avx512f avx512bw avx512dq avx512vl; do grep -qw "$flag" /proc/cpuinfo || avx512=absent; done
[ "$avx512" = absent ] || avx512=yes
expect 0 "devices with OpenBLAS forced to Haswell" env OPENBLAS_CORETYPE=Haswell \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" VK_ICD_FILENAMES=/nonexistent.json \
  VK_DRIVER_FILES=/nonexistent.json "$tf" devices
if [ "$avx512" = yes ]; then
  check "devices: Haswell kernels forced on an AVX-512 CPU are named, with the fix" \
    'grep -q "^cpu:0 .*Haswell kernels (OPENBLAS_CORETYPE=Haswell); this CPU has AVX-512.*unset OPENBLAS_CORETYPE" "$dir/out"'
  expect 0 "devices with OpenBLAS forced to SkylakeX" env OPENBLAS_CORETYPE=SkylakeX \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" VK_ICD_FILENAMES=/nonexistent.json \
    VK_DRIVER_FILES=/nonexistent.json "$tf" devices
  check "devices: 512-bit kernels get no hint" \
    'grep -q "^cpu:0 .*SkylakeX kernels (OPENBLAS_CORETYPE=SkylakeX))$" "$dir/out"'
else
  check "devices: no AVX-512 on this CPU, so no hint beside Haswell" \
    'grep "^cpu:0" "$dir/out" | grep -v -q "AVX-512"'
fi
# No Vulkan driver (the loader finds no ICD): listed as unavailable with the reason; training on it
# fails at session creation with the reason, before any step.
expect 0 "devices without a Vulkan driver" env VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$tf" devices
check "devices names the missing driver" 'grep -q "^vulkan: unavailable: no Vulkan 1.1 driver" "$dir/out"'
# The same as JSON: each line of the text one entry; a device has its description, a backend
# without one why (the JSON parsed here, the lines compared with the text output).
expect 0 "devices --json without a Vulkan driver" env VK_ICD_FILENAMES=/nonexistent.json \
  VK_DRIVER_FILES=/nonexistent.json ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$tf" devices --json
check "devices --json: cpu:0 available, vulkan unavailable with the reason, one entry per text line" \
  "/usr/bin/python3 -c \"
import json, sys
d = json.load(open('$dir/out'))['devices']
text = [l for l in open('$dir/devices.out').read().splitlines() if l]
assert len(d) == len(text), (len(d), len(text))
assert d[0] == {'device': 'cpu:0', 'backend': 'cpu', 'available': True, 'description': d[0]['description']}, d[0]
vk = [e for e in d if e['backend'] == 'vulkan']
assert len(vk) == 1 and not vk[0]['available'] and vk[0]['why'].startswith('no Vulkan 1.1 driver'), vk
assert all(('description' in e) == e['available'] and ('why' in e) != e['available'] for e in d), d
\""
expect 2 "devices: an unknown option" "$tf" devices --json --all
expect 2 "train without a Vulkan driver" env VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json \
  "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 1 --device vulkan:0
check "train names the missing driver" 'grep -q "no Vulkan 1.1 driver" "$dir/err"'
# On a Vulkan device (lavapipe in CI): the session's memory and what the device measured.
if grep -q "^vulkan:0" "$dir/devices.out" 2>/dev/null; then
  expect 0 "compile for vulkan" "$tf" compile "$dir/mlp.tfg" --target vulkan --set N=32 -o "$dir/mlp_vk.tfplan"
  expect 0 "train on vulkan:0" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    "$tf" train "$dir/mlp_vk.tfplan" --data models/data/digits/train --steps 5 --device vulkan:0
  check "train on vulkan prints the device's measure" \
    'grep -q "^device memory: regions .*, backend overhead 8.00 MiB" "$dir/out"'
else
  echo "skip: no Vulkan device, the device-memory line is not checked"
fi
expect 2 "train: bad device" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 1 --device vulkan:x
expect 2 "train: unknown backend" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 1 --device tpu:0
for command in zoo inspect dump compile check report train run devices; do
  expect 0 "$command --help" "$tf" "$command" --help
done
finish
