#!/bin/sh
# `tightfit report --svg F --html F --budget SIZE` on the command line: the files are written beside
# the usual text and JSON output, a file that cannot be written and a bad --budget are refused with
# exit 2 (naming the path or the value) before anything is printed, and --help documents the options.
# Each check prints what it compared; the script fails at the end if any failed.
# usage: report_cli.sh TIGHTFIT
tightfit=$1
. "$(dirname "$0")/../cli/harness.sh"

"$tightfit" zoo gpt -o "$dir/gpt.tfg" >/dev/null || exit 2
"$tightfit" compile "$dir/gpt.tfg" --set N=4,T=16 -o "$dir/gpt.tfplan" >/dev/null || exit 2
plan=$dir/gpt.tfplan

# Text output plus both files; the usual report is still there.
expect_phrase 0 "text + --svg + --html" "wrote the memory timeline (SVG) to $dir/t.svg" \
  "$tightfit" report "$plan" --svg "$dir/t.svg" --html="$dir/r.html" --budget 10MiB
check "the text report is printed too" test -n "$(grep -F 'arena / lower bound' "$dir/out")"
check "the HTML line names its file" test -n "$(grep -F "wrote the HTML report to $dir/r.html" "$dir/out")"
check "the budget line in the text" test -n "$(grep -E "^budget: 10.00 MiB; the plan's device total .* exceeds it by" "$dir/out")"
check "the SVG was written" test -s "$dir/t.svg"
check "the HTML was written" test -s "$dir/r.html"
check "the SVG is an SVG" test -n "$(grep -F '<svg xmlns="http://www.w3.org/2000/svg"' "$dir/t.svg")"
check "the SVG marks the peak" test -n "$(grep -E 'id="peak-label"[^>]*>peak [0-9.]+ (B|KiB|MiB|GiB) at step [0-9]+ \(' "$dir/t.svg")"
check "the over-budget title" test -n "$(grep -F 'exceeds the 10.00 MiB budget by' "$dir/t.svg")"
check "the HTML inlines the SVG" test -n "$(grep -F '<svg xmlns=' "$dir/r.html")"
check "no temporary files left" test -z "$(ls "$dir" | grep -F '.tmp')"
if command -v xmllint >/dev/null 2>&1; then
  if xmllint --noout "$dir/t.svg" 2>"$dir/xml"; then pass "xmllint: the SVG is well-formed"; else fail "xmllint:"; cat "$dir/xml"; fi
else
  echo "skip xmllint: not installed"
fi

# JSON output keeps stdout pure JSON and names the files in it.
expect_phrase 0 "--json + --svg" '"svg_file": "'"$dir/j.svg"'"' "$tightfit" report --json "$plan" --svg "$dir/j.svg" --budget 1GiB
check "--json: fits_budget" test -n "$(grep -F '"fits_budget": true' "$dir/out")"
check "--json: budget_bytes" test -n "$(grep -F '"budget_bytes": 1073741824' "$dir/out")"
if command -v python3 >/dev/null 2>&1; then
  if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/out" 2>"$dir/py"; then
    pass "--json with --svg: stdout parses as JSON"
  else
    fail "--json with --svg: stdout is not JSON:"
    cat "$dir/py"
  fi
fi
check "--json: the SVG was written" test -s "$dir/j.svg"

# Unwritable paths: exit 2, the path named, nothing printed on stdout, no file left behind.
expect_phrase 2 "--svg into a missing folder" "$dir/missing/t.svg" "$tightfit" report "$plan" --svg "$dir/missing/t.svg"
check "nothing printed before the failure" test ! -s "$dir/out"
expect_phrase 2 "--html into a missing folder" "$dir/missing/r.html" "$tightfit" report "$plan" --html "$dir/missing/r.html"
mkdir "$dir/folder"
expect_phrase 2 "--svg onto a folder" "$dir/folder" "$tightfit" report "$plan" --svg "$dir/folder"
expect_phrase 2 "--html after a good --svg" "$dir/missing/x.html" \
  "$tightfit" report "$plan" --svg "$dir/ok.svg" --html "$dir/missing/x.html"

# Bad --budget values: exit 2, the value named.
expect_phrase 2 "--budget garbage" "--budget 'garbage'" "$tightfit" report "$plan" --svg "$dir/b.svg" --budget garbage
check "no SVG after a bad --budget" test ! -e "$dir/b.svg"
expect_phrase 2 "--budget 12 parsecs" "--budget '12parsecs'" "$tightfit" report "$plan" --budget 12parsecs
expect_phrase 2 "--budget negative" "--budget '-1GiB'" "$tightfit" report "$plan" --budget=-1GiB
expect_phrase 2 "--budget zero" "--budget '0'" "$tightfit" report "$plan" --budget 0
expect_phrase 2 "--budget without a value" "--budget needs a value" "$tightfit" report "$plan" --budget
expect_phrase 2 "--svg without a value" "--svg needs a value" "$tightfit" report "$plan" --svg
expect_phrase 2 "--svg with an empty name" "need a file name" "$tightfit" report "$plan" --svg=

# --help documents the options.
for option in "--svg F" "--html F" "--budget SIZE"; do
  expect_phrase 0 "--help: $option" "$option" "$tightfit" report --help
done

finish report_cli
