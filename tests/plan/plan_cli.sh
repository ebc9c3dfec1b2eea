#!/bin/sh
# `tightfit report` on a saved plan, and plans that the decoder must refuse, written by flatc from
# JSON (a C test cannot build FlatBuffers the encoder refuses to write). Each check prints what it
# compared; the script fails at the end if any failed.
# usage: plan_cli.sh TIGHTFIT MAKE_PLAN FLATC SCHEMA_DIR
tightfit=$1 make_plan=$2 flatc=$3 schema=$4
. "$(dirname "$0")/../cli/harness.sh"

# expect_line NAME REGEX CMD...: CMD exits 0 and a line of its output matches the extended REGEX.
expect_line() {
  name=$1 regex=$2
  shift 2
  "$@" >"$dir/out" 2>&1
  got=$?
  if [ "$got" -eq 0 ] && grep -qE -- "$regex" "$dir/out"; then
    pass "$name (exit 0, /$regex/)"
  else
    fail "$name: expected exit 0 and a line matching /$regex/, got exit $got:"
    sed 's/^/     /' "$dir/out" | head -30
  fi
}

"$make_plan" "$dir/small.tfplan" || exit 2

expect_line "report: the total" "^  total +988 B +988$" "$tightfit" report "$dir/small.tfplan"
expect_line "report: the arena" "^  activations arena +464 B +464$" "$tightfit" report "$dir/small.tfplan"
expect_line "report: a role" "^    activations, without reuse \(6\) +384 B +384$" "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report: arena vs lower bound" "lower bound 448 B (the most bytes live at one step), arena / lower bound = 1.036" \
  "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report: reuse" "without reuse: arena 704 B, total 1.20 KiB; reuse saves 240 B (240 bytes, 19.5% of that total)" \
  "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report: the peak step" "peak: step 3 'mse/grad' (mse_grad, backward): 448 B live in the arena" \
  "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report: batches" "micro-batch 4 x 2 accumulation steps = global batch 8" \
  "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report: flops" "flops: forward 140 FLOP, recompute 0 FLOP, backward 140 FLOP" \
  "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report: notes" "  recompute: none" "$tightfit" report "$dir/small.tfplan"
expect_phrase 0 "report --json: total" '"total_bytes": 988' "$tightfit" report "$dir/small.tfplan" --json
expect_phrase 0 "report --json: peak" '"name": "mse/grad"' "$tightfit" report --json "$dir/small.tfplan"
if command -v python3 >/dev/null 2>&1; then
  expect_phrase 0 "report --json parses" "988" sh -c "'$tightfit' report --json '$dir/small.tfplan' | python3 -c 'import json, sys; print(json.load(sys.stdin)[\"total_bytes\"])'"
fi
expect_phrase 0 "report --help" "usage: tightfit report P.tfplan" "$tightfit" report --help
expect_phrase 0 "help report" "usage: tightfit report P.tfplan" "$tightfit" help report
expect_phrase 2 "report without a file" "missing the plan file" "$tightfit" report
expect_phrase 2 "report with an unknown option" "unknown option '--csv'" "$tightfit" report --csv "$dir/small.tfplan"
expect_phrase 2 "report with two files" "one plan file at a time" "$tightfit" report "$dir/small.tfplan" "$dir/small.tfplan"
expect_phrase 2 "report of a missing file" "$dir/none.tfplan: cannot open" "$tightfit" report "$dir/none.tfplan"
head -c 300 "$dir/small.tfplan" >"$dir/cut.tfplan"
expect_phrase 2 "report of a truncated plan" "$dir/cut.tfplan: corrupt or truncated FlatBuffer" "$tightfit" report "$dir/cut.tfplan"
expect_phrase 2 "report of a graph file" "expected 'TFPL': not a tightfit plan (.tfplan) file" \
  "$tightfit" report tests/data/good/mlp-1.tfg

