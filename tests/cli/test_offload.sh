#!/bin/sh
# Offloaded optimizer state (issue 48 item 3): `compile --offload optimizer` for the vulkan target
# plans no optimizer state on the device (the region empty, the device total lower by it), states
# the host bytes and the bytes moved per step (text, JSON, report), and trains on Vulkan (lavapipe)
# to the same checkpoint, byte for byte, as the plan that keeps its state on the device, also across
# a checkpoint and --resume; --allow-offload lets the budget search choose it; the combinations it
# cannot serve are refused with the reason (exit 2). `--offload gradients` also plans no gradients on
# the device (host steps add each part to its gradient in host memory, with every micro-batch) and
# trains to the device plan's losses (to 5e-6) and weights (to 2e-5: the parts are summed in another
# order; 2026-12-02: 1e-6 and 2.9e-6), with one micro-batch and with two and clipping, and across --resume byte for byte;
# --allow-offload takes it where offloading the state alone does not fit. `--offload activations` keeps
# the activations saved for the backward pass in host memory between the passes (the arena smaller)
# and trains to the checkpoint of the plan without it byte for byte (the copies move bytes only), also
# with recompute's checkpoints, bf16 storage and 2 micro-batches, and beside offloaded gradients. A job
# of 2 ranks (mpirun, where the build has MPI) sums gradients that lie in host memory to the losses of
# the job without offloading. bf16 parameters with f32 masters (--param-dtype bf16): with the state
# offloaded the device plan's checkpoint byte for byte, with the gradients too its losses and weights.
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

