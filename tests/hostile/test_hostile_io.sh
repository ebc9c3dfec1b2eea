#!/bin/sh
# Hostile paths through the command line (issue 18): each command runs under `timeout 10`, so a
# reader that blocks on a FIFO or reads /dev/zero forever fails the test instead of hanging it.
#   inputs:  a character device, a FIFO, a folder and a sparse 3 GiB graph are refused (exit 2);
#   outputs: -o through a symbolic link writes the file it points to; -o naming a FIFO, a folder
#            or a device node (made here with mknod, never /dev/null itself) is refused and the
#            node is left as it was; a temporary left by a killed save is removed by the next save;
#   resume:  checkpoint counters planted out of range or inconsistent are refused (exit 2).
# usage: test_hostile_io.sh TIGHTFIT ST_SET_METADATA   (run from the repository root)
tf=$1 set_metadata=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }

# refuse DESCRIPTION PHRASE COMMAND...: COMMAND must exit 2 within 10 s with PHRASE in its message.
refuse() {
  what=$1 phrase=$2
  shift 2
  timeout 10 "$@" > "$dir/out" 2> "$dir/err" < /dev/null
  got=$?
  message=$(cat "$dir/err")
  if [ "$got" -eq 124 ]; then
    fail "$what: still running after 10 s (blocked, or reading without end)"
  elif [ "$got" -ne 2 ]; then
    fail "$what: exit $got, expected 2: $message"
  else
    case $message in
    *"$phrase"*) pass "$what (exit 2): $message" ;;
    *) fail "$what: the message lacks '$phrase': $message" ;;
    esac
  fi
  case $message in *Sanitizer*|*"runtime error"*) fail "$what: sanitizer report" ;; esac
}

# succeed DESCRIPTION COMMAND...: COMMAND must exit 0 within 60 s.
succeed() {
  what=$1
  shift
  timeout 60 "$@" > "$dir/out" 2> "$dir/err" < /dev/null
  got=$?
  if [ "$got" -eq 0 ]; then pass "$what"; else fail "$what: exit $got: $(cat "$dir/err")"; fi
}

# ---- inputs ----
refuse "inspect /dev/zero" "/dev/zero: not a regular file (it is a character device)" "$tf" inspect /dev/zero
mkfifo "$dir/pipe.tfg"
refuse "inspect a FIFO without a writer" "pipe.tfg: not a regular file (it is a FIFO)" "$tf" inspect "$dir/pipe.tfg"
refuse "report a FIFO" "pipe.tfg: not a regular file (it is a FIFO)" "$tf" report "$dir/pipe.tfg"
refuse "inspect a folder" "not a regular file (it is a folder)" "$tf" inspect "$dir"
if truncate -s 3G "$dir/huge.tfg" 2> /dev/null; then
  refuse "inspect a sparse 3 GiB graph" \
    "huge.tfg: 3221225472 bytes, more than the 2147483647-byte bound for graph and plan files" \
    "$tf" inspect "$dir/huge.tfg"
  rm -f "$dir/huge.tfg"
else
  echo "skipped: no sparse files here"
fi

succeed "zoo mlp" "$tf" zoo mlp -o "$dir/mlp.tfg"
succeed "compile" "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/mlp.tfplan"
mkdir "$dir/fifo_data"
cp models/data/digits/train/labels.npy "$dir/fifo_data/"
mkfifo "$dir/fifo_data/x.npy"
refuse "train on a FIFO x.npy" "x.npy: not a regular file (it is a FIFO)" \
  "$tf" train "$dir/mlp.tfplan" --data "$dir/fifo_data" --steps 1

# ---- outputs ----
printf 'old' > "$dir/real.tfplan"
ln -s real.tfplan "$dir/link.tfplan"
succeed "compile -o a symbolic link" "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/link.tfplan"
magic=$(head -c 8 "$dir/real.tfplan" | tail -c 4)
if [ -L "$dir/link.tfplan" ] && [ "$magic" = "TFPL" ]; then
  pass "-o link.tfplan wrote the plan into real.tfplan; the link is still a link"
else
  fail "-o through a link: link.tfplan is $(ls -l "$dir/link.tfplan"), real.tfplan starts '$magic'"
fi
printf 'old' > "$dir/real.tfg"
ln -s real.tfg "$dir/link.tfg"
succeed "zoo -o a symbolic link" "$tf" zoo mlp -o "$dir/link.tfg"
magic=$(head -c 8 "$dir/real.tfg" | tail -c 4)
if [ -L "$dir/link.tfg" ] && [ "$magic" = "TFGR" ]; then
  pass "zoo -o link.tfg wrote the graph into real.tfg; the link is still a link (it replaced the link before)"
