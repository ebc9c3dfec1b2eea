#!/bin/sh
# Half-precision storage of saved activations (issue 14, --precision): the plan is smaller than the
# f32 plan and says what it stored; a 2-layer character gpt trained 200 AdamW steps on the text data
# in bf16 tracks the f32 loss curve within 2% at every logged step; f16 trains too; bf16 and f16
# plans compile for the Vulkan target and, on a Vulkan device (lavapipe in CI), train 5 steps with
# the losses of the same options on the CPU within 1e-5 relative (tests/vulkan/test_vulkan_training
# compares 20 steps through the library); an unknown precision is refused; per-node overrides
# (--precision-override, or stored in the graph) change what is stored, node by node; --matmul-math
# is stored in the plan, printed, leaves the memory alone and (on the CPU, which computes in f32) the
# losses too; an unknown value is refused. Usage:
# test_precision.sh path/to/tightfit (run from the repository root).
tf="$1"
. "$(dirname "$0")/harness.sh"

"$tf" zoo gpt --param layers=2 -o "$dir/gpt.tfg" >/dev/null || fail "zoo gpt"
total_bytes() { sed -n 's/^  total .*(\([0-9]*\) bytes)$/\1/p' "$1"; }
for p in fp32 bf16 fp16; do
  "$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --optimizer adamw --lr 1e-3 --precision $p -o "$dir/$p.tfplan" \
    >"$dir/$p.out" 2>&1 || fail "compile --precision $p: $(tail -n 2 "$dir/$p.out")"
done
f32=$(total_bytes "$dir/fp32.out")
bf16=$(total_bytes "$dir/bf16.out")
if [ -n "$f32" ] && [ -n "$bf16" ] && [ "$bf16" -lt "$f32" ]; then
  pass "plan total $bf16 bytes in bf16, $f32 in f32 ($(awk "BEGIN { printf \"%.1f\", 100 * (1 - $bf16 / $f32) }")% less)"
else
  fail "the bf16 plan ($bf16 bytes) is not smaller than the f32 plan ($f32 bytes)"
fi
"$tf" report "$dir/bf16.tfplan" >"$dir/report" 2>&1
grep -q "precision: bf16 storage for the [0-9]* activations" "$dir/report" || fail "the report does not say what bf16 stored"
grep -q "/stored_bf16 *activation bf16" "$dir/report" || fail "the report lists no bf16 buffer"

losses() { sed -n 's/^step \([0-9]*\)\/[0-9]*  loss \([0-9.]*\).*/\1 \2/p' "$1"; }
for p in fp32 bf16; do
  "$tf" train "$dir/$p.tfplan" --data models/data/text/train --steps 200 --log-every 20 >"$dir/train_$p" 2>&1 ||
    fail "train $p: $(tail -n 2 "$dir/train_$p")"
done
losses "$dir/train_fp32" >"$dir/l32"
losses "$dir/train_bf16" >"$dir/l16"
if [ "$(wc -l <"$dir/l32")" -ge 10 ] && join "$dir/l32" "$dir/l16" >"$dir/both" &&
  awk '{ d = ($3 - $2) / $2; if (d < 0) d = -d; if (d > worst) worst = d; printf "  step %3d  f32 %s  bf16 %s  %.2f%%\n", $1, $2, $3, 100 * d }
       END { printf "  worst difference %.2f%%\n", 100 * worst; exit worst > 0.02 }' "$dir/both"; then
  pass "bf16 tracks the f32 loss curve within 2% over 200 steps"
else
  fail "bf16 does not track the f32 loss curve within 2% (or no losses were logged)"
fi
"$tf" train "$dir/fp16.tfplan" --data models/data/text/train --steps 20 --log-every 20 >"$dir/train_fp16" 2>&1 &&
  pass "fp16 trains: $(tail -n 1 "$dir/train_fp16" | head -c 80)" || fail "train fp16: $(tail -n 2 "$dir/train_fp16")"