same_training() { # same_training A B STEPS WHAT: runs A and B ($dir/NAME.json, $dir/ck_NAME) give the same
  # STEPS losses (to 5e-6) and weights (to 2e-5: offloaded gradients sum their parts in another order)
  /usr/bin/python3 - "$dir" "$1" "$2" "$3" << 'PY' && passed=$((passed + 1)) || fail "$4"
import json, struct, sys
import numpy as np
d, first, second, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def losses(name):
    return [json.loads(line)["loss"] for line in open(f"{d}/{name}.json") if line.startswith('{"step"')]
def weights(name):
    data = open(f"{d}/ck_{name}/latest.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    def values(v):  # f32, or bf16 widened (bf16 parameters with their f32 masters)
        raw = body[v["data_offsets"][0]:v["data_offsets"][1]]
        if v["dtype"] == "BF16":
            return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        return np.frombuffer(raw, dtype=np.float32)
    return {k: values(v) for k, v in header.items() if k != "__metadata__" and not k.startswith("adam")}
a, b = losses(first), losses(second)
wa, wb = weights(first), weights(second)
loss = max(abs(x - y) for x, y in zip(a, b))
weight = max(float(np.max(np.abs(wa[k] - wb[k]))) for k in wa)
print(f"{second} vs {first}: losses {b} vs {a}, worst {loss:.2g}; weights worst {weight:.2g} over {len(wa)} tensors")
assert len(a) == len(b) == steps and loss <= 5e-6 and weight <= 2e-5 and sorted(wa) == sorted(wb)
PY
}

"$tf" zoo gpt --param layers=2 -o "$dir/gpt.tfg" > /dev/null
plan() { # plan NAME OPTION...: a vulkan-target AdamW plan of gpt at 2 x 32 (small: every plan below trains on lavapipe), text output in $dir/NAME.txt
  name=$1
  shift
  expect_message 0 "compile $*" "written to" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
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
expect 0 "compile --json" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --target vulkan \
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
  "$tf" compile "$dir/gpt.tfg" --offload weights --target vulkan

plan gradients --offload gradients
check "no gradients and no optimizer state on the device" \
  test "$(region "$dir/gradients.txt" gradients)" = 0 -a "$(region "$dir/gradients.txt" optimizer_state)" = 0
check "the host line says what lies there" \
  "grep -q '^  host memory .* bytes: the offloaded gradients and optimizer state; .* moved between device and host per step)' '$dir/gradients.txt'"
grads=$(region "$dir/kept.txt" gradients) gradients_total=$(region "$dir/gradients.txt" "device total")
check "the device total is lower by the state and the gradients, within two pages ($total - $gradients_total)" \
  test $((total - gradients_total)) -ge $((state + grads - 4194304))
expect_message 0 "report says where the gradients are" \
  "host memory (offloaded gradients and optimizer state, not on the device).*with each micro-batch" \
  "$tf" report "$dir/gradients.tfplan"
plan kept2 --accumulate 2 --clip 1.0
plan gradients2 --accumulate 2 --clip 1.0 --offload gradients
plan kept_k2 --accumulate 2
plan offloaded2 --accumulate 2 --offload optimizer
expect 0 "compile offloaded2 --json" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --target vulkan \
  --accumulate 2 --offload optimizer --json
cp "$dir/out" "$dir/offloaded2.json"
# two micro-batches: the gradients' zeroing stays on the device (no host step uploads zeros), so a
# step still moves each parameter down and up and its gradient down, as with one
expected_moved2=$(json "$dir/offloaded2.json" "3 * d['regions']['parameters'] // 1")
check "2 micro-batches: host_moved_bytes_per_step still 3 x the parameters (~$expected_moved2)" \
  "[ \"\$(json '$dir/offloaded2.json' \"abs(d['host_moved_bytes_per_step'] - $expected_moved2) < 65536\")\" = True ]"
expect_message 0 "report: two micro-batches, the accumulations run with each" "gradients and optimizer state offloaded" \
  "$tf" report "$dir/gradients2.tfplan"
expect_message 2 "--offload gradients refused on the cpu target" "--offload gradients: the cpu target's device memory" \
  "$tf" compile "$dir/gpt.tfg" --offload gradients --target cpu
expect_message 2 "--offload gradients refused for an inference plan" "an inference plan has no gradients" \
  "$tf" compile "$dir/gpt.tfg" --offload gradients --target vulkan --inference
plan activations --offload activations
arena=$(region "$dir/kept.txt" arena) moved_arena=$(region "$dir/activations.txt" arena)
check "the arena is smaller with the activations in host memory ($arena -> $moved_arena bytes)" \
  test "$moved_arena" -lt "$arena"
check "the host line says the activations lie there" \
  "grep -q '^  host memory .* bytes: the offloaded activations; .* moved between device and host per step)' '$dir/activations.txt'"
plan remat --remat checkpoints
plan remat_activations --remat checkpoints --offload activations
plan bf16 --precision bf16 --accumulate 2
plan bf16_activations --precision bf16 --accumulate 2 --offload activations
plan gradients_activations --offload gradients,activations
check "activations, gradients and state: the host line names all three" \
  "grep -q 'the offloaded activations, gradients and optimizer state' '$dir/gradients_activations.txt'"
expect_message 2 "--offload activations refused for an inference plan" "keeps no activation for a backward pass" \
  "$tf" compile "$dir/gpt.tfg" --offload activations --target vulkan --inference
expect_message 2 "--offload activations refused on the cpu target" "--offload activations: the cpu target's device memory" \
  "$tf" compile "$dir/gpt.tfg" --offload activations --target cpu
expect_message 2 "--offload with a word it does not know in its list" "or a comma list of them, got 'gradients,weights'" \
  "$tf" compile "$dir/gpt.tfg" --offload gradients,weights --target vulkan

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
# a wider gpt (6.5 M parameters) in 320 MiB: the state in host memory is not enough, the gradients too fit
"$tf" zoo gpt --param layers=2 --param d_model=512 -o "$dir/wide.tfg" > /dev/null
expect 0 "with --allow-offload the wide gpt fits 320 MiB" "$tf" check "$dir/wide.tfg" --target vulkan --optimizer adamw \
  --set T=64 --global-batch 8 --budget 320MiB --allow-offload
check "the verdict names the offloaded gradients" \
  "grep -q 'fits: .*, with the gradients and optimizer state in host memory (--offload)' '$dir/out'"
check "the search says the state alone did not fit, the gradients too did" \
  "grep -q 'with it in host memory (--allow-offload) it does not fit either' '$dir/out' && \
   grep -q 'with them in host memory (--allow-offload) it fits:' '$dir/out'"
# At ZeRO stage 1 the search goes on from the state to the gradients, which the ranks sum in host memory.
expect 0 "ZeRO 1 with --allow-offload: the wide gpt fits 320 MiB" "$tf" check "$dir/wide.tfg" --target vulkan \
  --optimizer adamw --ranks 2 --zero 1 --set T=256 --global-batch 16 --budget 320MiB --allow-offload
check "ZeRO 1: the search offloads the gradients after the state, and the verdict names them" \
  "grep -q 'nothing fits with the gradients on the device: with them in host memory (--allow-offload) it fits:' \
'$dir/out' && grep -q 'fits: .*, with the gradients and optimizer state in host memory (--offload)' '$dir/out'"
# At stage 2 too (the shards of the gradients in host memory, the buckets on the device).
expect 0 "ZeRO 2 with --allow-offload: the wide gpt fits 320 MiB" "$tf" check "$dir/wide.tfg" --target vulkan \
  --optimizer adamw --ranks 2 --zero 2 --set T=256 --global-batch 16 --budget 320MiB --allow-offload
check "ZeRO 2: the search offloads the gradients' shards after the state, and the verdict names them" \
  "grep -q 'nothing fits with the gradients on the device: with them in host memory (--allow-offload) it fits:' \
'$dir/out' && grep -q 'fits: .*, with the gradients and optimizer state in host memory (--offload)' '$dir/out'"

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
check "train says where the state was" "grep -q '^host memory: 3.40 MiB of optimizer state, [0-9]* steps run on the host' '$dir/out'"
check "the offloaded plan trains to the same checkpoint (weights and AdamW state), byte for byte" \
  cmp "$dir/ck_kept/latest.safetensors" "$dir/ck_offloaded/latest.safetensors"
# (not with --clip: the host's norm sums in another order than the shader's, so the weights differ in
# their last bits)
for name in kept_k2 offloaded2; do
  expect_message 0 "train the $name plan 6 steps on vulkan:0" "trained 6 steps" $vk "$tf" train "$dir/$name.tfplan" \
    --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_$name"
done
check "2 micro-batches, the state offloaded (the gradients zeroed on the device): the same checkpoint, byte for byte" \
  cmp "$dir/ck_kept_k2/latest.safetensors" "$dir/ck_offloaded2/latest.safetensors"
expect_message 0 "train the offloaded plan 3 steps" "trained 3 steps" $vk "$tf" train "$dir/offloaded.tfplan" \
  --data models/data/text/train --steps 3 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_resumed"
expect_message 0 "resume it for 3 more" "resumed from" $vk "$tf" train "$dir/offloaded.tfplan" \
  --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_resumed" --resume
check "3 + 3 resumed steps with the state in host memory end on the same checkpoint" \
  cmp "$dir/ck_kept/latest.safetensors" "$dir/ck_resumed/latest.safetensors"

# the gradients in host memory: 6 steps beside the device plan's, with 1 and with 2 micro-batches
for name in gradients kept2 gradients2; do
  expect_message 0 "train the $name plan 6 steps on vulkan:0" '"steps": 6' $vk "$tf" train "$dir/$name.tfplan" \
    --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_$name" --json
  cp "$dir/out" "$dir/$name.json"
done
$vk "$tf" train "$dir/kept.tfplan" --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --json \
  > "$dir/kept.json" 2>&1
for pair in kept:gradients kept2:gradients2; do
  same_training "${pair%%:*}" "${pair#*:}" 6 "offloaded gradients ($pair) against the device plan"
done
expect_message 0 "train the offloaded gradients 3 steps" "trained 3 steps" $vk "$tf" train "$dir/gradients2.tfplan" \
  --data models/data/text/train --steps 3 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_gradients_resumed"
expect_message 0 "resume them for 3 more" "resumed from" $vk "$tf" train "$dir/gradients2.tfplan" \
  --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_gradients_resumed" --resume
check "3 + 3 resumed steps with the gradients in host memory end on the 6 steps' checkpoint" \
  cmp "$dir/ck_gradients2/latest.safetensors" "$dir/ck_gradients_resumed/latest.safetensors"

# the activations in host memory: the same checkpoint as the plan without them, byte for byte
for name in activations remat remat_activations bf16 bf16_activations gradients_activations; do
  expect_message 0 "train the $name plan 6 steps on vulkan:0" "trained 6 steps" $vk "$tf" train "$dir/$name.tfplan" \
    --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_$name"
  cp "$dir/out" "$dir/$name.train.txt"
done
# the copies are the backend's, recorded among its steps: the host runs none of them; with
# TIGHTFIT_HOST_COPIES=host the runtime runs them between device runs, to the same bytes
check "vulkan runs the activations' copies among its steps (none on the host)" \
  "grep -q '^host memory: .* of activations, 0 steps run on the host, [1-9][0-9]* copies by the device' \
'$dir/activations.train.txt'"
check "with the gradients in host memory too, only their steps run on the host" \
  "grep -q 'steps run on the host, [1-9][0-9]* copies by the device' '$dir/gradients_activations.train.txt'"
# the profile times those copies apart from the steps (TIGHTFIT_VULKAN_PROFILE's own line), as many as
# train says the device runs
copies=$(sed -n 's/.* \([0-9]*\) copies by the device among its steps.*/\1/p' "$dir/activations.train.txt")
expect 0 "the activations plan profiled" env TIGHTFIT_VULKAN_PROFILE="$dir/activations.profile" $vk "$tf" train \
  "$dir/activations.tfplan" --data models/data/text/train --steps 2 --threads 1 --device vulkan:0
check "the profile's host copies: $copies recorded, timed apart from the steps" \
  "grep -Eq '^# host copies: $copies recorded among the steps, [0-9.]+ ms in all' '$dir/activations.profile' &&
   ! grep -q '^# host copies: .* 0.000 ms' '$dir/activations.profile'"
expect_message 0 "the recorded copies under the validation layer's synchronisation checks" "trained 2 steps" \
  env TIGHTFIT_VULKAN_VALIDATION=1 $vk "$tf" train "$dir/gradients_activations.tfplan" \
  --data models/data/text/train --steps 2 --threads 1 --device vulkan:0
expect_message 2 "TIGHTFIT_HOST_COPIES takes device or host" "TIGHTFIT_HOST_COPIES is 'hots': 'device'" \
  env TIGHTFIT_HOST_COPIES=hots $vk "$tf" train "$dir/activations.tfplan" --data models/data/text/train --steps 1 \
  --threads 1 --device vulkan:0
for name in activations remat_activations bf16_activations gradients_activations; do
  expect_message 0 "train the $name plan with the runtime's copies" "[1-9][0-9]* steps run on the host;" \
    env TIGHTFIT_HOST_COPIES=host $vk "$tf" train "$dir/$name.tfplan" --data models/data/text/train --steps 6 \
    --threads 1 --device vulkan:0 --checkpoint "$dir/ck_${name}_host"
  check "$name: the device's copies and the runtime's end on the same checkpoint" \
    cmp "$dir/ck_$name/latest.safetensors" "$dir/ck_${name}_host/latest.safetensors"
done
check "activations in host memory: the device plan's checkpoint" \
  cmp "$dir/ck_kept/latest.safetensors" "$dir/ck_activations/latest.safetensors"
check "recompute's checkpoints in host memory: the recompute plan's checkpoint" \
  cmp "$dir/ck_remat/latest.safetensors" "$dir/ck_remat_activations/latest.safetensors"
check "bf16-stored activations of 2 micro-batches in host memory: the bf16 plan's checkpoint" \
  cmp "$dir/ck_bf16/latest.safetensors" "$dir/ck_bf16_activations/latest.safetensors"
check "activations and gradients in host memory: the offloaded gradients' checkpoint" \
  cmp "$dir/ck_gradients/latest.safetensors" "$dir/ck_gradients_activations/latest.safetensors"

# bf16 parameters with f32 masters (--param-dtype bf16): the masters, moments and updates on the host,
# the bf16 gradients down and each parameter (written from its master by cast_into there) up
plan kept_bf16 --param-dtype bf16
plan offloaded_bf16 --param-dtype bf16 --offload optimizer
plan gradients_bf16 --param-dtype bf16 --offload gradients
for name in kept_bf16 offloaded_bf16 gradients_bf16; do
  expect_message 0 "train the $name plan 6 steps on vulkan:0" '"steps": 6' $vk "$tf" train "$dir/$name.tfplan" \
    --data models/data/text/train --steps 6 --threads 1 --device vulkan:0 --checkpoint "$dir/ck_$name" --json
  cp "$dir/out" "$dir/$name.json"
done
check "bf16 parameters, their masters and state in host memory: the device plan's checkpoint, byte for byte" \
  cmp "$dir/ck_kept_bf16/latest.safetensors" "$dir/ck_offloaded_bf16/latest.safetensors"
same_training kept_bf16 gradients_bf16 6 "bf16 parameters with the gradients in host memory against the device plan"

# a data-parallel job with its gradients in host memory: the ranks sum them there (tools/dist.c reads
# and writes them through the session), to the job's losses and weights without offloading
"$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --target vulkan --ranks 2 -o "$dir/probe.tfplan" > /dev/null
if command -v mpirun > /dev/null && ! "$tf" train "$dir/probe.tfplan" --data models/data/text/train --steps 1 2>&1 |
  grep -q "this build has no MPI"; then
  mpi="mpirun --allow-run-as-root --oversubscribe -np 2"
  for name in ranks ranks_gradients; do
    extra=$([ $name = ranks_gradients ] && echo "--offload gradients")
    # shellcheck disable=SC2086
    expect 0 "compile $name" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --target vulkan --ranks 2 \
      --fuse-loss off $extra -o "$dir/$name.tfplan"
    expect_message 0 "2 ranks train $name" '"steps": 4' env ASAN_OPTIONS=detect_leaks=0 $mpi "$tf" train \
      "$dir/$name.tfplan" --data models/data/text/train --steps 4 --threads 1 --device vulkan:0 --json \
      --checkpoint "$dir/ck_$name"
    cp "$dir/out" "$dir/$name.json"
  done
  same_training ranks ranks_gradients 4 "2 ranks with offloaded gradients against 2 without"
fi
finish test_offload
