#!/bin/sh
# The error catalogue (issue 18, item 6): every row of docs/errors.md is a test. The rows are read
# from the document itself, so the two cannot drift: each row's command runs (under `timeout 20`,
# with `<dir>` replaced by this run's temporary folder and `tightfit` by the binary under test),
# and must exit with the row's code and print (stdout + stderr) the row's message. A sanitizer
# report, a signal or a timeout fails the row.
#
# usage: test_errors.sh TIGHTFIT [DOC]            check every row (run from the repository root)
#        test_errors.sh TIGHTFIT [DOC] --print    print each row's actual exit code and output, with
#                                                 the temporary folder as <dir>, to refresh the document
# The inputs are built here: graphs and plans by tightfit itself, bad .npy data and safetensors files
# by make_inputs.py (/usr/bin/python3 with numpy; without it the test is skipped, exit 77).
tf=$1
doc=docs/errors.md
mode=check
for arg in "$2" "$3"; do
  case $arg in
  --print) mode=print ;;
  "") ;;
  *) doc=$arg ;;
  esac
done
here=$(dirname "$0")
python=/usr/bin/python3
if [ -z "$tf" ] || [ ! -x "$tf" ]; then
  echo "usage: test_errors.sh TIGHTFIT [DOC] [--print]" >&2
  exit 2
fi
if ! "$python" -c 'import numpy' > /dev/null 2>&1; then
  echo "skipped: $python with numpy is needed to write the bad .npy and safetensors inputs"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The feed remembers data files that passed its checks; keep that memory out of $HOME.
TIGHTFIT_CACHE_DIR=$dir/cache
export TIGHTFIT_CACHE_DIR
tab=$(printf '\t')

# ---- the inputs (docs/errors.md says how each is made) ----
setup() { # setup DESCRIPTION COMMAND...: a step that must succeed
  what=$1
  shift
  if ! "$@" > "$dir/setup.out" 2>&1; then
    echo "FAIL: setup: $what:"
    cat "$dir/setup.out"
    exit 1
  fi
}
setup "zoo mlp" "$tf" zoo mlp -o "$dir/mlp.tfg"
setup "zoo gpt" "$tf" zoo gpt -o "$dir/gpt.tfg"
setup "zoo gpt2-small" "$tf" zoo gpt2-small -o "$dir/gpt2-small.tfg"
setup "compile mlp" "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/mlp.tfplan"
setup "compile mlp --inference" "$tf" compile "$dir/mlp.tfg" --set N=32 --inference -o "$dir/infer.tfplan"
setup "compile gpt" "$tf" compile "$dir/gpt.tfg" --set N=4,T=64 -o "$dir/gpt.tfplan"
setup "zoo asr-128-6-3" "$tf" zoo asr-128-6-3 -o "$dir/asr.tfg"
setup "compile asr" "$tf" compile "$dir/asr.tfg" --set N=2,T=25,U=8 -o "$dir/asr.tfplan"
setup "compile gpt for vulkan" "$tf" compile "$dir/gpt.tfg" --set N=4,T=64 --target vulkan -o "$dir/gpt_vulkan.tfplan"
setup "compile mlp with a learning rate of 1e30" "$tf" compile "$dir/mlp.tfg" --set N=16 --lr 1e30 -o "$dir/hot.tfplan"
setup "compile gpt as one of 2 ranks" "$tf" compile "$dir/gpt.tfg" --set N=4,T=32 --ranks 2 -o "$dir/dp.tfplan"
setup "compile it with every update after the backward pass" "$tf" compile "$dir/mlp.tfg" --set N=16 --lr 1e30 \
  --no-update-in-backward -o "$dir/hot_after.tfplan"
setup "train mlp 2 steps with a checkpoint" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train \
  --steps 2 --checkpoint "$dir/ck"
