# The helpers the command-line tests share (POSIX sh; tests/cli, tests/report, tests/plan,
# tests/alloc_probe). A test sources it first thing:
#   . "$(dirname "$0")/harness.sh"
# and gets $dir, a temporary folder removed at exit; the counters $passed and $failed; pass and fail,
# which count and print one "ok:" or "FAIL:" line; expect and expect_message, which run a command
# with its stdout in $dir/out and its stderr in $dir/err; check; and finish, which prints the
# summary and exits 1 on any failure. A script that can skip exits 77 itself, before or after.
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

# finish [NAME]: prints "NAME: N passed, M failed" and exits 1 on any failure, else 0.
finish() {
  echo "${1:+$1: }$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && exit 0
  exit 1
}
