#!/bin/sh
# The command line's rough edges a new user hit (issue 44): `train --resume --steps S` trains up to
# step S (not S more steps) and prints the steps so; weights referenced by a graph relative to its
# own folder are found when the plan is written elsewhere and train runs from a third folder, and a
# missing file is named with where it was looked for; `run` and `train --eval` print progress on
# stderr (the non-terminal form: every --log-every batches), never on --json's stdout.
# usage: test_edges.sh TIGHTFIT   (run from the repository root)
tf=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # absolute: some commands run in other folders
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

# ---- weights relative to the graph ----
# The zoo mlp with hidden.0.weight from w.safetensors beside the graph (as `import` writes it), in
# model/; compiled from elsewhere/ into plans/; trained and run from run/.
mkdir "$dir/model" "$dir/plans" "$dir/elsewhere" "$dir/run"
external_graph "$tf" "$dir/mlp.tfg" "$dir/model" || fail "writing the graph with external weights"
(cd "$dir/elsewhere" && "$tf" compile ../model/ext.tfg --set N=32 -o ../plans/ext.tfplan > /dev/null) ||
  fail "compile from another folder"
in_run() { (cd "$dir/run" && "$@"); }
expect_message 0 "train from a third folder finds the weights in the graph's folder" "^trained 3 steps" \
  in_run "$tf" train ../plans/ext.tfplan --data "$digits/train" --steps 3 --checkpoint ../ck_ext
expect_message 0 "run from there too" "ext.tfplan on .*: loss [0-9]" in_run "$tf" run ../plans/ext.tfplan --data "$digits/test"
# The file's weights were the ones trained: the same checkpoint as a copy of the plan beside the
# file gives (the way that always worked).
cp "$dir/plans/ext.tfplan" "$dir/model/beside.tfplan"
in_run "$tf" train ../model/beside.tfplan --data "$digits/train" --steps 3 --checkpoint ../ck_beside > /dev/null
check "the same checkpoint as a plan beside its weights, byte for byte" \
  cmp -s "$dir/ck_ext/latest.safetensors" "$dir/ck_beside/latest.safetensors"
mv "$dir/model/w.safetensors" "$dir/elsewhere/w.safetensors"
expect_phrase 2 "a missing weights file: both places named" \
  "w.safetensors: not found: looked for it in ../plans (the weights folder: the plan's, or --weights-dir DIR) and in $(cd "$dir/model" && pwd -P) (the graph's folder when the plan was compiled)" \
  in_run "$tf" train ../plans/ext.tfplan --data "$digits/train" --steps 3
check "... and how to point elsewhere" grep -q "point --weights-dir" "$dir/err"
expect_message 0 "train --weights-dir DIR" "^trained 3 steps" \
  in_run "$tf" train ../plans/ext.tfplan --data "$digits/train" --steps 3 --weights-dir ../elsewhere --checkpoint ../ck_moved
check "... the same checkpoint" cmp -s "$dir/ck_ext/latest.safetensors" "$dir/ck_moved/latest.safetensors"
expect_message 0 "run --weights-dir DIR" "loss [0-9]" \
  in_run "$tf" run ../plans/ext.tfplan --data "$digits/test" --weights-dir ../elsewhere
expect_phrase 0 "run --help describes --weights-dir" "--weights-dir D" "$tf" run --help

# ---- progress on stderr ----
expect 0 "run --log-every 3 --json" "$tf" run "$dir/mlp.tfplan" --data "$digits/test" --log-every 3 --json
cat "$dir/err"
batches=$(( ($(/usr/bin/python3 -c "import numpy as np; print(len(np.load('$digits/test/x.npy')))") + 31) / 32 ))
check "a progress line every 3 batches on stderr (of $batches)" \
  "[ \"\$(grep -c '^run: batch [0-9]*/$batches ([0-9]*%)\$' '$dir/err')\" -eq $(( (batches - 1) / 3 )) ] && grep -q '^run: batch 3/$batches (' '$dir/err'"
check "stdout is the JSON result alone" "[ \"\$(wc -l < '$dir/out')\" -eq 1 ] && grep -q '^{\"loss\": ' '$dir/out'"
expect 0 "run without --log-every: nothing under 100 batches" "$tf" run "$dir/mlp.tfplan" --data "$digits/test"
check "... stderr is empty" "[ ! -s '$dir/err' ]"
expect 2 "run --log-every 0" "$tf" run "$dir/mlp.tfplan" --data "$digits/test" --log-every 0
"$tf" compile "$dir/mlp.tfg" --set N=2 -o "$dir/mlp2.tfplan" > /dev/null
small=$(( (batches * 32 + 1) / 2 ))
expect 0 "train --eval over more than 100 batches" "$tf" train "$dir/mlp2.tfplan" --data "$digits/train" --steps 1 \
  --eval "$digits/test" --json
cat "$dir/err"
check "held-out progress on stderr every 100 batches" "grep -q '^held-out: batch 100/[0-9]* ([0-9]*%)\$' '$dir/err'"
check "... none on stdout" "! grep -q 'batch' '$dir/out'"

finish edges
