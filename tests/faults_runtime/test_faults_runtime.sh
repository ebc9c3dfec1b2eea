#!/bin/sh
# Runtime faults of issue 49 through `tightfit train`, one per run of this script:
#   truncated  a data file truncated while train reads it: exit 2 naming the file (it was SIGBUS)
#   rewritten  a data file rewritten with a NaN and its modification time restored: the data check
#              notices (the cache took it), and non-finite weights after the last step: exit 2
#              naming the tensor even without --checkpoint (it was exit 0)
#   signals    SIGHUP saves the checkpoint as TERM and INT do (it killed the run unsaved), and
#              --checkpoint-every-minutes saves while the run goes on
#   lock       a second train on a checkpoint folder in use is refused at once naming the folder and
#              the first run's pid (both ran, the last writer won); a dead run's lock file blocks nothing
# Runs that train until stopped are started in the background and waited for with a deadline; no
# result depends on how fast a step is: each check waits for an event (a logged step, a file), and
# a run that never gets there fails the check.
# usage: test_faults_runtime.sh TIGHTFIT FAULT   (run from the repository root; /usr/bin/python3 +
# numpy make the data of 'rewritten')
tf=$1 fault=$2
. "$(dirname "$0")/../cli/harness.sh"
export TIGHTFIT_CACHE_DIR="$dir/cache"
python=/usr/bin/python3
digits=models/data/digits/train
forever=1000000000 # --steps of a run that goes on until a signal or a fault stops it
"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null || exit 1
"$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/mlp.tfplan" > /dev/null || exit 1

# alive PID: the process exists and has not exited (a zombie that was not waited for is not alive).
alive() { grep -q '^State:[[:space:]]*[^ZX]' "/proc/$1/status" 2> /dev/null; }

# await SECONDS CONDITION: polls the shell text CONDITION every 0.1 s; false when it never held.
await() {
  tries=$(($1 * 10))
  while [ "$tries" -gt 0 ]; do
    eval "$2" && return 0
    sleep 0.1
    tries=$((tries - 1))
  done
  return 1
}

# start NAME ARGS...: starts `tightfit train ARGS` in the background (stdout $dir/NAME.out, stderr
# $dir/NAME.err, its pid in $pid) and returns once it logged a step; false (with its output shown)
# when it exited or logged nothing within 60 s.
start() {
  name=$1
  shift
  "$tf" train "$@" > "$dir/$name.out" 2> "$dir/$name.err" &
  pid=$!
  await 60 "grep -qs '^step' '$dir/$name.out' || ! alive $pid"
  if alive "$pid" && grep -q '^step' "$dir/$name.out"; then return 0; fi
  reap "$pid" 1
  fail "$name: no step logged while it ran (exit $rc):"
  sed 's/^/     /' "$dir/$name.out" "$dir/$name.err" | head -20
  return 1
}

# reap PID SECONDS: waits for PID to exit, killing it after SECONDS; its exit status in $rc.
reap() {
  await "$2" "! alive $1" || kill -KILL "$1" 2> /dev/null
  wait "$1"
  rc=$?
}

case $fault in
truncated)
  # The .npy is memory-mapped: once the file shrinks, reading a sample past its new end faults.
  mkdir "$dir/data"
  cp "$digits/x.npy" "$digits/labels.npy" "$dir/data/"
  x=$(realpath "$dir/data/x.npy")
  start truncated "$dir/mlp.tfplan" --data "$dir/data" --steps $forever --log-every 100 || finish faults_truncated
  truncate -s 128 "$dir/data/x.npy" # the header stays, the samples go
  reap "$pid" 60
  echo "     stderr: $(cat "$dir/truncated.err")"
  check "x.npy truncated to 128 bytes while train runs: exit 2 (got $rc; 135 is SIGBUS)" [ "$rc" -eq 2 ]
  check "the message names the file and its new size" \
    grep -qF "$x: the file shrank to 128 bytes while tightfit was reading it" "$dir/truncated.err"
  ;;
