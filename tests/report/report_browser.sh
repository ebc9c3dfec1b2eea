#!/bin/sh
# A real browser renders `tightfit report --html`: Debian's chromium, headless, loads the page from
# the disk with networking off, and the DOM it builds must hold the SVG's peak label (naming the
# peak step the JSON report gives), the budget label and the memory table's total. A screenshot is
# left in OUT_DIR (report.png) for a human to look at. Exits 77 (a skip ctest shows) when chromium
# is not installed; scripts/setup installs it.
# usage: report_browser.sh TIGHTFIT OUT_DIR
tightfit=$1 out=$2
chromium=${TF_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$chromium" ]; then
  echo "report_browser: SKIP: chromium is not installed (scripts/setup installs it)"
  exit 77
fi
mkdir -p "$out" || exit 2
dir=$(mktemp -d /tmp/tf_report_browser.XXXXXX) || exit 2
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

"$tightfit" zoo gpt -o "$dir/gpt.tfg" >/dev/null || exit 2
"$tightfit" compile "$dir/gpt.tfg" --set N=4,T=16 --accumulate 2 -o "$dir/gpt.tfplan" >/dev/null || exit 2
"$tightfit" report "$dir/gpt.tfplan" --json >"$dir/report.json" || exit 2
"$tightfit" report "$dir/gpt.tfplan" --html "$out/report.html" --svg "$out/timeline.svg" --budget 14MiB >"$dir/text" ||
  exit 2

# The numbers to find, from the JSON report and the SVG file.
peak_step=$(sed -n '/"peak": {/,/}/s/^ *"step": \([0-9]*\),*$/\1/p' "$dir/report.json" | head -1)
total=$(sed -n 's/^ *"total_bytes": \([0-9]*\),*$/\1/p' "$dir/report.json" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta')
label=$(sed -n 's/.*id="peak-label"[^>]*>\([^<]*\)<.*/\1/p' "$out/timeline.svg" | sed 's/&#39;/'"'"'/g;s/&amp;/\&/g')
echo "expect: peak step $peak_step, total $total bytes, peak label '$label'"
case $label in
"peak "*" at step $peak_step ("*) ok "the SVG's peak label names step $peak_step" ;;
*) bad "the SVG's peak label '$label' does not name step $peak_step" ;;
esac

# --disable-* and a fresh profile keep the browser off the network and away from any user state.
browse() {
  HOME=$dir timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
    --user-data-dir="$(mktemp -d "$dir/profile.XXXXXX")" "$@" 2>>"$dir/chromium.log"
}

browse --dump-dom "file://$out/report.html" >"$dir/dom.html"
status=$?
if [ "$status" -ne 0 ] || [ ! -s "$dir/dom.html" ]; then
  bad "chromium --dump-dom exited $status with $(wc -c <"$dir/dom.html") bytes; its log ends:"
  tail -5 "$dir/chromium.log"
else
  ok "chromium rendered the page ($(wc -c <"$dir/dom.html") bytes of DOM)"
fi
cp "$dir/dom.html" "$out/dom.html"
for phrase in "$label" "<svg" "id=\"peak-label\"" "budget 14.00 MiB" "$total" "tightfit report: $dir/gpt.tfplan"; do
  if [ -n "$phrase" ] && grep -qF -- "$phrase" "$dir/dom.html"; then
    ok "the rendered DOM holds '$phrase'"
  else
    bad "the rendered DOM lacks '$phrase'"
  fi
done

rm -f "$out/report.png"
browse --window-size=1400,1300 --screenshot="$out/report.png" "file://$out/report.html" >/dev/null
if [ -s "$out/report.png" ] && [ "$(head -c 8 "$out/report.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; then
  ok "screenshot: $out/report.png ($(wc -c <"$out/report.png") bytes)"
else
  bad "no PNG screenshot at $out/report.png"
  tail -5 "$dir/chromium.log"
fi

echo "report_browser: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