# ---- structural refusals: plans flatc writes from JSON ----
# A plan that the decoder accepts up to the one defect each case plants.
plan_json() { # $1: extra Plan fields, $2: buffers, $3: steps, $4: report
  cat <<EOF
{ "version": 1, "alignment": 64, "region_bytes": [0, 0, 0, 64, 0], $1
  "buffers": [ $2 ], "steps": [ $3 ], "micro_steps": 1, "report": $4 }
EOF
}
buffer='{ "name": "h", "role": "activation", "region": "arena", "bytes": 4, "shape": [1], "first_step": 0, "last_step": 0 }'
step='{ "name": "relu", "op": "relu", "inputs": [0], "outputs": [0] }'
report='{ "role_bytes": [0, 0, 0, 0, 0, 0, 4, 0], "live_bytes": [4], "flops": [0, 0, 0, 0, 0], "peak_step": 0 }'

refuse() { # NAME PHRASE JSON
  printf '%s\n' "$3" >"$dir/$1.json"
  if ! "$flatc" -b -I "$schema" -o "$dir" "$schema/plan.fbs" "$dir/$1.json" >"$dir/flatc.out" 2>&1; then
    fail "$1: flatc refused the JSON:"
    sed 's/^/     /' "$dir/flatc.out"
    return
  fi
  expect_phrase 2 "decode refuses $1" "$dir/$1.tfplan: $2" "$tightfit" report "$dir/$1.tfplan"
}

refuse baseline "step 0 'relu' (relu) reads input 0 buffer 0 'h' before it is written" \
  "$(plan_json "" "$buffer" "$step" "$report")"
refuse four_regions "region_bytes has 4 entries; plan version 1 has exactly 5 (one per region)" \
  "$(plan_json '' "$buffer" "$step" "$report" | sed 's/\[0, 0, 0, 64, 0\]/[0, 0, 0, 64]/')"
refuse rank_nine "buffer 0 'h': shape has 9 dimensions; at most 8 are allowed" \
  "$(plan_json "" "$(echo "$buffer" | sed 's/"shape": \[1\]/"shape": [1,1,1,1,1,1,1,1,1]/')" "$step" "$report")"
refuse five_outputs "step 0 'relu': outputs has 5 entries; at most 4 are allowed" \
  "$(plan_json "" "$buffer" "$(echo "$step" | sed 's/"outputs": \[0\]/"outputs": [0,0,0,0,0]/')" "$report")"
refuse no_report "the memory report (Plan.report) is missing" \
  "$(plan_json "" "$buffer" "$step" "null" | sed 's/, "report": null//')"
refuse short_live_bytes "report.live_bytes has 0 entries for 1 steps" \
  "$(plan_json "" "$buffer" "$step" "$(echo "$report" | sed 's/"live_bytes": \[4\], //')")"
refuse no_role_bytes "report.role_bytes is missing (a required field: one entry per buffer role)" \
  "$(plan_json "" "$buffer" "$step" "$(echo "$report" | sed 's/"role_bytes": \[[0-9, ]*\], //')")"
refuse newer "written by a newer tightfit: plan version 7; this build reads up to 1" \
  "$(plan_json "" "$buffer" "$step" "$report" | sed 's/"version": 1/"version": 7/')"
refuse nameless_buffer "buffer 0 '': has no name (a required field)" \
  "$(plan_json "" "$(echo "$buffer" | sed 's/"name": "h", //')" "$step" "$report")"
refuse no_regions "region_bytes is missing" \
  "$(plan_json "" "$buffer" "$step" "$report" | sed 's/"region_bytes": \[[0-9, ]*\], //')"
refuse unknown_attrs_type "step 0 'relu': attrs_type is MatmulAttrs but the attribute table is missing" \
  "$(plan_json "" "$buffer" "$(echo "$step" | sed 's/"outputs": \[0\]/"outputs": [0], "attrs_type": "MatmulAttrs"/')" "$report")"

finish plan_cli