json_losses() { sed -n 's/^{"step": \([0-9]*\), "loss": \([-0-9.e+]*\),.*/\1 \2/p' "$1"; }
"$tf" devices >"$dir/devices" 2>&1
for p in bf16 fp16; do
  "$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --optimizer adamw --lr 1e-3 --precision $p --target vulkan \
    -o "$dir/vk_$p.tfplan" >"$dir/vk_$p.out" 2>&1 || { fail "compile --precision $p --target vulkan: $(tail -n 2 "$dir/vk_$p.out")"; continue; }
  "$tf" report "$dir/vk_$p.tfplan" 2>&1 | grep -q "precision: $(echo $p | sed 's/fp16/f16/') storage" ||
    fail "the vulkan $p plan does not say what it stored"
  if ! grep -q "^vulkan:0" "$dir/devices"; then
    echo "skip: no Vulkan device, the $p plan is not trained on one"
    continue
  fi
  # Under the validation layer (a message fails the run); lavapipe leaks a small cache from its
  # unloaded module (tests/cli/test_cli.sh): no leak checks here.
  env TIGHTFIT_VULKAN_VALIDATION=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$tf" train "$dir/vk_$p.tfplan" \
    --data models/data/text/train --steps 5 --log-every 1 --json --device vulkan:0 >"$dir/vk_train_$p" 2>&1 ||
    { fail "train the vulkan $p plan on vulkan:0: $(tail -n 2 "$dir/vk_train_$p")"; continue; }
  "$tf" train "$dir/$p.tfplan" --data models/data/text/train --steps 5 --log-every 1 --json >"$dir/cpu_train_$p" 2>&1 ||
    { fail "train the cpu $p plan: $(tail -n 2 "$dir/cpu_train_$p")"; continue; }
  json_losses "$dir/cpu_train_$p" >"$dir/lc"
  json_losses "$dir/vk_train_$p" >"$dir/lv"
  if [ "$(wc -l <"$dir/lv")" -eq 5 ] && join "$dir/lc" "$dir/lv" >"$dir/both" &&
    awk '{ d = ($3 - $2) / $2; if (d < 0) d = -d; if (d > worst) worst = d; printf "  step %d  cpu %s  vulkan %s\n", $1, $2, $3 }
         END { printf "  worst relative difference %.2e\n", worst; exit !(NR == 5 && worst <= 1e-5) }' "$dir/both"; then
    pass "$p on vulkan:0 matches the cpu's losses within 1e-5 relative over 5 steps"
  else
    fail "$p on vulkan:0 does not match the cpu's losses within 1e-5 relative (or no losses were logged)"
  fi
done
# Per-node overrides (issue 14, item 1). From the command line: under bf16, h.0's gelu output kept
# f32 has no stored copy while h.1's keeps its own; under fp32 two gelu outputs stored in bf16 train
# 20 steps to within 2% of the f32 loss; an unknown node or value is refused, naming it.
gelu0=h.0.mlp.c_fc/gelu gelu1=h.1.mlp.c_fc/gelu
compile_gpt() { "$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --optimizer adamw --lr 1e-3 "$@"; }
compile_gpt --precision bf16 --precision-override $gelu0=f32 -o "$dir/keep.tfplan" >"$dir/keep.out" 2>&1 ||
  fail "compile --precision-override $gelu0=f32: $(tail -n 2 "$dir/keep.out")"
"$tf" report "$dir/keep.tfplan" >"$dir/keep.report" 2>&1
if ! grep -q "$gelu0/stored_" "$dir/keep.report" && grep -q "$gelu1/stored_bf16 *activation bf16" "$dir/keep.report" &&
  grep -q "node overrides applied on 1 nodes" "$dir/keep.report"; then
  pass "bf16 with $gelu0=f32: no stored copy of $gelu0, $gelu1/stored_bf16 kept; $(grep -o 'node overrides applied on [0-9]* nodes' "$dir/keep.report")"
else
  fail "bf16 with $gelu0=f32: $(grep "gelu\|precision:" "$dir/keep.report")"
fi
compile_gpt --precision fp32 --precision-override $gelu0=bf16 --precision-override $gelu1=bf16 -o "$dir/store.tfplan" \
  >"$dir/store.out" 2>&1 || fail "compile fp32 with two bf16 overrides: $(tail -n 2 "$dir/store.out")"
"$tf" report "$dir/store.tfplan" >"$dir/store.report" 2>&1
store=$(total_bytes "$dir/store.out")
if [ "$(grep -c "/stored_bf16 *activation bf16" "$dir/store.report")" -eq 2 ] && [ -n "$store" ] && [ "$store" -lt "$f32" ]; then
  pass "fp32 with 2 bf16 overrides: 2 stored bf16 buffers, plan total $store bytes < $f32"
else
  fail "fp32 with 2 bf16 overrides: total '$store' (f32 $f32), stored: $(grep -c stored_bf16 "$dir/store.report")"
fi
"$tf" train "$dir/store.tfplan" --data models/data/text/train --steps 20 --log-every 20 >"$dir/train_store" 2>&1 ||
  fail "train fp32 with bf16 overrides: $(tail -n 2 "$dir/train_store")"
losses "$dir/train_store" >"$dir/lstore"
if step20=$(join "$dir/l32" "$dir/lstore" | awk '$1 == 20 { d = ($3 - $2) / $2; if (d < 0) d = -d; found = 1
    printf "trains 20 steps to loss %s, f32 %s (%.2f%%)", $3, $2, 100 * d; exit d > 0.02 }
    END { if (!found) exit 1 }'); then
  pass "fp32 with bf16 overrides $step20"
else
  fail "fp32 with bf16 overrides: step 20 loss $(cat "$dir/lstore") is not within 2% of f32's ($step20)"
fi
if compile_gpt --precision-override nosuch/node=f32 -o "$dir/x.tfplan" >"$dir/unknown" 2>&1; then
  fail "an override of an unknown node was accepted"
else
  grep -q "no node named 'nosuch/node'" "$dir/unknown" && pass "unknown node refused: $(head -n 1 "$dir/unknown")" ||
    fail "unknown node: $(cat "$dir/unknown")"
fi
if compile_gpt --precision-override $gelu0=fp8 -o "$dir/x.tfplan" >"$dir/value" 2>&1; then
  fail "an override to fp8 was accepted"
else
  grep -q "takes NODE=P" "$dir/value" && pass "override to fp8 refused" || fail "fp8 override: $(cat "$dir/value")"
fi
compile_gpt --precision-override $gelu0=bf16 --target vulkan -o "$dir/x.tfplan" >"$dir/vk_override" 2>&1 &&
  pass "a bf16 override compiles for the vulkan target" || fail "a bf16 override on vulkan: $(cat "$dir/vk_override")"

# The same override stored in the graph file (dump -> JSON -> flatc -b): inspect shows it, compile
# honours it without any option.
if command -v flatc >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  "$tf" dump "$dir/gpt.tfg" >"$dir/gpt_override.json"
  python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))
