# The helpers the command-line tests share (POSIX sh; tests/cli, tests/report, tests/plan,
# tests/alloc_probe). A test sources it first thing:
#   . "$(dirname "$0")/harness.sh"
# and gets $dir, a temporary folder removed at exit; the counters $passed and $failed; pass and fail,
# which count and print one "ok:" or "FAIL:" line; expect and expect_message, which run a command
# with its stdout in $dir/out and its stderr in $dir/err; check; skip_without_numpy; external_graph,
# the mlp with a weight in a file beside it; and finish, which prints the summary and exits 1 on any
# failure. A script that can skip exits 77 itself, before or after.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0

pass() { # pass DESCRIPTION...
  passed=$((passed + 1))
  echo "ok: $*"
}
fail() { # fail DESCRIPTION...
  failed=$((failed + 1))
  echo "FAIL: $*"
}

# expect CODE DESCRIPTION COMMAND...: passes when COMMAND exits with CODE; a failure shows both outputs.
expect() {
  want=$1 what=$2
  shift 2
  "$@" > "$dir/out" 2> "$dir/err"
  got=$?
  if [ "$got" -eq "$want" ]; then
    pass "$what (exit $got)"
  else
    fail "$what: exit $got, expected $want"
    cat "$dir/out" "$dir/err"
  fi
}

# expect_message CODE DESCRIPTION PATTERN COMMAND...: passes when COMMAND exits with CODE and its
# stdout or stderr matches the grep PATTERN (a basic regular expression); expect_phrase: holds PHRASE
# as a fixed string. The ok line quotes the start of stderr, if any; a failure shows both outputs.
expect_message() { expect_output -q "$@"; }
expect_phrase() { expect_output -qF "$@"; }
expect_output() { # GREP_OPTIONS CODE DESCRIPTION PATTERN COMMAND...
  options=$1 want=$2 what=$3 pattern=$4
  shift 4
  "$@" > "$dir/out" 2> "$dir/err"
  got=$?
  if [ "$got" -eq "$want" ] && cat "$dir/out" "$dir/err" | grep "$options" -- "$pattern"; then
    message=$(head -c 300 "$dir/err")
    pass "$what (exit $got)${message:+: $message}"
  else
    fail "$what: exit $got (expected $want), output pattern '$pattern':"
    cat "$dir/out" "$dir/err" | sed 's/^/     /' | head -40
  fi
}

# check DESCRIPTION CONDITION: passes when the shell text CONDITION, eval'd, succeeds.
# check DESCRIPTION COMMAND ARG...: with more than one word, the command is run as given, not eval'd.
check() {
  what=$1
  shift
  if holds "$@"; then pass "$what"; else fail "$what"; fi
}
holds() { if [ "$#" -eq 1 ]; then eval "$1"; else "$@"; fi; }

# skip_without_numpy: exits 77 (skipped) unless /usr/bin/python3 imports numpy, which makes the data.
skip_without_numpy() {
  /usr/bin/python3 -c 'import numpy' 2> /dev/null && return 0
  echo "SKIP: /usr/bin/python3 with numpy is needed to make the data"
  exit 77
}

# external_graph TIGHTFIT GRAPH FOLDER [NAN_AT]: FOLDER/ext.tfg, the zoo mlp GRAPH with hidden.0.weight
# read from w.safetensors beside it (key imported.w0, uniform in +-0.1, seed 1), as `import` writes
# graphs; with NAN_AT, that element of the weight is NaN. Run from the repository root (flatc reads
# schema/graph.fbs); fails when a step does.
external_graph() {
  "$1" dump "$2" > "$dir/external_source.json" || return 1
  /usr/bin/python3 - "$dir/external_source.json" "$3" "${4:--1}" << 'PY' || return 1
import json, struct, sys, numpy as np
source, folder, nan_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
graph = json.load(open(source))
for t in graph["tensors"]:
    if t["name"] == "hidden.0.weight":
        t["init"] = {"kind": "external", "file": "w.safetensors", "key": "imported.w0"}
        shape = [int(d["size"]) for d in t["shape"]]
json.dump(graph, open(f"{folder}/ext.json", "w"))
w = np.random.default_rng(1).uniform(-0.1, 0.1, shape).astype("<f4")
if nan_at >= 0:
    w.flat[nan_at] = np.nan
header = json.dumps({"imported.w0": {"dtype": "F32", "shape": shape, "data_offsets": [0, w.nbytes]}}).encode()
header += b" " * (-len(header) % 8)
open(f"{folder}/w.safetensors", "wb").write(struct.pack("<Q", len(header)) + header + w.tobytes())
PY
  (root=$(pwd) && cd "$3" && flatc -b -I "$root/schema" "$root/schema/graph.fbs" ext.json &&
    { [ -e ext.tfg ] || mv ext.bin ext.tfg; })
}

# finish [NAME]: prints "NAME: N passed, M failed" and exits 1 on any failure, else 0.
finish() {
  echo "${1:+$1: }$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && exit 0
  exit 1
}
