#!/bin/sh
# `compile --update-in-backward` through the command line (issue 15): the plan trains to the same
# checkpoint, byte for byte, as the plan without it (also across a checkpoint and --resume), holds a smaller gradients region, says so in
# its report; the options it cannot go with are refused with the reason (exit 2); and a run whose
# loss turns NaN says that the updates already ran and writes no checkpoint.
# usage: test_update_in_backward.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
export TIGHTFIT_CACHE_DIR="$dir/cache"
region() { # region PLAN NAME: the region's exact bytes from `tightfit inspect --json`-free text: the compile lines
  sed -n "s/^  $2 .*(\([0-9]*\) bytes)$/\1/p" "$1"
}

"$tf" zoo gpt -o "$dir/gpt.tfg" > /dev/null
expect_message 0 "compile" "written to" "$tf" compile "$dir/gpt.tfg" --set N=4 --optimizer adamw --no-update-in-backward -o "$dir/plain.tfplan"
cp "$dir/out" "$dir/plain.txt"
expect_message 0 "compile --update-in-backward" "written to" \
  "$tf" compile "$dir/gpt.tfg" --set N=4 --optimizer adamw --update-in-backward -o "$dir/moved.tfplan"
cp "$dir/out" "$dir/moved.txt"
g0=$(region "$dir/plain.txt" gradients) g1=$(region "$dir/moved.txt" gradients)
t0=$(region "$dir/plain.txt" total) t1=$(region "$dir/moved.txt" total)
echo "gradients region $g0 -> $g1 bytes, total $t0 -> $t1 bytes"
check "a smaller gradients region ($g0 -> $g1 bytes)" test -n "$g1" -a "${g1:-0}" -lt "${g0:-0}"
check "a smaller total ($t0 -> $t1 bytes)" test -n "$t1" -a "${t1:-0}" -lt "${t0:-0}"
expect_message 0 "the report says where the updates run" "each update in the backward pass" "$tf" report "$dir/moved.tfplan"

for name in plain moved; do
  expect_message 0 "train $name 6 steps" "trained 6 steps" "$tf" train "$dir/$name.tfplan" --data models/data/text/train \
    --steps 6 --threads 1 --checkpoint "$dir/$name"
done
check "the same checkpoint, byte for byte" cmp "$dir/plain/latest.safetensors" "$dir/moved/latest.safetensors"
# 3 steps, a checkpoint, --resume for 3 more: the same checkpoint as 6 steps of the plain plan.
expect_message 0 "train 3 steps" "trained 3 steps" "$tf" train "$dir/moved.tfplan" --data models/data/text/train --steps 3 \
  --threads 1 --checkpoint "$dir/resumed"
expect_message 0 "resume for 3 more" "resumed from" "$tf" train "$dir/moved.tfplan" --data models/data/text/train --steps 6 \
  --threads 1 --checkpoint "$dir/resumed" --resume
check "3 + 3 resumed steps end on the plain plan's 6-step checkpoint" \
  cmp "$dir/plain/latest.safetensors" "$dir/resumed/latest.safetensors"

expect_message 2 "refused with --accumulate 2" "it accumulates micro-batches" \
  "$tf" compile "$dir/gpt.tfg" --update-in-backward --accumulate 2 -o "$dir/x.tfplan"
expect_message 2 "refused with --clip 1" "it clips the global gradient norm" \
  "$tf" compile "$dir/gpt.tfg" --update-in-backward --clip 1 -o "$dir/x.tfplan"
expect_message 2 "refused with fp16" "it stores f16 activations" \
  "$tf" compile "$dir/gpt.tfg" --update-in-backward --precision fp16 -o "$dir/x.tfplan"
check "nothing written by the refusals" test ! -e "$dir/x.tfplan"
expect_message 0 "--help names it" "--update-in-backward" "$tf" compile --help

# A learning rate of 1e30: the first step's updates make the weights non-finite. The run stops
# saying that the updates ran (they are inside the backward pass) and writes no checkpoint.
"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null
"$tf" compile "$dir/mlp.tfg" --set N=16 --lr 1e30 --update-in-backward -o "$dir/hot.tfplan" > /dev/null
expect_message 2 "non-finite after the updates" "backward pass" \
  "$tf" train "$dir/hot.tfplan" --data models/data/digits/train --steps 20 --checkpoint "$dir/hot"
check "no checkpoint after it" test ! -e "$dir/hot/latest.safetensors"

finish cli_update_in_backward
