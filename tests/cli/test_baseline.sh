#!/bin/sh
# `tightfit check --baseline FILE --max-growth P%` (issue 17): a growth over the allowed share fails
# (exit 1) with the per-category diff, a shrink or an allowed growth passes, and a missing, garbled,
# edited or mismatched baseline is exit 2 naming the file and the reason.
# usage: test_baseline.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
has() { # has DESCRIPTION FILE PATTERN: the file (out or err) holds the pattern
  if grep -q -- "$3" "$dir/$2"; then pass "$1"; else fail "$1: no '$3' in $2:"; cat "$dir/out" "$dir/err"; fi
}

"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null
"$tf" zoo mlp --param hidden=256 -o "$dir/wide.tfg" > /dev/null   # every category but io grows
"$tf" zoo mlp --param hidden=130 -o "$dir/bit.tfg" > /dev/null    # the total grows by under 2%
"$tf" zoo cnn -o "$dir/cnn.tfg" > /dev/null
# The CPU target: exact byte counts with no device overhead (the CUDA model rounds the device total
# up to a granularity that hides small changes; its categories are checked below).
base="$tf check $dir/mlp.tfg --target cpu --budget 1GiB --set N=32"
$base --json > "$dir/base.json" || { echo "FAIL: writing the baseline"; exit 1; }
$tf check "$dir/wide.tfg" --target cpu --budget 1GiB --set N=32 --json > "$dir/wide.json"
$tf check "$dir/mlp.tfg" --target cuda --budget 2GiB --set N=32 --json > "$dir/cuda.json"

# The categories sum to the total and the total is the device total (regions + overhead).
/usr/bin/python3 - "$dir/cuda.json" <<'PY' && pass "categories sum to device_total_bytes" || fail "categories do not sum to device_total_bytes"
import json, sys
j = json.load(open(sys.argv[1]))
c = j["categories"]
assert sum(v for k, v in c.items() if k != "total") == c["total"] == j["device_total_bytes"], c
assert c["device_overhead"] == j["overhead_bytes"] > 0 and c["inputs"] == j["regions"]["io"], c
assert c["activations"] + c["workspace"] == j["regions"]["arena"], c
print("categories:", c)
PY

expect 1 "grew 216% with 5% allowed fails" $tf check "$dir/wide.tfg" --target cpu --budget 1GiB --set N=32 \
  --baseline "$dir/base.json" --max-growth 5%
has "the diff says it fails and by how much" out "total grew by .*(allowed: 5.00%): FAILS"
for category in parameters gradients optimizer_state activations workspace inputs device_overhead total; do
  has "the diff has a $category row" out "^  $category "
done
has "the parameters row shows both byte counts" out "parameters *104576 *340096"
expect 0 "shrinking (the wide plan as baseline) passes" $base --baseline "$dir/wide.json" --max-growth 5%
has "the diff says it shrank" out "total shrank by"
expect 0 "a growth under the allowed 5% passes" $tf check "$dir/bit.tfg" --target cpu --budget 1GiB --set N=32 \
  --baseline "$dir/base.json" --max-growth 5%
expect 1 "the same growth fails at the default 0%" $tf check "$dir/bit.tfg" --target cpu --budget 1GiB --set N=32 \
  --baseline "$dir/base.json"
expect 0 "the same plan passes at 0%" $base --baseline "$dir/base.json"
expect 1 "with --json: still exit 1" $tf check "$dir/wide.tfg" --target cpu --budget 1GiB --set N=32 \
  --baseline "$dir/base.json" --max-growth 5% --json
/usr/bin/python3 -c "
import json, sys
j = json.load(open('$dir/out'))
b = j['baseline']
assert b['passed'] is False and abs(b['max_growth'] - 0.05) < 1e-12 and b['growth'] > 1.5, b
assert b['categories']['parameters'] == {'baseline': 104576, 'current': 340096, 'change': 235520}, b
" && pass "--json carries the baseline comparison; the diff goes to stderr" || {
  fail "--json baseline object"; cat "$dir/out"; }
has "the text diff is on stderr with --json" err "total grew by"

# Bad baselines: exit 2, the file and the reason named, nothing compiled.
expect 2 "a missing baseline" $base --baseline "$dir/nope.json"
has "names the missing file" err "nope.json: cannot read the baseline: No such file"
printf '{"fits": true, "categories": {"parameters": 1' > "$dir/cut.json"
expect 2 "a truncated baseline" $base --baseline "$dir/cut.json"
has "says where it ends" err "cut.json: not a .tightfit check --json. result: .* at byte"
printf 'fits: yes\n' > "$dir/text.json"
expect 2 "a baseline that is not JSON" $base --baseline "$dir/text.json"
has "says it is not JSON" err "text.json: .*does not start with a JSON object"
head -c 300 /dev/urandom > "$dir/random.json"
expect 2 "random bytes" $base --baseline "$dir/random.json"
: > "$dir/empty.json"
expect 2 "an empty baseline" $base --baseline "$dir/empty.json"
has "says it is empty" err "empty.json: .*the file is empty"
printf '{"fits": true, "target": "cuda"}' > "$dir/old.json"
expect 2 "a result without categories (an older tightfit)" $base --baseline "$dir/old.json"
has "says categories are missing" err "old.json: the result has no \"categories\" object"
sed 's/"parameters": 104576/"parameters": 1/' "$dir/base.json" > "$dir/edited.json"
expect 2 "an edited baseline whose categories do not sum" $base --baseline "$dir/edited.json"
has "says the sum is off" err "edited.json: the categories sum to"
sed 's/"workspace": 0/"workspace": -5/' "$dir/base.json" > "$dir/negative.json"
expect 2 "a negative byte count" $base --baseline "$dir/negative.json"
sed '/"inputs"/d' "$dir/base.json" > "$dir/missing.json"
expect 2 "a category missing" $base --baseline "$dir/missing.json"
has "names the missing category" err "missing.json: \"categories\" has no \"inputs\""
expect 2 "a baseline of another graph" $tf check "$dir/cnn.tfg" --target cpu --budget 1GiB --baseline "$dir/base.json"
has "names both graphs" err "base.json: the baseline is for graph 'mlp', this check is for 'cnn'"
expect 2 "a baseline for another target" $tf check "$dir/mlp.tfg" --target vulkan --budget 1GiB --set N=32 \
  --baseline "$dir/base.json"
has "names both targets" err "checked for target 'cpu', this check is for 'vulkan'"
expect 2 "--max-growth without its percent sign" $base --baseline "$dir/base.json" --max-growth 0.05
has "says what it takes" err "max-growth takes a percentage with its sign, such as 5% or 0.5%, got '0.05'"
expect 2 "--max-growth without --baseline" $base --max-growth 5%
expect 2 "--baseline without a file" $base --baseline
expect 0 "check --help" $tf check --help
has "--help describes --baseline" out "baseline FILE"
has "--help describes --max-growth" out "max-growth P%"

finish baseline
