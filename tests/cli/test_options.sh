#!/bin/sh
# Shape and option checks (issue 18, item 4): a bound symbol past a model's table is refused at
# compile with both numbers; NaN, Inf and out-of-range option values are refused (exit 2), never
# turned into a default.
# usage: test_options.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
"$tf" zoo gpt -o "$dir/gpt.tfg" > /dev/null
"$tf" zoo asr-128-6-3 -o "$dir/asr.tfg" > /dev/null
expect_message 2 "T past the position table" "the ids 'position_ids' run from 0 to 511 (with T=512), but the table 'wpe.weight' has 256 rows" \
  "$tf" compile "$dir/gpt.tfg" --set N=2,T=512
expect_message 0 "T at the table's size" "training plan" "$tf" compile "$dir/gpt.tfg" --set N=2,T=256
expect_message 2 "check refuses it too" "has 256 rows" "$tf" check "$dir/gpt.tfg" --set T=257 --budget 1GiB --target cpu
expect_message 2 "decoder length past its table" "decoder.position_ids" "$tf" compile "$dir/asr.tfg" --set U=449
expect_message 2 "a symbol past 64 bits" "does not fit 64 bits" "$tf" compile "$dir/gpt.tfg" --set T=99999999999999999999
# each tensor fits 64 bits, their sum does not: refused before the planner adds them up (it was an "internal error")
expect_message 2 "a batch past what a plan holds" "need more than 2^60 bytes (1 EiB) in all" \
  "$tf" compile "$dir/gpt.tfg" --set N=4000000000000
expect_message 2 "the same, inference" "with N=4000000000000: its tensors need more than 2^60 bytes" \
  "$tf" compile "$dir/gpt.tfg" --set N=4000000000000 --inference
expect_message 2 "check refuses it too" "need more than 2^60 bytes" \
  "$tf" check "$dir/gpt.tfg" --set N=4000000000000 --budget 1GiB --target cpu
expect_message 2 "--lr nan" "--lr takes a positive number" "$tf" compile "$dir/gpt.tfg" --lr nan
expect_message 2 "--lr inf" "--lr takes a positive number" "$tf" compile "$dir/gpt.tfg" --lr inf
expect_message 2 "--weight-decay nan" "--weight-decay takes a number" "$tf" compile "$dir/gpt.tfg" --weight-decay nan
expect_message 2 "--weight-decay -inf" "--weight-decay takes a number" "$tf" compile "$dir/gpt.tfg" --weight-decay -inf
expect_message 2 "--clip 1e999" "--clip takes a number" "$tf" compile "$dir/gpt.tfg" --clip 1e999
expect_message 2 "--accumulate past int64" "--accumulate takes" "$tf" compile "$dir/gpt.tfg" --accumulate 99999999999999999999
expect_message 2 "--global-batch past int64" "--global-batch takes" "$tf" check "$dir/gpt.tfg" --budget 1GiB --global-batch 18446744073709551617
expect_message 2 "--budget garbage" "is not a positive size" "$tf" check "$dir/gpt.tfg" --budget 12parsecs
finish test_options
