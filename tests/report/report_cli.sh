#!/bin/sh
# `tightfit report --svg F --html F --budget SIZE` on the command line: the files are written beside
# the usual text and JSON output, a file that cannot be written and a bad --budget are refused with
# exit 2 (naming the path or the value) before anything is printed, and --help documents the options.
# Each check prints what it compared; the script fails at the end if any failed.
# usage: report_cli.sh TIGHTFIT
tightfit=$1
dir=$(mktemp -d /tmp/tf_report_cli.XXXXXX) || exit 2
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

# expect NAME CODE PHRASE CMD...: CMD exits with CODE and its output (stdout + stderr) holds PHRASE.
expect() {
  name=$1 code=$2 phrase=$3
  shift 3
  "$@" >"$dir/out" 2>"$dir/err"
  got=$?
  if [ "$got" -eq "$code" ] && cat "$dir/out" "$dir/err" | grep -qF -- "$phrase"; then
    ok "$name (exit $got, '$phrase')"
  else
    bad "$name: expected exit $code and '$phrase', got exit $got:"
    cat "$dir/out" "$dir/err" | sed 's/^/     /' | head -20
  fi
}

# file_check NAME CONDITION...: a test(1) condition.
file_check() {
  name=$1
  shift
  if test "$@"; then ok "$name"; else bad "$name"; fi
}

"$tightfit" zoo gpt -o "$dir/gpt.tfg" >/dev/null || exit 2
"$tightfit" compile "$dir/gpt.tfg" --set N=4,T=16 -o "$dir/gpt.tfplan" >/dev/null || exit 2
plan=$dir/gpt.tfplan

# Text output plus both files; the usual report is still there.
expect "text + --svg + --html" 0 "wrote the memory timeline (SVG) to $dir/t.svg" \
  "$tightfit" report "$plan" --svg "$dir/t.svg" --html="$dir/r.html" --budget 12MiB
file_check "the text report is printed too" -n "$(grep -F 'arena / lower bound' "$dir/out")"
file_check "the HTML line names its file" -n "$(grep -F "wrote the HTML report to $dir/r.html" "$dir/out")"
file_check "the budget line in the text" -n "$(grep -E "^budget: 12.00 MiB; the plan's device total .* exceeds it by" "$dir/out")"
file_check "the SVG was written" -s "$dir/t.svg"
file_check "the HTML was written" -s "$dir/r.html"
file_check "the SVG is an SVG" -n "$(grep -F '<svg xmlns="http://www.w3.org/2000/svg"' "$dir/t.svg")"
file_check "the SVG marks the peak" -n "$(grep -E 'id="peak-label"[^>]*>peak [0-9.]+ (B|KiB|MiB|GiB) at step [0-9]+ \(' "$dir/t.svg")"
file_check "the over-budget title" -n "$(grep -F 'exceeds the 12.00 MiB budget by' "$dir/t.svg")"
file_check "the HTML inlines the SVG" -n "$(grep -F '<svg xmlns=' "$dir/r.html")"
file_check "no temporary files left" -z "$(ls "$dir" | grep -F '.tmp')"
if command -v xmllint >/dev/null 2>&1; then
  if xmllint --noout "$dir/t.svg" 2>"$dir/xml"; then ok "xmllint: the SVG is well-formed"; else bad "xmllint:"; cat "$dir/xml"; fi
else
  echo "skip xmllint: not installed"
fi

# JSON output keeps stdout pure JSON and names the files in it.
expect "--json + --svg" 0 '"svg_file": "'"$dir/j.svg"'"' "$tightfit" report --json "$plan" --svg "$dir/j.svg" --budget 1GiB
file_check "--json: fits_budget" -n "$(grep -F '"fits_budget": true' "$dir/out")"
file_check "--json: budget_bytes" -n "$(grep -F '"budget_bytes": 1073741824' "$dir/out")"
if command -v python3 >/dev/null 2>&1; then
  if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/out" 2>"$dir/py"; then
    ok "--json with --svg: stdout parses as JSON"
  else
    bad "--json with --svg: stdout is not JSON:"
    cat "$dir/py"
  fi
fi
file_check "--json: the SVG was written" -s "$dir/j.svg"

# Unwritable paths: exit 2, the path named, nothing printed on stdout, no file left behind.
expect "--svg into a missing folder" 2 "$dir/missing/t.svg" "$tightfit" report "$plan" --svg "$dir/missing/t.svg"
file_check "nothing printed before the failure" ! -s "$dir/out"
expect "--html into a missing folder" 2 "$dir/missing/r.html" "$tightfit" report "$plan" --html "$dir/missing/r.html"
mkdir "$dir/folder"
expect "--svg onto a folder" 2 "$dir/folder" "$tightfit" report "$plan" --svg "$dir/folder"
expect "--html after a good --svg" 2 "$dir/missing/x.html" \
  "$tightfit" report "$plan" --svg "$dir/ok.svg" --html "$dir/missing/x.html"

# Bad --budget values: exit 2, the value named.
expect "--budget garbage" 2 "--budget 'garbage'" "$tightfit" report "$plan" --svg "$dir/b.svg" --budget garbage
file_check "no SVG after a bad --budget" ! -e "$dir/b.svg"
expect "--budget 12 parsecs" 2 "--budget '12parsecs'" "$tightfit" report "$plan" --budget 12parsecs
expect "--budget negative" 2 "--budget '-1GiB'" "$tightfit" report "$plan" --budget=-1GiB
expect "--budget zero" 2 "--budget '0'" "$tightfit" report "$plan" --budget 0
expect "--budget without a value" 2 "--budget needs a value" "$tightfit" report "$plan" --budget
expect "--svg without a value" 2 "--svg needs a value" "$tightfit" report "$plan" --svg
expect "--svg with an empty name" 2 "need a file name" "$tightfit" report "$plan" --svg=

# --help documents the options.
for option in "--svg F" "--html F" "--budget SIZE"; do
  expect "--help: $option" 0 "$option" "$tightfit" report --help
done

echo "report_cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
