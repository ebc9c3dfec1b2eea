#!/bin/sh
# A data-parallel job (issue 45) refuses mismatched ranks at start and ends, never hangs, when one
# rank fails or dies. docs/errors.md's D rows (mpirun's MPMD form, one process each side of ':':
# another plan, --steps or data set on rank 1; the wrong process count; rank 0's checkpoint lock
# taken) are run here, as the errors test runs the E rows. Refused by every rank, naming rank 1 and
# how it differs: another data set under the same --data path. Ended within bounded time (each
# mpirun under `timeout 60`: a hang fails with 124): rank 1's data unreadable and rank 0's checkpoint
# folder locked by another run (the failing rank names itself and calls MPI_Abort: without it, it
# would wait in MPI_Finalize for ranks that wait in a sum; these two run mpirun with
# orte_abort_on_non_zero_status off, so that a rank's exit code is not what ends the job, as under
# launchers other than Open MPI's); rank 1 killed (SIGKILL) mid-run (Open MPI's mpirun ends the job,
# naming rank 1); rank 1 alone sent SIGTERM: every rank stops after the same step and rank 0 saves
# that step's checkpoint. SKIPs (exit 77) without mpirun or without MPI in the build.
# usage: test_ranks_failures.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
mpi="timeout 60 mpirun --allow-run-as-root --oversubscribe"
# the job ends only when the failing rank ends it (this switch also makes mpirun's own exit 0 then)
mpi_own="$mpi --mca orte_abort_on_non_zero_status 0"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
data=$(pwd)/models/data/text/train
tf=$(cd "$(dirname "$tf")" && pwd)/$(basename "$tf") # the ranks below run in other folders

"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
compile() { # compile NAME OPTIONS...
  name=$1
  shift
  expect 0 "compile $name" "$tf" compile "$dir/gpt.tfg" --set N=4,T=32 --optimizer adamw --fuse-loss off "$@" \
    -o "$dir/$name.tfplan"
}
compile dp --ranks 2
compile other --ranks 2 --lr 0.01
compile alone
"$tf" train "$dir/dp.tfplan" --data "$data" --steps 1 > "$dir/out" 2> "$dir/err"
if grep -q "this build has no MPI" "$dir/err"; then
  echo "SKIP: this build has no MPI: $(cat "$dir/err")"
  exit 77
fi
train="train --steps 3 --threads 1"

# ---- docs/errors.md's D rows: | id | input | `command` | exit | `message` | ----
mkdir "$dir/busy"
flock "$dir/busy/train.lock" sh -c 'while [ -d "$1" ]; do sleep 1; done' sh "$dir" > /dev/null 2>&1 &
for wait in 1 2 3 4 5 6 7 8 9 10; do flock -n "$dir/busy/train.lock" true || break; sleep 0.2; done
tab=$(printf '\t')
awk -F'|' '
  function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
  function unspan(s) { return s ~ /^`.*`$/ ? substr(s, 2, length(s) - 2) : s }
  /^\| *D[0-9]+ *\|/ { printf "%s\t%s\t%s\t%s\n", trim($2), unspan(trim($4)), trim($5), unspan(trim($6))
}' docs/errors.md > "$dir/rows.tsv"
rows=0
while IFS="$tab" read -r id command want message; do
  rows=$((rows + 1))
  command=$(printf '%s\n' "$command" | sed "s#<dir>#$dir#g")
  message=$(printf '%s\n' "$message" | sed "s#<dir>#$dir#g")
  eval "set -- $command"
  if [ "$1" != mpirun ]; then
    fail "$id: the command must start with 'mpirun': $command"
    continue
  fi
  shift
  for word; do # each 'tightfit' is the binary under test
    shift
    [ "$word" = tightfit ] && word=$tf
    set -- "$@" "$word"
  done
  $mpi "$@" < /dev/null > "$dir/out" 2>&1
  got=$?
  if [ "$got" = "$want" ] && grep -qF -- "$message" "$dir/out"; then
    pass "$id (exit $got): $message"
  else
    fail "$id: exit $got (expected $want), or the output lacks: $message"
    sed 's/^/    got: /' "$dir/out" | head -n 20
  fi
done < "$dir/rows.tsv"
check "docs/errors.md has the D rows D01..D08 ($rows)" "[ $rows -ge 8 ]"
cp "$dir/dp.tfplan" "$dir/copy.tfplan"
expect 0 "the same plan under another name, other --threads: one job" \
  $mpi -np 1 "$tf" $train "$dir/dp.tfplan" --data "$data" : -np 1 "$tf" train --steps 3 --threads 2 \
  "$dir/copy.tfplan" --data "$data"

