#!/bin/sh
# train's throughput line (issue 41): the data feed's share of the steps' time and the plan's model
# FLOPs a step. Checked: the text line and the --json members are there and consistent (the share
# is feed / seconds, within [0, 1]); the FLOPs of the char gpt at 4 x 64 tokens are 6 x parameters x
# tokens plus attention's (within 0 and +15% of 6 P T); accumulation counts the micro-batch block
# k times (k = 2 at half the micro-batch: the same FLOPs a step, within 1%).
# usage: test_throughput.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
data=models/data/text/train
"$tf" zoo gpt -o "$dir/gpt.tfg" > /dev/null || { echo "FAIL: zoo gpt"; exit 1; }
"$tf" compile "$dir/gpt.tfg" --set N=4,T=64 -o "$dir/a.tfplan" > /dev/null 2>&1 || { echo "FAIL: compile"; exit 1; }
"$tf" compile "$dir/gpt.tfg" --set N=2,T=64 --accumulate 2 -o "$dir/b.tfplan" > /dev/null 2>&1 || { echo "FAIL: compile"; exit 1; }
expect_message 0 "train prints the throughput line" \
  '^throughput: data feed [0-9.]* ms of [0-9.]* ms a step ([0-9.]*%: .*); model [0-9.]* GFLOP a step at [0-9.]* GFLOP/s' \
  "$tf" train "$dir/a.tfplan" --data "$data" --steps 3 --threads 1
expect 0 "train --json" "$tf" train "$dir/a.tfplan" --data "$data" --steps 3 --threads 1 --json
tail -1 "$dir/out" > "$dir/a.json"
expect 0 "train --json with 2 micro-batches" "$tf" train "$dir/b.tfplan" --data "$data" --steps 3 --threads 1 --json
tail -1 "$dir/out" > "$dir/b.json"
params=$("$tf" inspect "$dir/gpt.tfg" --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['parameters'])")
check "the summary's feed share is feed_seconds / seconds, in [0, 1]" /usr/bin/python3 -c "
import json; d = json.load(open('$dir/a.json'))
assert 0 <= d['feed_share'] <= 1 and abs(d['feed_share'] - d['feed_seconds'] / d['seconds']) < 1e-4, d"
check "model FLOPs a step: 6 x $params parameters x 256 tokens, + up to 15% (attention)" /usr/bin/python3 -c "
import json; f = json.load(open('$dir/a.json'))['flops_per_step']; base = 6 * $params * 256
print('flops', f, 'against 6PT', base); assert base <= f <= 1.15 * base"
check "accumulation: 2 x 2 micro-batches a step do the FLOPs of 4 (within 1%)" /usr/bin/python3 -c "
import json; a = json.load(open('$dir/a.json'))['flops_per_step']; b = json.load(open('$dir/b.json'))['flops_per_step']
print(a, b); assert abs(a - b) <= 0.01 * a"
finish
