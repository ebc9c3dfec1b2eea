#!/bin/sh
# Issue 49 through the command line: (3) `train` and `compile` end under an address-space limit and
# a SIGTERM ends `train` there; (4) `run` reports a NaN loss as NaN with exit 2, and NaN in initial
# weights is named (file, tensor, element); (8) a flipped bit in a checkpoint, weight file or plan
# is refused naming the file and tensor.
# usage: test_integrity.sh TIGHTFIT SANITIZED   (run from the repository root; needs python3 + numpy)
tf=$1 sanitized=$2
. "$(dirname "$0")/../cli/harness.sh"
export TIGHTFIT_CACHE_DIR="$dir/cache"
if ! /usr/bin/python3 -c 'import numpy' 2> /dev/null; then
  echo "SKIP: /usr/bin/python3 with numpy is needed to make the data"
  exit 77
fi
"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null
"$tf" compile "$dir/mlp.tfg" --set N=16 -o "$dir/mlp.tfplan" > /dev/null

# ---- (3) under `ulimit -v 250000` (250 MB of address space) ----
# Before the fix, train spun forever in OpenBLAS's first matrix product, deaf to SIGTERM (timeout's
# -k then killed it: exit 137); compile hung at exit when OpenBLAS could not start its threads (made
# to happen here with 400 MB thread stacks, as many cores make it happen on big machines).
if [ "$sanitized" = 1 ]; then
  echo "skip: the memory-limit cases (a sanitizer's shadow memory does not fit under ulimit -v)"
else
  expect_message 0 "train under ulimit -v 250000 ends (timeout 30 s)" "trained 3 steps" \
    sh -c 'ulimit -v 250000; exec timeout -k 5 30 "$0" train "$1" --data models/data/digits/train --steps 3' \
    "$tf" "$dir/mlp.tfplan"
  expect_message 0 "compile under ulimit -v 250000 -s 400000 ends (timeout 20 s)" "written to" \
    sh -c 'ulimit -v 250000; ulimit -s 400000; exec timeout -k 5 20 "$0" compile "$1" --set N=16 -o "$2"' \
    "$tf" "$dir/mlp.tfg" "$dir/limited.tfplan"
  # SIGTERM after 2 s of a long run: it stops and exits by itself (timeout's 124), not killed (137).
  expect 124 "SIGTERM ends train under ulimit -v 250000" \
    sh -c 'ulimit -v 250000; exec timeout -k 20 2 "$0" train "$1" --data models/data/digits/train --steps 100000000' \
    "$tf" "$dir/mlp.tfplan"
fi
finish test_integrity
