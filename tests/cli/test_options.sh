#!/bin/sh
# Shape and option checks (issue 18, item 4): a bound symbol past a model's table is refused at
# compile with both numbers; NaN, Inf and out-of-range option values are refused (exit 2), never
# turned into a default.
# usage: test_options.sh TIGHTFIT   (run from the repository root)
tf=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
expect() { # expect CODE DESCRIPTION MESSAGE-PATTERN COMMAND...
  want=$1 what=$2 pattern=$3
  shift 3
  "$@" > "$dir/out" 2> "$dir/err"
  got=$?
  if [ "$got" -eq "$want" ] && grep -q -- "$pattern" "$dir/err" "$dir/out"; then
    passed=$((passed + 1)); echo "ok: $what (exit $got)"
  else
    failed=$((failed + 1)); echo "FAIL: $what: exit $got (expected $want), message pattern '$pattern'"; cat "$dir/out" "$dir/err"
  fi
}
"$tf" zoo gpt -o "$dir/gpt.tfg" > /dev/null
"$tf" zoo asr-128-6-3 -o "$dir/asr.tfg" > /dev/null
expect 2 "T past the position table" "the ids 'position_ids' run from 0 to 511 (with T=512), but the table 'wpe.weight' has 256 rows" \
  "$tf" compile "$dir/gpt.tfg" --set N=2,T=512
expect 0 "T at the table's size" "training plan" "$tf" compile "$dir/gpt.tfg" --set N=2,T=256
expect 2 "check refuses it too" "has 256 rows" "$tf" check "$dir/gpt.tfg" --set T=257 --budget 1GiB --target cpu
expect 2 "decoder length past its table" "decoder.position_ids" "$tf" compile "$dir/asr.tfg" --set U=449
expect 2 "a symbol past 64 bits" "does not fit 64 bits" "$tf" compile "$dir/gpt.tfg" --set T=99999999999999999999
expect 2 "--lr nan" "--lr takes a positive number" "$tf" compile "$dir/gpt.tfg" --lr nan
expect 2 "--lr inf" "--lr takes a positive number" "$tf" compile "$dir/gpt.tfg" --lr inf
expect 2 "--weight-decay nan" "--weight-decay takes a number" "$tf" compile "$dir/gpt.tfg" --weight-decay nan
expect 2 "--weight-decay -inf" "--weight-decay takes a number" "$tf" compile "$dir/gpt.tfg" --weight-decay -inf
expect 2 "--clip 1e999" "--clip takes a number" "$tf" compile "$dir/gpt.tfg" --clip 1e999
expect 2 "--accumulate past int64" "--accumulate takes" "$tf" compile "$dir/gpt.tfg" --accumulate 99999999999999999999
expect 2 "--global-batch past int64" "--global-batch takes" "$tf" check "$dir/gpt.tfg" --budget 1GiB --global-batch 18446744073709551617
expect 2 "--budget garbage" "is not a positive size" "$tf" check "$dir/gpt.tfg" --budget 12parsecs
echo "test_options: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