rewritten)
  if ! "$python" -c 'import numpy' 2> /dev/null; then
    echo "SKIP: $python with numpy is needed to rewrite the data"
    exit 77
  fi
  mkdir "$dir/data"
  cp "$digits/x.npy" "$digits/labels.npy" "$dir/data/"
  expect 0 "the first run scans the data and caches the verdict" \
    "$tf" train "$dir/mlp.tfplan" --data "$dir/data" --steps 2
  check "the cache holds the verdicts" "[ \$(ls '$dir/cache' | grep -c '^data-.*\\.ok\$') -eq 2 ]"
  # The tester's rewrite: one NaN (sample 1000, feature 20) written in place, the size unchanged,
  # the modification time put back with touch -r. Only the change time (which no user can set)
  # and the content differ.
  cp -p "$dir/data/x.npy" "$dir/x.before" # a reference for touch -r
  before=$(stat -c 'size %s, mtime %y, ctime %z, inode %i' "$dir/data/x.npy")
  "$python" - "$dir/data/x.npy" << 'PY'
import sys, numpy as np
x = np.load(sys.argv[1], mmap_mode="r+")
x[1000, 20] = np.nan
x.flush()
PY
  touch -r "$dir/x.before" "$dir/data/x.npy"
  echo "     before: $before"
  echo "     after:  $(stat -c 'size %s, mtime %y, ctime %z, inode %i' "$dir/data/x.npy")"
  check "same size and modification time after the rewrite" \
    "[ \"\$(stat -c '%s %y' '$dir/x.before')\" = \"\$(stat -c '%s %y' '$dir/data/x.npy')\" ]"
  expect_phrase 2 "the rewritten file is scanned again: its NaN found" "x.npy: sample 1000, element 20 is nan" \
    "$tf" train "$dir/mlp.tfplan" --data "$dir/data" --steps 2

  # Non-finite weights after the last step, without --checkpoint: a learning rate of 1e30 and a
  # feature of 1e20 give a finite loss and finite gradients at step 1, and an update past float's
  # range. The end of the run scans the weights: exit 2 naming the tensor (it was exit 0, and the
  # held-out loss NaN).
  "$tf" compile "$dir/mlp.tfg" --set N=32 --lr 1e30 --no-update-in-backward -o "$dir/hot.tfplan" > /dev/null
  mkdir "$dir/big"
  "$python" - "$digits" "$dir/big" << 'PY'
import sys, numpy as np
x = np.load(sys.argv[1] + "/x.npy")
x[:, 10] = 1e20
np.save(sys.argv[2] + "/x.npy", x)
np.save(sys.argv[2] + "/labels.npy", np.load(sys.argv[1] + "/labels.npy"))
PY
  expect_phrase 2 "weights inf after the last step, no --checkpoint: refused" \
    "after step 1 (the end of the run): parameter 'hidden.0.weight' element 74 is inf" \
    "$tf" train "$dir/hot.tfplan" --data "$dir/big" --steps 1 --eval models/data/digits/test
  check "no held-out score printed for the broken weights" "! grep -q held-out '$dir/out'"
  expect_phrase 2 "the same with --check-finite off" "parameter 'hidden.0.weight' element 74 is inf" \
    "$tf" train "$dir/hot.tfplan" --data "$dir/big" --steps 1 --check-finite off
  ;;
