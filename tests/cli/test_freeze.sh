#!/bin/sh
# Frozen parameters through the command line (issue 43 item 1): compile --freeze / --train-only on the
# zoo's mlp (hidden.0 [64,128], hidden.1 [128,128], head [128,10], each with its bias) plans gradients
# and AdamW state for the trainable parameters only (plans that keep their gradients whole:
# --no-update-in-backward), report (text and --json) splits trainable and frozen parameter bytes,
# check sees the same regions, training leaves the frozen weights bit for bit in the checkpoints
# while the head trains, and each bad pattern is refused (exit 2) with its message.
# usage: test_freeze.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
export TIGHTFIT_CACHE_DIR="$dir/cache"
py=/usr/bin/python3
field() { # field FILE EXPRESSION: a value of the JSON in FILE (d is the document)
  "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null
head_bytes=$((4 * (128 * 10 + 10))) hidden_bytes=$((4 * (64 * 128 + 128 + 128 * 128 + 128)))

expect_message 0 "compile, everything trained" "written to" "$tf" compile "$dir/mlp.tfg" --set N=32 --optimizer adamw --no-update-in-backward \
  -o "$dir/all.tfplan"
expect_message 0 "compile --freeze 'hidden.*'" "written to" "$tf" compile "$dir/mlp.tfg" --set N=32 --optimizer adamw --no-update-in-backward \
  --freeze 'hidden.*' -o "$dir/frozen.tfplan"
expect_message 0 "compile --train-only head.weight --train-only head.bias" "written to" "$tf" compile "$dir/mlp.tfg" \
  --set N=32 --optimizer adamw --no-update-in-backward --train-only head.weight --train-only head.bias -o "$dir/only.tfplan"
for name in all frozen only; do
  "$tf" report "$dir/$name.tfplan" --json > "$dir/$name.json" || fail "report --json $name"
done
g_all=$(field "$dir/all.json" "d['roles']['gradient']['bytes']")
for name in frozen only; do
  g=$(field "$dir/$name.json" "d['roles']['gradient']['bytes']")
  s=$(field "$dir/$name.json" "d['roles']['optimizer_state']['bytes']")
  split=$(field "$dir/$name.json" "d['parameters']")
  echo "$name: gradients $g bytes (all trained: $g_all), optimizer state $s, parameters $split"
  check "$name: gradients $g bytes and AdamW state $s for the head only ($head_bytes, twice that)" \
    "[ '$g' = $head_bytes ] && [ '$s' = $((2 * head_bytes)) ] && [ '$g_all' = $((head_bytes + hidden_bytes)) ]"
  check "$name: report --json splits the parameters: $split" \
    "[ \"$split\" = \"{'trainable_bytes': $head_bytes, 'trainable_buffers': 2, 'frozen_bytes': $hidden_bytes, 'frozen_buffers': 4}\" ]"
done
expect_message 0 "report: the trainable parameters' line" "^  trainable parameters (2) *5.04 KiB *5,160$" \
  "$tf" report "$dir/frozen.tfplan"
expect_message 0 "report: the frozen parameters' line" "^  frozen parameters (4) *97.00 KiB *99,328$" \
  "$tf" report "$dir/frozen.tfplan"
expect_message 0 "report of the trained plan: every parameter trainable" "^  frozen parameters (0) *0 B *0$" \
  "$tf" report "$dir/all.tfplan"
"$tf" compile "$dir/mlp.tfg" --set N=32 --inference -o "$dir/inference.tfplan" > /dev/null
expect 0 "report of an inference plan" "$tf" report "$dir/inference.tfplan"
check "an inference plan's report has no trainable/frozen lines" "! grep -q 'frozen parameters' '$dir/out'"

expect 0 "check --freeze 'hidden.*' --json" "$tf" check "$dir/mlp.tfg" --set N=32 --optimizer adamw --no-update-in-backward --budget 1MiB \
  --freeze 'hidden.*' --json
cp "$dir/out" "$dir/check.json"
expect 0 "check --json, everything trained" "$tf" check "$dir/mlp.tfg" --set N=32 --optimizer adamw --no-update-in-backward --budget 1MiB --json
cp "$dir/out" "$dir/check_all.json"
c_frozen=$(field "$dir/check.json" "d['regions']['gradients']") c_all=$(field "$dir/check_all.json" "d['regions']['gradients']")
check "check sees the frozen layers: gradients region $c_all -> $c_frozen bytes" \
  "[ -n '$c_frozen' ] && [ '$c_frozen' -lt '$c_all' ] && [ '$c_frozen' -ge $head_bytes ]"
expect 0 "check --global-batch search with --train-only 'head.*'" "$tf" check "$dir/mlp.tfg" --budget 1MiB \
  --global-batch 64 --train-only 'head.*' --optimizer adamw

# training: the frozen weights are in every checkpoint, bit for bit as initialised; the head moves
for steps in 1 4; do
  expect_message 0 "train the frozen plan $steps steps" "trained" "$tf" train "$dir/frozen.tfplan" \
    --data models/data/digits/train --steps $steps --threads 1 --checkpoint "$dir/ck$steps"
done
compare=$("$py" - "$dir/ck1/latest.safetensors" "$dir/ck4/latest.safetensors" << 'EOF'
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + size])
    return {k: raw[8 + size + v["data_offsets"][0]:8 + size + v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
names = ["hidden.0.weight", "hidden.0.bias", "hidden.1.weight", "hidden.1.bias", "head.weight", "head.bias"]
print(" ".join(f"{n}={'same' if n in a and a.get(n) == b.get(n) else 'moved' if n in a else 'missing'}" for n in names))
EOF
)
echo "after 1 and 4 steps: $compare"
check "the frozen weights are saved and stay bit for bit, the head trains" "[ '$compare' = \
'hidden.0.weight=same hidden.0.bias=same hidden.1.weight=same hidden.1.bias=same head.weight=moved head.bias=moved' ]"

# bad inputs
expect_phrase 2 "a pattern naming no parameter" \
  "freeze pattern 'encoder.*' names no parameter of graph 'mlp'; its parameters: 'hidden.0.weight', 'hidden.0.bias'" \
  "$tf" compile "$dir/mlp.tfg" --freeze 'encoder.*'
expect_phrase 2 "a train-only pattern naming an input, not a parameter" "train-only pattern 'x' names no parameter" \
  "$tf" compile "$dir/mlp.tfg" --train-only x
expect_phrase 2 "every parameter frozen" "every parameter of graph 'mlp' is frozen (6 of 6): nothing to train" \
  "$tf" compile "$dir/mlp.tfg" --freeze '*'
expect_phrase 2 "every parameter frozen, on check" "is frozen (6 of 6)" \
  "$tf" check "$dir/mlp.tfg" --budget 1MiB --freeze 'hidden.*' --freeze 'head.*'
expect_phrase 2 "an unclosed bracket" "freeze pattern 'hidden.[01.weight' has a '[' without its ']' (at byte 7)" \
  "$tf" compile "$dir/mlp.tfg" --freeze 'hidden.[01.weight'
expect_phrase 2 "an empty pattern" "train-only pattern is empty" "$tf" compile "$dir/mlp.tfg" --train-only ''
expect_message 2 "--freeze without its pattern" "freeze" "$tf" compile "$dir/mlp.tfg" --freeze
expect_phrase 0 "compile --help names --freeze" "--freeze PATTERN" "$tf" compile --help
expect_phrase 0 "check --help names --train-only" "--train-only PATTERN" "$tf" check --help
finish test_freeze
