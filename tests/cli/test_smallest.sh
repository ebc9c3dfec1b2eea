#!/bin/sh
# The smallest exact plan by default (issue 48 item 1): `compile` with no flag takes each rewrite
# that trains the same weights bit for bit where it makes the plan smaller (updates in the backward
# pass, a fused loss head), prints which and what each saved (text and JSON "rewrites"), and trains
# to the same checkpoint byte for byte as the plain plan; --no-smallest gives the plain plan,
# --no-update-in-backward keeps every gradient but still fuses the head, an explicit --fuse-loss is
# kept, --smallest is the default said aloud, and a plan that cannot move its updates (--accumulate 2)
# is compiled without them and without an error.
# usage: test_smallest.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
region() { # region OUTPUT NAME: a region's exact bytes from compile's text
  sed -n "s/^  $2 .*(\([0-9]*\) bytes)$/\1/p" "$1"
}

# A gpt with an 8192-token vocabulary at 16 x 64: 1024 rows of logits, 32 MiB in f32.
"$tf" zoo gpt --param vocab=8192 --param layers=1 -o "$dir/gpt.tfg" > /dev/null
compile() { # compile NAME OPTION...: compile with AdamW at 16 x 64, output kept in $dir/NAME.txt
  name=$1
  shift
  expect_message 0 "compile $*" "written to" "$tf" compile "$dir/gpt.tfg" --set N=16,T=64 --optimizer adamw \
    -o "$dir/$name.tfplan" "$@"
  cp "$dir/out" "$dir/$name.txt"
}
compile default
compile plain --no-smallest
compile kept --no-update-in-backward
compile unfused --fuse-loss off
compile said --smallest
compile accumulating --accumulate 2
check "the default says what it took and what each saved" \
  "grep -q '^smallest plan: fused loss head (saves 24.00 MiB); updates in the backward pass (saves [0-9.]* MiB) (--no-smallest: the plain plan)\$' '$dir/default.txt'"
check "the plain plan says nothing of it" "! grep -q 'smallest plan' '$dir/plain.txt'"
d=$(region "$dir/default.txt" total) p=$(region "$dir/plain.txt" total) k=$(region "$dir/kept.txt" total)
u=$(region "$dir/unfused.txt" total) s=$(region "$dir/said.txt" total)
gd=$(region "$dir/default.txt" gradients) gp=$(region "$dir/plain.txt" gradients) gk=$(region "$dir/kept.txt" gradients)
echo "totals: default $d, plain $p, --no-update-in-backward $k, --fuse-loss off $u, --smallest $s bytes"
echo "gradients region: default $gd, plain $gp, --no-update-in-backward $gk bytes"
check "the default is smaller than the plain plan by more than the 24 MiB of logits ($d < $p - 25165824)" \
  test -n "$d" -a "${d:-0}" -lt $((${p:-0} - 25165824))
check "--no-update-in-backward keeps every gradient ($gk = $gp) but fuses the head ($k < $p)" \
  test -n "$gk" -a "$gk" = "$gp" -a "${k:-0}" -lt "${p:-0}" -a "${gd:-1}" -lt "${gp:-0}"
check "--fuse-loss off is kept: larger than the default, smaller than the plain plan ($d < $u < $p)" \
  test "${d:-0}" -lt "${u:-0}" -a "${u:-0}" -lt "${p:-0}"
check "--smallest is the default ($s = $d)" test -n "$s" -a "$s" = "$d"
check "--accumulate 2 compiles without moving the updates" \
  "grep -q 'smallest plan: fused loss head' '$dir/accumulating.txt' && ! grep -q 'updates in the backward pass (saves' '$dir/accumulating.txt'"
expect_message 0 "compile --json names the rewrites" '"rewrites": "smallest plan: fused loss head' \
  "$tf" compile "$dir/gpt.tfg" --set N=16,T=64 --optimizer adamw --json
expect_message 0 "--no-smallest --json: none" '"rewrites": ""' \
  "$tf" compile "$dir/gpt.tfg" --set N=16,T=64 --optimizer adamw --no-smallest --json
expect_message 0 "--help names --no-smallest" "--no-smallest" "$tf" compile --help

# The same weights: 4 steps of each plan from the same seed, the checkpoints byte for byte.
"$tf" zoo gpt --param layers=1 -o "$dir/char.tfg" > /dev/null
for name in default plain; do
  if [ $name = plain ]; then extra=--no-smallest; else extra=; fi
  "$tf" compile "$dir/char.tfg" --set N=4,T=64 --optimizer adamw $extra -o "$dir/char_$name.tfplan" \
    > "$dir/char_$name.txt"
  expect_message 0 "train the $name plan 4 steps" "trained 4 steps" "$tf" train "$dir/char_$name.tfplan" \
    --data models/data/text/train --steps 4 --threads 1 --checkpoint "$dir/ck_$name"
done
check "the default char plan updates in the backward pass" \
  "grep -q 'updates in the backward pass (saves' '$dir/char_default.txt'"
check "default and plain plans train to the same checkpoint, byte for byte" \
  cmp "$dir/ck_default/latest.safetensors" "$dir/ck_plain/latest.safetensors"
finish test_smallest
