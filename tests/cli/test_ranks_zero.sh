#!/bin/sh
# ZeRO stage 1 (issue 45 item 2): `compile --ranks R --zero 1` shards the optimizer state across the
# ranks (each update and its state held by the rank that owns the parameter; the state region the
# largest shard, about 1/R of the whole); `check --ranks R --zero 1` says so without running. A job
# of 2 and of 4 ranks trains to the losses and the checkpoint of the same job at ZeRO stage 0 byte for
# byte (the same sums, each update run once by its owner, the parameter sent to the others; rank 0
# gathers the shards into the checkpoint), with --checkpoint-every too; 3 + 3 steps across --resume
# (each rank loads its shard) end on the 6 steps' checkpoint; a stage-0 job or one process resumes a
# stage-1 checkpoint. Refused with the reason: --zero without --ranks, --zero 2, --zero with --offload,
# --checkpoint-every-minutes. SKIPs (exit 77) without mpirun or without MPI in the build.
# usage: test_ranks_zero.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
mpi="mpirun --allow-run-as-root --oversubscribe -np"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
data=models/data/text/train
region() { # region OUTPUT NAME: a region's exact bytes from compile's text
  sed -n "s/^  $2 .*(\([0-9]*\) bytes)$/\1/p" "$1"
}

"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
for ranks in 2 4; do
  for zero in 0 1; do
    expect 0 "compile --ranks $ranks --zero $zero" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
      --fuse-loss off --ranks $ranks --zero $zero -o "$dir/r${ranks}z$zero.tfplan"
    cp "$dir/out" "$dir/r${ranks}z$zero.txt"
  done
  whole=$(region "$dir/r${ranks}z0.txt" optimizer_state) shard=$(region "$dir/r${ranks}z1.txt" optimizer_state)
  check "$ranks ranks: each holds at most its share of the state and a parameter's more ($shard of $whole bytes)" \
    test "$shard" -lt "$whole" -a "$shard" -le $((whole / ranks + 131072))
done
"$tf" train "$dir/r2z1.tfplan" --data $data --steps 1 > "$dir/out" 2> "$dir/err"
if grep -q "this build has no MPI" "$dir/err"; then
  echo "SKIP: this build has no MPI: $(cat "$dir/err")"
  exit 77
fi
expect_message 0 "report: the shards" "ZeRO stage 1 over 2 ranks: .* updates sharded; optimizer state .* MiB per rank" \
  "$tf" report "$dir/r2z1.tfplan"
expect_message 0 "check --ranks 8 --zero 1 answers without running" "fits" "$tf" check "$dir/gpt.tfg" --set N=2,T=32 \
  --ranks 8 --zero 1 --budget 64MiB

job() { # job RANKS PLAN NAME STEPS [ARGS]: a job's 6 steps' JSON in $dir/NAME.json, checkpoint in $dir/ck_NAME
  ranks=$1 plan=$2 name=$3 steps=$4
  shift 4
  expect 0 "$ranks ranks: train $plan ($name, $steps steps)" $mpi "$ranks" "$tf" train "$dir/$plan.tfplan" --data $data \
    --steps "$steps" --threads 1 --json --checkpoint "$dir/ck_$name" "$@"
  grep '"step"' "$dir/out" | sed 's/, "samples_per_second".*//' > "$dir/$name.json"
}
job 2 r2z0 z0 6
job 2 r2z1 z1 6 --checkpoint-every 2
check "2 ranks: ZeRO 1 and 0 give the same losses" cmp "$dir/z0.json" "$dir/z1.json"
check "2 ranks: ZeRO 1 gathers the checkpoint of ZeRO 0, byte for byte" \
  cmp "$dir/ck_z0/latest.safetensors" "$dir/ck_z1/latest.safetensors"
job 4 r4z0 four0 4
job 4 r4z1 four1 4
check "4 ranks: the same losses" cmp "$dir/four0.json" "$dir/four1.json"
check "4 ranks: the same checkpoint, byte for byte" \
  cmp "$dir/ck_four0/latest.safetensors" "$dir/ck_four1/latest.safetensors"

job 2 r2z1 half 3
cp -r "$dir/ck_half" "$dir/ck_resumed"
cp -r "$dir/ck_half" "$dir/ck_stage0"
job 2 r2z1 resumed 6 --resume
check "ZeRO 1: 3 + 3 steps across --resume (each rank loads its shard) end on the 6 steps' checkpoint" \
  cmp "$dir/ck_z1/latest.safetensors" "$dir/ck_resumed/latest.safetensors"
job 2 r2z0 stage0 6 --resume
check "a ZeRO 0 job resumes the ZeRO 1 checkpoint to the same 6 steps' checkpoint" \
  cmp "$dir/ck_z0/latest.safetensors" "$dir/ck_stage0/latest.safetensors"

expect_message 2 "--zero without --ranks" "give --ranks R" "$tf" compile "$dir/gpt.tfg" --zero 1
expect_message 2 "--zero 2" "--zero 2 (gradients sharded across the ranks) is not supported yet" \
  "$tf" compile "$dir/gpt.tfg" --ranks 2 --zero 2
expect_message 2 "--zero 3" "--zero takes 0, 1 or 2" "$tf" compile "$dir/gpt.tfg" --ranks 2 --zero 3
expect_message 2 "--zero with --offload" "with --offload is not supported yet" \
  "$tf" compile "$dir/gpt.tfg" --ranks 2 --zero 1 --offload optimizer --target vulkan
expect_message 2 "--checkpoint-every-minutes with a ZeRO plan" "save at the same steps" \
  $mpi 2 "$tf" train "$dir/r2z1.tfplan" --data $data --steps 2 --checkpoint "$dir/ck_minutes" \
  --checkpoint-every-minutes 1
finish test_ranks_zero