next(n for n in g["nodes"] if n["name"] == sys.argv[2])["precision"] = "f32"
json.dump(g, open(sys.argv[1], "w"))' "$dir/gpt_override.json" "$gelu0" &&
    flatc -b -o "$dir" schema/graph.fbs "$dir/gpt_override.json" ||
    fail "writing a graph with an override"
  "$tf" inspect "$dir/gpt_override.tfg" >"$dir/inspect" 2>&1
  grep -q "^precision overrides (saved activations): $gelu0 f32$" "$dir/inspect" &&
    pass "inspect shows the stored override: $(grep '^precision overrides' "$dir/inspect")" ||
    fail "inspect does not show the override: $(grep -i precision "$dir/inspect")"
  "$tf" compile "$dir/gpt_override.tfg" --set N=8,T=64 --precision bf16 -o "$dir/file.tfplan" >"$dir/file.out" 2>&1 ||
    fail "compile the graph with an override: $(tail -n 2 "$dir/file.out")"
  "$tf" report "$dir/file.tfplan" >"$dir/file.report" 2>&1
  ! grep -q "$gelu0/stored_" "$dir/file.report" && grep -q "node overrides applied on 1 nodes" "$dir/file.report" &&
    pass "the graph's own override keeps $gelu0 f32 under bf16" || fail "the graph's override was not honoured"
  "$tf" compile "$dir/gpt_override.tfg" --set N=8,T=64 --precision bf16 --precision-override $gelu0=inherit \
    -o "$dir/inherit.tfplan" >/dev/null 2>&1
  "$tf" report "$dir/inherit.tfplan" 2>&1 | grep -q "$gelu0/stored_bf16" &&
    pass "--precision-override $gelu0=inherit drops the graph's override" || fail "=inherit did not drop the override"
else
  echo "note: no flatc or python3; the override stored in a graph file was not checked here (test_graph_fb does)"
fi

# --matmul-math: stored in the plan and printed by compile and report; the same memory; on the CPU the
# products stay f32, so the losses are those of the f32 plan bit for bit; an unknown value is refused.
"$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --optimizer adamw --lr 1e-3 --matmul-math bf16 -o "$dir/mm.tfplan" \
  >"$dir/mm.out" 2>&1 || fail "compile --matmul-math bf16: $(tail -n 2 "$dir/mm.out")"
