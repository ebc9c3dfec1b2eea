#!/bin/sh
# Nothing trains on garbage, through the command line (issue 18, item 2): bad data is refused at
# feed open with file, sample and value named; a loss that turns NaN stops the run before the
# optimizer step and before any checkpoint is written; non-finite weights in a checkpoint are
# refused by `train --resume` and `run --weights`; --steps and --check-finite values are checked.
# usage: test_finite.sh TIGHTFIT   (run from the repository root; needs /usr/bin/python3 + numpy)
tf=$1
. "$(dirname "$0")/harness.sh"
export TIGHTFIT_CACHE_DIR="$dir/cache"
skip_without_numpy
"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null
"$tf" compile "$dir/mlp.tfg" --set N=16 -o "$dir/mlp.tfplan" > /dev/null
"$tf" compile "$dir/mlp.tfg" --set N=16 --lr 1e30 --no-update-in-backward -o "$dir/hot.tfplan" > /dev/null
/usr/bin/python3 - "$dir" << 'PY'
import os, sys, numpy as np
root, src = sys.argv[1], "models/data/digits/train"
x, y = np.load(src + "/x.npy"), np.load(src + "/labels.npy")
def save(name, x, y):
    os.makedirs(f"{root}/{name}")
    np.save(f"{root}/{name}/x.npy", x)
    np.save(f"{root}/{name}/labels.npy", y)
bad = x.copy(); bad[77, 5] = np.nan; save("nan", bad, y)
save("short", x, y[:10])
bad = y.copy(); bad[50] = 10; save("label", x, bad)
save("f64", x.astype(np.float64), y)
PY
expect_message 2 "one NaN in x.npy" "nan/x.npy: sample 77, element 5 is nan" "$tf" train "$dir/mlp.tfplan" --data "$dir/nan" --steps 5
expect_message 2 "10 labels beside 1437 samples" "labels.npy holds 10 samples but .*x.npy holds 1437" \
  "$tf" train "$dir/mlp.tfplan" --data "$dir/short" --steps 5
expect_message 2 "label 10 of 10 classes" "labels.npy: sample 50 is 10, outside \[0, 10)" \
  "$tf" train "$dir/mlp.tfplan" --data "$dir/label" --steps 5
expect_message 2 "float64 features" "holds float64 ('<f8'), but 'x' is f32" "$tf" train "$dir/mlp.tfplan" --data "$dir/f64" --steps 5

# A learning rate of 1e30 makes the loss NaN at step 2: stopped before its optimizer step, nothing saved.
expect_message 2 "the loss turns NaN" "step 2: the loss is nan; stopped before the optimizer step: no weight was overwritten" \
  "$tf" train "$dir/hot.tfplan" --data models/data/digits/train --steps 20 --checkpoint "$dir/hot"
check "no checkpoint after the NaN loss" test ! -e "$dir/hot/latest.safetensors"

# A checkpoint with one NaN weight: refused by resume and run.
expect_message 0 "train 5 steps with a checkpoint" "trained 5 steps" \
  "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 5 --checkpoint "$dir/ck"
/usr/bin/python3 - "$dir/ck/latest.safetensors" << 'PY'
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
struct.pack_into("<f", data, 8 + n + header["head.weight"]["data_offsets"][0] + 4 * 3, float("inf"))
data[:8 + n] = data[:8 + n].replace(b'"tightfit.xxh64.head.weight"', b'"tightfit.xxh00.head.weight"')  # no checksum
open(path, "wb").write(data)
PY
expect_message 2 "run --weights with an infinite weight" "parameter 'head.weight' element 3 is inf; refusing to run" \
  "$tf" run "$dir/mlp.tfplan" --data models/data/digits/test --weights "$dir/ck/latest.safetensors"
expect_message 2 "train --resume from it" "parameter 'head.weight' element 3 is inf; refusing to resume" \
  "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 2 --checkpoint "$dir/ck" --resume

expect_message 2 "--steps past 2^53" "--steps takes a count in 1..2^53" \
  "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 99999999999999999999
expect_message 2 "--check-finite garbage" "--check-finite takes a step count, 'all' or 'off'" \
  "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 2 --check-finite sometimes
expect_message 0 "--check-finite all" "trained 3 steps" \
  "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 3 --check-finite all
finish test_finite
