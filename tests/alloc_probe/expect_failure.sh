#!/bin/sh
# The test of the test: runs a probe test linked with a runtime broken on purpose and passes only
# when it failed the way it must, so that it cannot pass for a wrong reason:
#   - exit status 1 (failed checks), not 0 (the breakage went unseen), 77 (skipped: no probe) or a
#     crash (a signal, or a sanitizer report, which also ends in 1: hence the next two);
#   - the probe was counting ("probe: interposed malloc" or "probe: sanitizer allocator hooks");
#   - it ran to its summary line ("alloc_probe: N passed, M failed");
#   - MUST_SAY is among its failures, and MUST_NOT_SAY (when not empty) is not.
# With --may-skip, a skip (exit status 77: no Vulkan device, or no driver split in a sanitizer
# build) is passed on as a skip.
# usage: expect_failure.sh [--may-skip] MUST_SAY MUST_NOT_SAY COMMAND...
may_skip=0
[ "$1" = "--may-skip" ] && { may_skip=1; shift; }
must=$1 must_not=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The leak is the breakage itself: LeakSanitizer's report at exit would replace the exit status.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$@" > "$out" 2>&1
status=$?
cat "$out"
echo "---- expect_failure.sh: exit status $status"
if [ "$status" -eq 77 ] && [ "$may_skip" -eq 1 ] && grep -q '^SKIP' "$out"; then
  echo "skipped: the broken runtime could not be tried here"
  exit 77
fi
ok=1
[ "$status" -eq 1 ] || { echo "FAIL: expected exit status 1 (checks failed), got $status"; ok=0; }
grep -Eq '^probe: (interposed malloc|sanitizer allocator hooks)' "$out" ||
  { echo "FAIL: the probe was not counting"; ok=0; }
grep -Eq '^alloc_probe: [0-9]+ passed, [1-9][0-9]* failed$' "$out" ||
  { echo "FAIL: no summary with failures: the run did not end normally"; ok=0; }
grep '^FAIL' "$out" | grep -qF "$must" || { echo "FAIL: no failure says '$must'"; ok=0; }
if [ -n "$must_not" ] && grep -qF "$must_not" "$out"; then
  echo "FAIL: a failure says '$must_not', which this breakage must not cause"
  ok=0
fi
[ "$ok" -eq 1 ] && echo "ok: the broken runtime failed the probe's check: $must"
[ "$ok" -eq 1 ]
