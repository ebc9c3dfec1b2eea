#!/bin/sh
# Offloaded optimizer state (issue 48 item 3): `compile --offload optimizer` for the vulkan target
# plans no optimizer state on the device (the region empty, the device total lower by it), states
# the host bytes and the bytes moved per step (text, JSON, report), and trains on Vulkan (lavapipe)
# to the same checkpoint, byte for byte, as the plan that keeps its state on the device, also across
# a checkpoint and --resume; --allow-offload lets the budget search choose it; the combinations it
# cannot serve are refused with the reason (exit 2).
# usage: test_offload.sh TIGHTFIT   (run from the repository root; the training part SKIPs without
# a Vulkan device)
tf=$1
. "$(dirname "$0")/harness.sh"
region() { # region OUTPUT NAME: a region's exact bytes from compile's text
  sed -n "s/^  $2 .*(\([0-9]*\) bytes)$/\1/p" "$1"
}
json() { # json FILE EXPRESSION: a field of a JSON file
  /usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($2)" "$1"
}

"$tf" zoo gpt --param layers=2 -o "$dir/gpt.tfg" > /dev/null
plan() { # plan NAME OPTION...: a vulkan-target AdamW plan of gpt at 4 x 64, text output in $dir/NAME.txt
  name=$1
  shift
  expect_message 0 "compile $*" "written to" "$tf" compile "$dir/gpt.tfg" --set N=4,T=64 --optimizer adamw \
    --target vulkan -o "$dir/$name.tfplan" "$@"
  cp "$dir/out" "$dir/$name.txt"
}
plan kept
plan offloaded --offload optimizer
state=$(region "$dir/kept.txt" optimizer_state) moved_state=$(region "$dir/offloaded.txt" optimizer_state)
total=$(region "$dir/kept.txt" "device total") offloaded_total=$(region "$dir/offloaded.txt" "device total")
echo "optimizer state on the device: $state -> $moved_state bytes; device total $total -> $offloaded_total bytes"
check "no optimizer state on the device" test "$moved_state" = 0 -a "${state:-0}" -gt 0
check "the device total is lower by the state, within a page of rounding ($total - $offloaded_total vs $state)" \
  test $((total - offloaded_total)) -ge $((state - 2097152)) -a $((total - offloaded_total)) -le $((state + 2097152))
check "the host line names the state's bytes and the bytes moved" \
  "grep -q '^  host memory .*($state bytes: the offloaded optimizer state; .* moved between device and host per step)' '$dir/offloaded.txt'"
expect 0 "compile --json" "$tf" compile "$dir/gpt.tfg" --set N=4,T=64 --optimizer adamw --target vulkan \
  --offload optimizer --json
cp "$dir/out" "$dir/offloaded.json"
# per step: every parameter and its gradient down, the parameter up again (the state stays on the host)
expected_moved=$(json "$dir/offloaded.json" "3 * d['regions']['parameters'] // 1")
check "JSON: host_bytes is the state ($state), host_moved_bytes_per_step 3 x the parameters (~$expected_moved)" \
  "[ \"\$(json '$dir/offloaded.json' \"d['host_bytes']\")\" = '$state' ] && \
   [ \"\$(json '$dir/offloaded.json' \"abs(d['host_moved_bytes_per_step'] - $expected_moved) < 65536\")\" = True ]"
expect_message 0 "report says where the state is" "host memory (offloaded optimizer state, not on the device)" \
  "$tf" report "$dir/offloaded.tfplan"
expect_message 0 "report's notes say what was offloaded" "optimizer state offloaded: .* MiB in host memory" \
  "$tf" report "$dir/offloaded.tfplan"

expect_message 2 "refused on the cpu target" "the cpu target's device memory is host memory already" \
  "$tf" compile "$dir/gpt.tfg" --offload optimizer --target cpu
expect_message 2 "refused with --update-in-backward" "cannot go with --update-in-backward" \
  "$tf" compile "$dir/gpt.tfg" --offload optimizer --target vulkan --update-in-backward
expect_message 2 "refused for an inference plan" "an inference plan has no optimizer state" \
  "$tf" compile "$dir/gpt.tfg" --offload optimizer --target vulkan --inference
expect_message 2 "--offload takes optimizer" "--offload takes optimizer" \
  "$tf" compile "$dir/gpt.tfg" --offload activations --target vulkan

# --allow-offload: where nothing fits with the state on the device, the search offloads it and says so.
expect 1 "gpt at global batch 8 in 276 MiB of Vulkan: nothing fits" "$tf" check "$dir/gpt.tfg" --target vulkan \
  --optimizer adamw --set T=64 --global-batch 8 --budget 276MiB
expect 0 "with --allow-offload it fits" "$tf" check "$dir/gpt.tfg" --target vulkan --optimizer adamw --set T=64 \
  --global-batch 8 --budget 276MiB --allow-offload
check "the verdict names the offloaded state" "grep -q 'fits: .*, with the optimizer state in host memory (--offload)' '$dir/out'"
check "the search says what it saved" \
  "grep -q 'with it in host memory (--allow-offload) it fits:' '$dir/out' && grep -q 'offloading saved .* MiB of device memory' '$dir/out'"
expect_message 2 "--allow-offload on the cpu target" "the cpu target's device memory is host memory already" \
  "$tf" check "$dir/gpt.tfg" --target cpu --set T=64 --global-batch 8 --budget 1MiB --allow-offload
expect_message 2 "--allow-offload without --global-batch" "give --global-batch G" \
  "$tf" check "$dir/gpt.tfg" --target vulkan --budget 276MiB --allow-offload

if ! "$tf" devices | grep -q '^vulkan:0'; then
  echo "SKIP: no Vulkan device: the offloaded plan is not trained here"
  finish test_offload
fi
# lavapipe, unloaded at exit, leaves a block no LeakSanitizer suppression can name (an unknown module):
# the sanitizer build's leak check is off for the runs on it (its other checks stay)
vk="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
for name in kept offloaded; do
  expect_message 0 "train the $name plan 6 steps on vulkan:0" "trained 6 steps" $vk "$tf" train "$dir/$name.tfplan" \
    --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_$name"
done
check "train says where the state was" "grep -q '^host memory: 3.40 MiB of optimizer state, updated on the host' '$dir/out'"
check "the offloaded plan trains to the same checkpoint (weights and AdamW state), byte for byte" \
  cmp "$dir/ck_kept/latest.safetensors" "$dir/ck_offloaded/latest.safetensors"
expect_message 0 "train the offloaded plan 3 steps" "trained 3 steps" $vk "$tf" train "$dir/offloaded.tfplan" \
  --data models/data/text/train --steps 3 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_resumed"
expect_message 0 "resume it for 3 more" "resumed from" $vk "$tf" train "$dir/offloaded.tfplan" \
  --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_resumed" --resume
check "3 + 3 resumed steps with the state in host memory end on the same checkpoint" \
  cmp "$dir/ck_kept/latest.safetensors" "$dir/ck_resumed/latest.safetensors"
finish test_offload