signals)
  start hup "$dir/mlp.tfplan" --data "$digits" --steps $forever --log-every 100 --checkpoint "$dir/hup" \
    --eval models/data/digits/test || finish faults_signals
  kill -HUP "$pid"
  reap "$pid" 60
  echo "     stderr: $(cat "$dir/hup.err")"
  check "SIGHUP: exit 1 as for TERM and INT (got $rc; 129 is killed by HUP)" [ "$rc" -eq 1 ]
  check "SIGHUP: the checkpoint saved" test -s "$dir/hup/latest.safetensors"
  check "SIGHUP: 'checkpoint saved' said" grep -q "^interrupted after [0-9]* steps; checkpoint saved" "$dir/hup.err"
  # --eval is skipped after a stop (issue 44: it printed 'held-out: loss nan')
  check "SIGHUP with --eval: no held-out score, 'not evaluated'" \
    sh -c "! grep -q 'held-out: loss' '$dir/hup.out' && grep -q 'held-out: not evaluated (interrupted)' '$dir/hup.out'"

  # SIGHUP after the reader of a piped stdout went (`train | tee log` in a closed ssh session): the
  # summary's write must fail, not kill the run (SIGPIPE, exit 141). The run logs nothing before
  # its end (--log-every past --steps); a checkpoint every step says that it is in its loop.
  mkfifo "$dir/pipe"
  cat "$dir/pipe" > /dev/null &
  reader=$!
  "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps $forever --log-every $forever --checkpoint "$dir/piped" \
    --checkpoint-every 1 > "$dir/pipe" 2> "$dir/piped.err" &
  pid=$!
  await 60 "[ -s '$dir/piped/latest.safetensors' ] || ! alive $pid"
  kill "$reader"
  wait "$reader" 2> /dev/null
  kill -HUP "$pid"
  reap "$pid" 60
  echo "     stderr: $(cat "$dir/piped.err")"
  check "SIGHUP with stdout a broken pipe: exit 1 (got $rc; 141 is killed by SIGPIPE)" [ "$rc" -eq 1 ]

  # --checkpoint-every-minutes 0.01: a save every 0.6 s while the run goes on. Nothing else saves
  # before the TERM below (no step-based saving, no end), so a file there is a timed save.
  start timed "$dir/mlp.tfplan" --data "$digits" --steps $forever --log-every 100 --checkpoint "$dir/timed" \
    --checkpoint-every-minutes 0.01 || finish faults_signals
  await 30 "[ -s '$dir/timed/latest.safetensors' ]"
  check "--checkpoint-every-minutes 0.01: a checkpoint while the run goes on" \
    "[ -s '$dir/timed/latest.safetensors' ] && alive $pid"
  cp "$dir/timed/latest.safetensors" "$dir/first.safetensors" 2> /dev/null
  await 30 "! cmp -s '$dir/timed/latest.safetensors' '$dir/first.safetensors'"
  check "... and another, later one (the weights in it differ)" \
    "[ -s '$dir/first.safetensors' ] && ! cmp -s '$dir/timed/latest.safetensors' '$dir/first.safetensors' && alive $pid"
  kill -TERM "$pid"
  reap "$pid" 60
  check "the timed run stops on TERM with exit 1 (got $rc)" [ "$rc" -eq 1 ]
  expect_phrase 2 "--checkpoint-every-minutes 0" "--checkpoint-every-minutes takes a number of minutes > 0" \
    "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 1 --checkpoint "$dir/x" --checkpoint-every-minutes 0
  expect_phrase 2 "--checkpoint-every-minutes nan" "--checkpoint-every-minutes takes a number of minutes > 0" \
    "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 1 --checkpoint "$dir/x" --checkpoint-every-minutes nan
  expect_phrase 2 "--checkpoint-every-minutes without --checkpoint" \
    "--checkpoint-every-minutes needs --checkpoint DIR" \
    "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 1 --checkpoint-every-minutes 5
  ;;
lock)
  start first "$dir/mlp.tfplan" --data "$digits" --steps $forever --log-every 100 --checkpoint "$dir/shared" ||
    finish faults_lock
  first=$pid
  expect_phrase 2 "a second train on the same folder is refused" \
    "$dir/shared: checkpoint folder in use by another tightfit train (pid $first)" \
    timeout 20 "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 1 --checkpoint "$dir/shared"
  check "the first run still trains" alive "$first"
  check "the refused run wrote no checkpoint" test ! -e "$dir/shared/latest.safetensors"
  expect_phrase 2 "... and so is --resume from it" "checkpoint folder in use by another tightfit train (pid $first)" \
    timeout 20 "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 1 --checkpoint "$dir/shared" --resume
  kill -TERM "$first"
  reap "$first" 60
  check "the first run stops on TERM with exit 1 (got $rc) and saves" \
    "[ $rc -eq 1 ] && [ -s '$dir/shared/latest.safetensors' ]"
  check "its lock file stays, with its pid ($(cat "$dir/shared/train.lock" 2> /dev/null))" \
    "[ \"\$(cat '$dir/shared/train.lock')\" = $first ]"
  expect_phrase 0 "the dead run's lock file does not block a resume" "resumed from" \
    "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 2 --checkpoint "$dir/shared" --resume
  printf 'x' > "$dir/file"
  expect_phrase 2 "--checkpoint naming a file" "$dir/file: cannot use as the checkpoint folder: Not a directory" \
    "$tf" train "$dir/mlp.tfplan" --data "$digits" --steps 1 --checkpoint "$dir/file"
  ;;
*)
  echo "usage: test_faults_runtime.sh TIGHTFIT truncated|rewritten|signals|lock" >&2
  exit 2
  ;;
esac
finish "faults_$fault"