setup "make_inputs.py" "$python" "$here/make_inputs.py" "$dir"
# Plans: cut, empty, short, a root offset past the end, another identifier.
head -c 300 "$dir/mlp.tfplan" > "$dir/cut.tfplan"
: > "$dir/empty.tfplan"
printf 'TF' > "$dir/short.tfplan"
printf '\377\377\377\177TFPL\000\000\000\000' > "$dir/root_past_end.tfplan"
{ head -c 4 "$dir/mlp.tfplan"; printf 'XXXX'; tail -c +9 "$dir/mlp.tfplan"; } > "$dir/identifier.tfplan"
# Paths that are not regular files.
mkfifo "$dir/pipe.tfg"
mkdir "$dir/folder.tfg" "$dir/empty_data"
# E300-E305 (data that changes underfoot, signals and locks; tests/faults_runtime checks more):
# busy/: a checkpoint folder whose train.lock another process holds (flock(1), the lock train takes),
# with pid 4242 written in it; the holder exits once $dir is gone. rewritten/: the digits set
# trained on once (its data check cached), then one NaN written into x.npy in place (sample 1000,
# feature 20) and the old modification time put back (touch -r). big_feature/: the digits set with
# feature 10 of every sample 1e20, which hot.tfplan's learning rate of 1e30 turns into infinite
# weights at step 1 while the loss stays finite.
mkdir "$dir/busy" "$dir/rewritten" "$dir/big_feature"
echo 4242 > "$dir/busy/train.lock"
flock "$dir/busy/train.lock" sh -c 'while [ -d "$1" ]; do sleep 1; done' sh "$dir" > /dev/null 2>&1 &
for wait in 1 2 3 4 5 6 7 8 9 10; do flock -n "$dir/busy/train.lock" true || break; sleep 0.2; done
cp models/data/digits/train/x.npy models/data/digits/train/labels.npy "$dir/rewritten/"
setup "train on rewritten/ once" "$tf" train "$dir/mlp.tfplan" --data "$dir/rewritten" --steps 1
cp -p "$dir/rewritten/x.npy" "$dir/rewritten.x.npy"
setup "rewrite rewritten/x.npy" "$python" -c 'import sys, numpy as np
x = np.load(sys.argv[1], mmap_mode="r+"); x[1000, 20] = np.nan; x.flush()
y = np.load(sys.argv[2]); y[:, 10] = 1e20; np.save(sys.argv[3] + "/x.npy", y)' "$dir/rewritten/x.npy" \
  models/data/digits/train/x.npy "$dir/big_feature"
touch -r "$dir/rewritten.x.npy" "$dir/rewritten/x.npy"
cp models/data/digits/train/labels.npy "$dir/big_feature/"
# E380-E384 (dtypes, static shapes, plan checksums): ONNX's test_add (x, y [3,4,5], no batch symbol)
# imported and compiled for inference; static_short/ gives x 20 elements; damaged.tfplan flips bit 0
# of the plan's checksum (the trailer's first byte, 16 bytes before the end).
setup "import test_add" "$tf" import /usr/share/libonnx-testdata/data/node/test_add/model.onnx -o "$dir/static.tfg"
setup "compile test_add" "$tf" compile "$dir/static.tfg" --inference -o "$dir/static.tfplan"
mkdir "$dir/static_short"
setup "static_short" "$python" -c 'import sys, numpy as np
np.save(sys.argv[1] + "/x.npy", np.ones((4, 5), np.float32)); np.save(sys.argv[1] + "/y.npy", np.ones((3, 4, 5), np.float32))' \
  "$dir/static_short"
setup "damaged.tfplan" "$python" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-16] ^= 1
open(sys.argv[2], "wb").write(b)' "$dir/static.tfplan" "$dir/damaged.tfplan"
# E385: the fuzz seed conv.onnx imported (its weights file carries checksums), bit 0 of the second
# byte of tensor 'w' flipped, compiled for inference.
mkdir "$dir/flipped_import"
setup "import conv.onnx" "$tf" import tests/fuzz/corpus/onnx/conv.onnx -o "$dir/flipped_import/conv.tfg"
setup "flip a bit of w" "$python" -c 'import json, sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read())
n = int.from_bytes(b[:8], "little"); b[8 + n + json.loads(b[8:8 + n])["w"]["data_offsets"][0] + 1] ^= 1
open(p, "wb").write(b)' "$dir/flipped_import/conv.safetensors"
setup "compile conv" "$tf" compile "$dir/flipped_import/conv.tfg" --inference -o "$dir/flipped_import/conv.tfplan"