else
  fail "zoo -o through a link: link.tfg is $(ls -l "$dir/link.tfg"), real.tfg starts '$magic'"
fi

mkfifo "$dir/out.fifo"
refuse "compile -o a FIFO" "out.fifo: not a regular file (it is a FIFO)" \
  "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/out.fifo"
if [ -p "$dir/out.fifo" ]; then pass "the FIFO is still a FIFO"; else fail "the FIFO was replaced"; fi
mkdir "$dir/folder.tfplan"
refuse "compile -o a folder" "folder.tfplan: not a regular file (it is a folder)" \
  "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/folder.tfplan"
if mknod "$dir/null" c 1 3 2> /dev/null; then
  refuse "compile -o a character device" "null: not a regular file (it is a character device)" \
    "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/null"
  if [ -c "$dir/null" ]; then pass "the device node is still a device node"; else fail "the device node was replaced"; fi
else
  echo "skipped: mknod needs root"
fi
leftovers=$(ls "$dir" | grep -c '\.tmp')
if [ "$leftovers" -eq 0 ]; then pass "no temporaries beside refused outputs"; else fail "$leftovers temporaries left"; fi

# A save killed mid-write leaves "<target>.tmp<pid>"; the next save to the target removes it when
# that process is gone, and keeps one whose process runs (this shell's).
dead=$(sh -c 'echo $$')
if kill -0 "$dead" 2> /dev/null; then
  echo "skipped: process $dead still runs"
else
  head -c 100000 /dev/zero > "$dir/again.tfplan.tmp$dead"
  head -c 100000 /dev/zero > "$dir/again.tfplan.tmp$$"
  succeed "compile -o again.tfplan beside leftovers" "$tf" compile "$dir/mlp.tfg" --set N=32 -o "$dir/again.tfplan"
  if [ ! -e "$dir/again.tfplan.tmp$dead" ]; then
    pass "the leftover of gone process $dead was removed"
  else
    fail "the leftover again.tfplan.tmp$dead of gone process $dead is still there"
  fi
  if [ -e "$dir/again.tfplan.tmp$$" ]; then pass "the temporary of running process $$ was kept"; else
    fail "the temporary of running process $$ was removed"; fi
  rm -f "$dir/again.tfplan.tmp$$"
fi

# ---- checkpoint counters ----
succeed "train 2 steps with a checkpoint" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 2 \
  --checkpoint "$dir/ck"
mkdir "$dir/bad"
resume_with() { # resume_with DESCRIPTION PHRASE KEY=VALUE...
  what=$1 phrase=$2
  shift 2
  if "$set_metadata" "$dir/ck/latest.safetensors" "$dir/bad/latest.safetensors" "$@"; then
    refuse "$what" "$phrase" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train --steps 1 \
      --checkpoint "$dir/bad" --resume
  else
    fail "$what: could not plant $*"
  fi
}
resume_with "resume with micro_step 99999999999999999999999" \
  "metadata 'tightfit.micro_step' is 99999999999999999999999, outside 0..9007199254740992" \
  tightfit.micro_step=99999999999999999999999
resume_with "resume with micro_step 3e17" \
  "metadata 'tightfit.micro_step' is 300000000000000000, outside 0..9007199254740992" \
  tightfit.micro_step=300000000000000000
resume_with "resume with counters at INT64_MAX" \
  "metadata 'tightfit.optimizer_step' is 9223372036854775807, outside 0..9007199254740992" \
  tightfit.optimizer_step=9223372036854775807 tightfit.micro_step=9223372036854775807
resume_with "resume with micro_step inconsistent with optimizer_step" \
  "'tightfit.micro_step' is 3, but 'tightfit.optimizer_step' 2 x 'tightfit.accumulate' 1 needs it to be 2" \
  tightfit.micro_step=3
# the checkpoint is at step 2; --steps is the step to reach, so this trains one step from it
succeed "resume from the checkpoint as saved" "$tf" train "$dir/mlp.tfplan" --data models/data/digits/train \
  --steps 3 --checkpoint "$dir/ck" --resume
if grep -q "from step 2 to 3" "$dir/out"; then pass "  it trained from step 2 to 3"; else fail "  it did not train from step 2 to 3: $(tail -n 1 "$dir/out")"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
