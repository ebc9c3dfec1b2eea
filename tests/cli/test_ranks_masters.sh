#!/bin/sh
# bf16 parameters with f32 master weights (compile --param-dtype bf16) in data-parallel jobs (issue 45):
# the ranks sum f32 gradients; ZeRO shards the masters with the rest of the optimizer state, each
# owner updating its masters (or its range of a split one, drawn as that range of the whole) and
# writing and sending its range of the bf16 parameter. A job of 2 ranks at stages 1 and 2, and of 4
# ranks at stage 1 (with split parameters), trains to stage 0's losses and checkpoint byte for byte;
# 4 ranks at stage 2 to stage 0's losses within 1e-6 (the reduction's order differs); a stage-1 job
# resumes its own checkpoint (2 + 2 steps) onto the straight job's; with the state offloaded (where a
# Vulkan device is: lavapipe) 2 ranks end on the device job's checkpoint byte for byte. `check --ranks 8` of gpt2-small:
# per rank 2 bytes of parameter and 4 of gradient per parameter, and 12 / 8 bytes of masters and
# AdamW moments at stage 1 (each to 0.1%: the regions' alignment). SKIPs (exit 77) without mpirun or without MPI in the build.
# usage: test_ranks_masters.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
mpi="mpirun --allow-run-as-root --oversubscribe -np"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
data=models/data/text/train
losses() { # losses JSON_LOG: the step losses, one line
  sed -n 's/.*"loss": \([0-9.e+-]*\).*/\1/p' "$1" | tr '\n' ' '
}

"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
"$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --ranks 2 --param-dtype bf16 -o "$dir/probe.tfplan" \
  > /dev/null
"$tf" train "$dir/probe.tfplan" --data $data --steps 1 > "$dir/out" 2> "$dir/err"
if grep -q "this build has no MPI" "$dir/err"; then
  echo "SKIP: this build has no MPI: $(cat "$dir/err")"
  exit 77
fi
for ranks in 2 4; do
  for zero in 0 1 2; do
    plan="$dir/r${ranks}z$zero.tfplan"
    expect 0 "compile --ranks $ranks --zero $zero --param-dtype bf16" "$tf" compile "$dir/gpt.tfg" \
      --set N=$((4 / ranks)),T=32 --optimizer adamw --fuse-loss off --ranks $ranks --zero $zero --param-dtype bf16 \
      -o "$plan"
    expect 0 "$ranks ranks, stage $zero: 4 steps" $mpi $ranks "$tf" train "$plan" --data $data --steps 4 \
      --checkpoint "$dir/c${ranks}z$zero" --json
    losses "$dir/out" > "$dir/l${ranks}z$zero"
  done
  expect_message 0 "$ranks ranks: the report names the masters and the shards" "master weights: 16 bf16 parameters" \
    "$tf" report "$dir/r${ranks}z1.tfplan"
done
expect_message 0 "4 ranks: parameters split across ranks" "ZeRO stage 1 over 4 ranks: .*; [1-9][0-9]* parameters \
split across ranks" "$tf" report "$dir/r4z1.tfplan"
for case in 2z1 2z2 4z1; do
  ranks=${case%z*}
  check "$ranks ranks, stage ${case#*z}: stage 0's losses ($(cat "$dir/l$case")) and checkpoint, byte for byte" \
    "cmp -s '$dir/l${ranks}z0' '$dir/l$case' && cmp -s '$dir/c${ranks}z0/latest.safetensors' '$dir/c$case/latest.safetensors'"
done
/usr/bin/python3 - "$dir/l4z0" "$dir/l4z2" << 'PY' && pass "4 ranks, stage 2: stage 0's losses within 1e-6" || fail "4 ranks, stage 2: the losses"
import sys
a, b = ([float(x) for x in open(p).read().split()] for p in sys.argv[1:])
print(f"stage 0 {a}, stage 2 {b}")
assert len(a) == len(b) == 4 and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(a, b))
PY
expect 0 "2 ranks, stage 1: 2 steps" $mpi 2 "$tf" train "$dir/r2z1.tfplan" --data $data --steps 2 --checkpoint "$dir/resumed"
expect 0 "2 ranks, stage 1: --resume to 4 steps" $mpi 2 "$tf" train "$dir/r2z1.tfplan" --data $data --steps 4 \
  --checkpoint "$dir/resumed" --resume
check "2 + 2 steps across --resume: the straight job's checkpoint, byte for byte" \
  cmp -s "$dir/c2z1/latest.safetensors" "$dir/resumed/latest.safetensors"

# ZeRO-Offload: each rank's masters and moments in host memory, its updates and cast_into on the host
if "$tf" devices | grep -q '^vulkan:0'; then
  for name in device host; do
    extra=$([ $name = host ] && echo "--offload optimizer")
    # shellcheck disable=SC2086
    expect 0 "compile --ranks 2 --zero 1 --param-dtype bf16 $extra (vulkan)" "$tf" compile "$dir/gpt.tfg" \
      --set N=2,T=32 --optimizer adamw --target vulkan --fuse-loss off --ranks 2 --zero 1 --param-dtype bf16 $extra \
      -o "$dir/v_$name.tfplan"
    expect 0 "2 ranks on vulkan:0, the state on the $name: 4 steps" $mpi 2 "$tf" train "$dir/v_$name.tfplan" \
      --data $data --steps 4 --threads 1 --device vulkan:0 --checkpoint "$dir/cv_$name"
  done
  check "ZeRO-Offload with masters: the device job's checkpoint, byte for byte" \
    cmp -s "$dir/cv_device/latest.safetensors" "$dir/cv_host/latest.safetensors"
fi

"$tf" zoo gpt2-small -o "$dir/gpt2.tfg" > /dev/null
expect 0 "check gpt2-small --ranks 8 --zero 1 --param-dtype bf16 --json" "$tf" check "$dir/gpt2.tfg" --set N=8,T=1024 \
  --optimizer adamw --target cuda --budget 80GiB --ranks 8 --zero 1 --param-dtype bf16 --json
trained=$("$tf" inspect "$dir/gpt2.tfg" | sed -n 's/^parameters: \([0-9,]*\) in .*/\1/p' | tr -d ,)
/usr/bin/python3 - "$dir/out" "$trained" << 'PY' && pass "gpt2-small, 8 ranks, stage 1: 2Ψ parameters, 4Ψ gradients, 12Ψ/8 masters and moments" || fail "gpt2-small, 8 ranks: the per-rank model states"
import json, sys
c = json.load(open(sys.argv[1]))["categories"]
psi = int(sys.argv[2])
print(f"per rank: parameters {c['parameters'] / psi:.4f}Ψ, gradients {c['gradients'] / psi:.4f}Ψ, "
      f"state {c['optimizer_state'] / psi:.4f}Ψ; device total {c['total'] / 2**30:.3f} GiB")
assert 2 * psi <= c["parameters"] <= 2 * psi * 1.001 and 4 * psi <= c["gradients"] <= 4 * psi * 1.001  # alignment
assert 12 * psi / 8 <= c["optimizer_state"] <= 12 * psi / 8 * 1.001
PY
finish