# ---- the rows: | id | input | `command` | exit | `message` | ----
# A `\|` in a cell is a literal '|'; a cell in double backticks may hold single ones.
awk -F'|' '
  function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
  function unspan(s) {
    if (s ~ /^`` .* ``$/) return substr(s, 4, length(s) - 6)
    if (s ~ /^`.*`$/) return substr(s, 2, length(s) - 2)
    return s
  }
  /^\| *E[0-9]+ *\|/ {
    line = $0
    gsub(/\\\|/, "\001", line)
    n = split(line, cell, "|")
    if (n != 7) { printf "BAD\t%d\t%s\n", NR, $0; next }
    for (i = 2; i <= 6; i++) { cell[i] = unspan(trim(cell[i])); gsub(/\001/, "|", cell[i]) }
    printf "%s\t%s\t%s\t%s\n", cell[2], cell[4], cell[5], cell[6]
  }' "$doc" > "$dir/rows.tsv"

passed=0 failed=0
last_op=$(($(grep -c '^  X(' core/op_table.h) - 1))
pass() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }

while IFS="$tab" read -r id command want message; do
  if [ "$id" = BAD ]; then
    fail "$doc line $command: a row needs 5 cells: $want"
    continue
  fi
  # `<dir>` is this run's folder; mktemp's names hold no characters that the shell would expand.
  # `<last op>` is the op table's last number (core/op_table.h), so a new op changes no row.
  command=$(printf '%s\n' "$command" | sed "s#<dir>#$dir#g")
  message=$(printf '%s\n' "$message" | sed "s#<dir>#$dir#g; s#<last op>#$last_op#g")
  eval "set -- $command"
  if [ -z "$message" ] && [ "$mode" = check ]; then
    fail "$id: the row has no message"
    continue
  fi
  if [ "$1" != tightfit ]; then
    fail "$id: the command must start with 'tightfit': $command"
    continue
  fi
  shift
  timeout 20 "$tf" "$@" > "$dir/out" 2>&1 < /dev/null
  got=$?
  if [ "$mode" = print ]; then
    printf '%s\t%s\t' "$id" "$got"
    sed "s#$dir#<dir>#g" "$dir/out" | awk '{ printf "%s\\n", $0 }'
    echo
    continue
  fi
  first=$(head -n 1 "$dir/out" | sed "s#$dir#<dir>#g")
  if [ "$got" -eq 124 ]; then
    fail "$id: still running after 20 s: $command"
  elif [ "$got" -gt 128 ]; then
    fail "$id: killed by signal $((got - 128)): $command"
  elif grep -q -e 'Sanitizer' -e 'runtime error' "$dir/out"; then
    fail "$id: sanitizer report: $command"
    sed 's/^/    /' "$dir/out"
  elif [ "$got" != "$want" ]; then
    fail "$id: exit $got, expected $want: $first"
  elif ! grep -qF -- "$message" "$dir/out"; then
    fail "$id: exit $got, but the output lacks the documented message"
    echo "    expected: $(printf '%s\n' "$message" | sed "s#$dir#<dir>#g")"
    sed "s#$dir#<dir>#g; s/^/    got:      /" "$dir/out" | head -n 20
  else
    pass "$id (exit $got): $(printf '%s\n' "$message" | sed "s#$dir#<dir>#g")"
  fi
done < "$dir/rows.tsv"
[ "$mode" = print ] && exit 0

# The catalogue itself: at least 40 rows, each id once, in increasing order from E01. A section may
# open a range of its own (E300 for issue 49's), so the ids may skip numbers, never go back.
rows=$(grep -c . "$dir/rows.tsv")
if [ "$rows" -ge 40 ]; then pass "$doc has $rows rows (at least 40)"; else fail "$doc has $rows rows; at least 40 are needed"; fi
misnumbered=$(awk -F"$tab" '{ n = substr($1, 2) + 0 }
  NR == 1 && $1 != "E01" || $1 !~ /^E[0-9][0-9]+$/ || n <= last { printf "row %d is %s, after E%02d", NR, $1, last; exit }
  { last = n }' "$dir/rows.tsv")
if [ -z "$misnumbered" ]; then
  pass "the ids run from E01 to $(tail -n 1 "$dir/rows.tsv" | cut -f 1) in increasing order, each once"
else
  fail "the ids must increase from E01, each once: $misnumbered"
fi

echo "test_errors: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