# Each rank in its own folder (r0, r1), where the relative path `data` is its data set.
mkdir -p "$dir/r0/data" "$dir/r1/data"
cp "$data/tokens.npy" "$dir/r0/data/"
in_folders() { # in_folders [--own] TRAIN_ARGUMENTS...: mpirun -np 2 (--own: $mpi_own), rank R in $dir/rR,
  # its pid in $dir/pid.R
  launch=$mpi
  [ "$1" = --own ] && launch=$mpi_own && shift
  $launch -np 2 sh -c 'cd "$0/r$OMPI_COMM_WORLD_RANK" && echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK" && exec "$@"' \
    "$dir" "$tf" "$@"
}
head -c 100000 "$data/tokens.npy" > "$dir/r1/data/tokens.npy"
expect_message 2 "another data set under rank 1's --data" \
  "rank 1 of 2 has --data data: tokens.npy 100000 bytes, rank 0 --data data: tokens.npy 126664 bytes" \
  in_folders $train ../dp.tfplan --data data

# ---- one rank fails: it names itself and ends the job ----
head -c 126664 /dev/zero > "$dir/r1/data/tokens.npy" # the same size, but not a .npy file
expect_message 2 "rank 1's data unreadable: the job ends" \
  "tightfit train: rank 1 of 2 failed (exit 2): ending the job (MPI_Abort)" in_folders --own $train ../dp.tfplan --data data
check "... and rank 1 said why" "grep -q \"rank 1 of 2: data for input 'tokens': data/tokens.npy: not a .npy file\" '$dir/err'"
expect_message 2 "rank 0's checkpoint folder locked by another run: the job ends" \
  "tightfit train: rank 0 of 2 failed (exit 2): ending the job (MPI_Abort)" \
  $mpi_own -np 2 "$tf" $train "$dir/dp.tfplan" --data "$data" --checkpoint "$dir/busy"
check "... and rank 0 said why" "grep -q 'rank 0 of 2: .*busy: checkpoint folder in use' '$dir/err'"

# ---- a rank killed, a rank signalled: in the middle of a long run ----
cp "$data/tokens.npy" "$dir/r1/data/"
long_run() { # long_run: 100000 steps in the folders, in the background, until rank 1 has printed
  rm -f "$dir/pid.0" "$dir/pid.1" "$dir/long.out"
  in_folders train --steps 100000 --threads 1 --json ../dp.tfplan --data data --checkpoint ../ck \
    > "$dir/long.out" 2> "$dir/long.err" &
  job=$!
  for wait in $(seq 100); do [ -s "$dir/long.out" ] && [ -s "$dir/pid.1" ] && break; sleep 0.1; done
}
long_run
kill -KILL "$(cat "$dir/pid.1")"
wait $job
code=$?
if [ "$code" != 0 ] && [ "$code" != 124 ] && grep -q "process rank 1 .* exited on signal 9" "$dir/long.err"; then
  pass "rank 1 killed mid-run: mpirun ends the job (exit $code), naming rank 1"
else
  fail "rank 1 killed mid-run: exit $code (124: still running after 60 s)"
  cat "$dir/long.err"
fi
long_run
kill -TERM "$(cat "$dir/pid.1")"
wait $job
code=$?
/usr/bin/python3 - "$dir" "$code" << 'PY' && passed=$((passed + 1)) || fail "rank 1 alone stopped: every rank stops"
import json, struct, sys
d, code = sys.argv[1], int(sys.argv[2])
err = open(f"{d}/long.err").read()
steps = [json.loads(line)["step"] for line in open(f"{d}/long.out") if line.startswith('{"step"')]
data = open(f"{d}/ck/latest.safetensors", "rb").read()
saved = int(json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])["__metadata__"]["tightfit.optimizer_step"])
stopped = [line for line in err.splitlines() if line.startswith("interrupted after")]
print(f"SIGTERM to rank 1: exit {code}; rank 0 printed steps 1..{steps[-1]}, saved step {saved}; {stopped}")
assert code == 1 and steps == list(range(1, len(steps) + 1)) and saved == steps[-1]
assert sorted(stopped) == [f"interrupted after {saved} steps", f"interrupted after {saved} steps; checkpoint saved"]
print("ok: rank 1 alone signalled: both ranks stop after the same step and rank 0 saves it (exit 1)")
PY
finish test_ranks_failures
