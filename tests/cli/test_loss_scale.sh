#!/bin/sh
# fp16 dynamic loss scaling through `tightfit train` (issue 14): the log says when the scale grows
# (--loss-scale-window) and when a step is skipped; --json carries the scale and the skip; data that
# overflows f16 at every step halves the scale down to 1 and then stops the run with exit 2 and a
# message, leaving the checkpoint as it was; an f32 plan that clips stops at the first overflowed
# step; --loss-scale and --loss-scale-window refuse bad values. The bit-level checks (the skipped
# step changes nothing, the run equals one without that step, resume) are in test_loss_scale.
# Usage: test_loss_scale.sh path/to/tightfit (run from the repository root).
tf="$1"
. "$(dirname "$0")/harness.sh"
data=models/data/digits/train

"$tf" zoo mlp -o "$dir/mlp.tfg" >/dev/null || fail "zoo mlp"
"$tf" compile "$dir/mlp.tfg" --set N=32 --optimizer adamw --precision fp16 -o "$dir/fp16.tfplan" >"$dir/c16" 2>&1 ||
  fail "compile fp16: $(tail -n 2 "$dir/c16")"

# Growth: 12 good steps with a window of 5 double the scale twice.
"$tf" train "$dir/fp16.tfplan" --data $data --steps 12 --log-every 100 --loss-scale-window 5 >"$dir/grow" 2>&1 ||
  fail "train fp16: $(tail -n 2 "$dir/grow")"
if grep -q "^step 5: loss scale 65536 -> 131072 after 5 steps without overflow$" "$dir/grow" &&
  grep -q "^step 10: loss scale 131072 -> 262144 after 5 steps without overflow$" "$dir/grow" &&
  grep -q "^loss scale 262144; 0 steps skipped in all" "$dir/grow"; then
  pass "the scale doubles after each window of good steps, and the log says so"
else
  fail "growth lines missing: $(cat "$dir/grow")"
fi
"$tf" train "$dir/fp16.tfplan" --data $data --steps 2 --json >"$dir/json" 2>&1 || fail "train --json: $(cat "$dir/json")"
grep -q '^{"step": 1, .*"loss_scale": 65536, "skipped": false}$' "$dir/json" &&
  grep -q '"loss_scale": 65536, "skipped_steps": 0[,}]' "$dir/json" && pass "--json carries the scale and the skips" ||
  fail "json: $(cat "$dir/json")"

# Data that overflows f16 at every step: every feature x 1e7 (the hidden activations pass 65504).
mkdir -p "$dir/big" "$dir/huge"
/usr/bin/python3 -c "
import numpy as np, sys
x = np.load('$data/x.npy'); y = np.load('$data/labels.npy')
for name, factor in (('big', 1e7), ('huge', 1e20)):
    np.save('$dir/' + name + '/x.npy', (x * factor + factor).astype(x.dtype)); np.save('$dir/' + name + '/labels.npy', y)
" || fail "writing the overflowing data"
"$tf" train "$dir/fp16.tfplan" --data $data --steps 3 --checkpoint "$dir/ck" >/dev/null 2>&1 || fail "clean fp16 run"
cp "$dir/ck/latest.safetensors" "$dir/before.safetensors"
"$tf" train "$dir/fp16.tfplan" --data "$dir/big" --steps 40 --resume --checkpoint "$dir/ck" >"$dir/skip" 2>&1
code=$?
skips=$(grep -c "a gradient overflowed: update skipped" "$dir/skip")
if [ "$code" -eq 2 ] && grep -q "^step 4: a gradient overflowed: update skipped, loss scale 65536 -> 32768$" "$dir/skip" &&
  grep -q "^step 19: a gradient overflowed: update skipped, loss scale 2 -> 1$" "$dir/skip" && [ "$skips" -eq 16 ] &&
  grep -q "step 20: a gradient is not finite even at loss scale 1; the update was skipped" "$dir/skip" &&
  cmp -s "$dir/before.safetensors" "$dir/ck/latest.safetensors"; then
  pass "overflow at every step: $skips skips halve the scale to 1, then exit 2; the checkpoint is untouched"
else
  fail "overflowing run (exit $code, $skips skips): $(tail -n 4 "$dir/skip")"
fi

# f32 with clipping: the first overflowed step stops the run.
"$tf" compile "$dir/mlp.tfg" --set N=32 --optimizer adamw --clip 1 -o "$dir/clip.tfplan" >/dev/null 2>&1 || fail "compile clip"
"$tf" train "$dir/clip.tfplan" --data "$dir/huge" --steps 5 >"$dir/clipped" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "step 1: the gradients' sum of squares, which clipping reads, is not finite" "$dir/clipped" &&
  pass "f32 with clipping stops at the first overflowed step" || fail "clip run (exit $code): $(tail -n 3 "$dir/clipped")"

# Bad values.
"$tf" compile "$dir/mlp.tfg" --precision fp16 --loss-scale 1000 -o "$dir/x.tfplan" >"$dir/bad1" 2>&1
[ $? -eq 2 ] && grep -q "power of two" "$dir/bad1" && pass "--loss-scale 1000 refused" || fail "--loss-scale 1000: $(cat "$dir/bad1")"
"$tf" train "$dir/fp16.tfplan" --data $data --steps 1 --loss-scale-window 0 >"$dir/bad2" 2>&1
[ $? -eq 2 ] && grep -q "loss-scale-window" "$dir/bad2" && pass "--loss-scale-window 0 refused" ||
  fail "--loss-scale-window 0: $(cat "$dir/bad2")"

finish loss_scale
