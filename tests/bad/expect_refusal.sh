#!/bin/sh
# expect_refusal.sh TIGHTFIT FILE PHRASE: `tightfit inspect FILE` must exit 2 with a message that
# names FILE and contains PHRASE, and no sanitizer may report anything.
tightfit=$1 file=$2 phrase=$3
stderr=$("$tightfit" inspect "$file" 2>&1 >/dev/null)
code=$?
echo "exit $code: $stderr"
fail=0
[ "$code" -eq 2 ] || { echo "FAIL: expected exit 2, got $code"; fail=1; }
case $stderr in *"$file"*) ;; *) echo "FAIL: the message does not name $file"; fail=1 ;; esac
case $stderr in *"$phrase"*) ;; *) echo "FAIL: the message lacks '$phrase'"; fail=1 ;; esac
case $stderr in *Sanitizer*|*"runtime error"*) echo "FAIL: sanitizer report"; fail=1 ;; esac
if [ $fail -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