grep -q "^matmul math: bf16 operands, f32 accumulation" "$dir/mm.out" || fail "compile does not print the matmul math"
"$tf" report "$dir/mm.tfplan" 2>&1 | grep -q "^matmul math: bf16" || fail "report does not print the matmul math"
[ "$(total_bytes "$dir/mm.out")" = "$f32" ] || fail "--matmul-math changed the plan's memory"
"$tf" train "$dir/mm.tfplan" --data models/data/text/train --steps 3 --log-every 1 >"$dir/train_mm" 2>&1 &&
  "$tf" train "$dir/fp32.tfplan" --data models/data/text/train --steps 3 --log-every 1 >"$dir/train_mm32" 2>&1 &&
  [ "$(losses "$dir/train_mm")" = "$(losses "$dir/train_mm32")" ] &&
  pass "--matmul-math bf16 is stored and printed; on the cpu the losses equal f32's" ||
  fail "--matmul-math bf16 on the cpu: losses differ from f32's or the run failed"
"$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --matmul-math fp8 -o "$dir/bad.tfplan" >"$dir/bad.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown matmul math 'fp8' (fp32, bf16, fp16)" "$dir/bad.out" && [ ! -e "$dir/bad.tfplan" ] &&
  pass "--matmul-math fp8 refused (exit 2)" || fail "--matmul-math fp8: exit $rc, $(head -n 1 "$dir/bad.out")"

# --autocast: the report counts the casts per training step and says what the pass did; the matmul
# math follows; the plan trains; fp32 and unknown values are refused.
"$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --optimizer adamw --lr 1e-3 --autocast bf16 -o "$dir/ac.tfplan" \
  >"$dir/ac.out" 2>&1 || fail "compile --autocast bf16: $(tail -n 2 "$dir/ac.out")"
"$tf" report "$dir/ac.tfplan" >"$dir/ac.report" 2>&1
grep -q "autocast bf16: [0-9]* forward nodes write bf16, [0-9]* casts inserted" "$dir/ac.report" &&
  grep -q "^casts: [1-9][0-9]* per training step (forward [0-9]*, .*backward [0-9]*)" "$dir/ac.report" &&
  grep -q "^matmul math: bf16" "$dir/ac.report" &&
  "$tf" train "$dir/ac.tfplan" --data models/data/text/train --steps 2 --log-every 1 >"$dir/train_ac" 2>&1 &&
  pass "--autocast bf16: $(grep -o 'autocast bf16: [^;]*' "$dir/ac.report"); $(grep '^casts:' "$dir/ac.report"); trains" ||
  fail "--autocast bf16: $(grep -E 'autocast|^casts|matmul math' "$dir/ac.report" | tr '\n' ' ') $(tail -n 1 "$dir/train_ac")"
for bad in fp32 fp8; do
  "$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --autocast $bad -o "$dir/bad.tfplan" >"$dir/bad.out" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "unknown autocast type '$bad' (bf16, fp16)" "$dir/bad.out" && [ ! -e "$dir/bad.tfplan" ] &&
    pass "--autocast $bad refused (exit 2)" || fail "--autocast $bad: exit $rc, $(head -n 1 "$dir/bad.out")"
done
# --param-dtype bf16: bf16 parameters trained through f32 masters; the report names them
"$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --optimizer adamw --lr 1e-3 --param-dtype bf16 -o "$dir/pd.tfplan" \
  >"$dir/pd.out" 2>&1 || fail "compile --param-dtype bf16: $(tail -n 2 "$dir/pd.out")"
"$tf" report "$dir/pd.tfplan" >"$dir/pd.report" 2>&1
grep -q "master weights: [1-9][0-9]* bf16 parameters (.*, stored half by --param-dtype) trained through f32 masters" \
  "$dir/pd.report" && grep -q "trainable parameters ([1-9]" "$dir/pd.report" &&
  "$tf" train "$dir/pd.tfplan" --data models/data/text/train --steps 2 --log-every 1 >"$dir/train_pd" 2>&1 &&
  pass "--param-dtype bf16: $(grep -o 'master weights: [^(]*' "$dir/pd.report"); trains" ||
  fail "--param-dtype bf16: $(grep -E 'master|trainable' "$dir/pd.report" | tr '\n' ' ') $(tail -n 1 "$dir/train_pd")"
"$tf" compile "$dir/gpt.tfg" --set N=8,T=64 --param-dtype int8 -o "$dir/bad.tfplan" >"$dir/bad.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown parameter dtype 'int8' (fp32, bf16, fp16)" "$dir/bad.out" && [ ! -e "$dir/bad.tfplan" ] &&
  pass "--param-dtype int8 refused (exit 2)" || fail "--param-dtype int8: exit $rc, $(head -n 1 "$dir/bad.out")"

finish precision
