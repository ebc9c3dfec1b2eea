#!/bin/sh
# The command line's rough edges a new user hit (issue 44): `train --resume --steps S` trains up to
# step S (not S more steps) and prints the steps so; weights referenced by a graph relative to its
# own folder are found when the plan is written elsewhere and train runs from a third folder, and a
# missing file is named with where it was looked for; `run` and `train --eval` print progress on
# stderr (the non-terminal form: every --log-every batches), never on --json's stdout.
# usage: test_edges.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
root=$(pwd)
digits="$root/models/data/digits"

"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null || { echo "FAIL: zoo mlp"; exit 1; }
"$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/mlp.tfplan" > /dev/null || { echo "FAIL: compile"; exit 1; }

# ---- --steps is the step to reach ----
train() { "$tf" train "$dir/mlp.tfplan" --data "$digits/train" --threads 1 --log-every 1 "$@"; }
expect_message 0 "train 5 steps with a checkpoint" "^step 5/5 " train --steps 5 --checkpoint "$dir/ck"
expect 0 "resume with --steps 8" train --steps 8 --checkpoint "$dir/ck" --resume
cat "$dir/out"
check "3 more steps, numbered 6/8 to 8/8" \
  "[ \"\$(grep -c '^step ' '$dir/out')\" -eq 3 ] && grep -q '^step 6/8 ' '$dir/out' && grep -q '^step 8/8 ' '$dir/out'"
check "the summary says 3 steps, from 5 to 8 of 8" "grep -q '^trained 3 steps in .* s (from step 5 to 8 of --steps 8); final loss' '$dir/out'"
expect 0 "train 8 steps straight" train --steps 8 --checkpoint "$dir/straight"
check "5 + resumed to 8 == 8 straight, byte for byte" cmp -s "$dir/ck/latest.safetensors" "$dir/straight/latest.safetensors"
cp "$dir/ck/latest.safetensors" "$dir/at8.safetensors"
expect_phrase 0 "resume at step 8 with --steps 8: nothing to train, exit 0" \
  "the checkpoint is at step 8, at or past --steps 8 (the step to reach): nothing to train" \
  train --steps 8 --checkpoint "$dir/ck" --resume
check "... no step ran" "! grep -q '^step ' '$dir/out'"
check "... and the checkpoint is untouched" cmp -s "$dir/ck/latest.safetensors" "$dir/at8.safetensors"
expect_phrase 0 "resume past it (--steps 3)" "at or past --steps 3" train --steps 3 --checkpoint "$dir/ck" --resume
expect 0 "--json: resume to 10" train --steps 10 --checkpoint "$dir/ck" --resume --json
check "--json counts this run's steps and the step reached" \
  "grep -q '^{\"step\": 10, ' '$dir/out' && grep -q '^{\"steps\": 2, \"optimizer_steps\": 10, ' '$dir/out'"
expect_phrase 0 "train --help says --steps is the total" "the optimizer steps to reach" "$tf" train --help

finish edges
