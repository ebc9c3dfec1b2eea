#!/bin/sh
# Graph and plan files written by an earlier tightfit (tests/data/compat/README.md) still load: each
# graph loads and compiles, each plan loads and verifies (report), the old mlp plan trains to the
# loss of a plan compiled today from the old graph, and the old cnn plan runs on Vulkan when there
# is a device. Usage: test_compat.sh path/to/tightfit (run from the repository root).
tf="$1"
data=tests/data/compat
. "$(dirname "$0")/harness.sh"

for graph in "$data"/*.tfg; do
  name=$(basename "$graph" .tfg)
  if "$tf" inspect "$graph" >"$dir/out" 2>&1 && "$tf" compile "$graph" -o "$dir/$name.tfplan" >>"$dir/out" 2>&1; then
    pass "$graph loads and compiles"
  else
    fail "$graph: $(tail -n 3 "$dir/out")"
  fi
done
for plan in "$data"/*.tfplan; do
  if "$tf" report "$plan" >"$dir/out" 2>&1; then
    pass "$plan loads and verifies ($(grep -c . "$dir/out") report lines)"
  else
    fail "$plan: $(tail -n 3 "$dir/out")"
  fi
done

final_loss() { sed -n 's/.*final loss \([0-9.eE+-]*\).*/\1/p' "$1"; }
"$tf" compile "$data/mlp.tfg" --set N=32 -o "$dir/mlp.today.tfplan" >/dev/null 2>&1 || fail "mlp.tfg: compile with N=32"
"$tf" train "$data/mlp.cpu.tfplan" --data models/data/digits/train --steps 20 >"$dir/old" 2>&1 || fail "train the old mlp plan: $(tail -n 2 "$dir/old")"
"$tf" train "$dir/mlp.today.tfplan" --data models/data/digits/train --steps 20 >"$dir/new" 2>&1 || fail "train today's mlp plan: $(tail -n 2 "$dir/new")"
old=$(final_loss "$dir/old")
new=$(final_loss "$dir/new")
if [ -n "$old" ] && [ "$old" = "$new" ]; then
  pass "the old mlp plan trains 20 steps to loss $old, as today's plan of the old graph does"
else
  fail "the old mlp plan's final loss '$old' differs from today's '$new'"
fi

if "$tf" devices 2>/dev/null | grep -q '^vulkan:0'; then
  # detect_leaks=0: lavapipe's cache leaks from its unloaded module, which no suppression can name
  # (test_cli.sh, devices).
  if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$tf" train "$data/cnn.vulkan.tfplan" --device vulkan:0 \
    --data models/data/digits/train --steps 3 > "$dir/vk" 2>&1; then
    pass "the old cnn plan trains 3 steps on vulkan:0 (loss $(final_loss "$dir/vk"))"
  else
    fail "the old cnn plan on vulkan:0: $(tail -n 3 "$dir/vk")"
  fi
else
  echo "note: no Vulkan device; the old cnn plan was only loaded"
fi

finish compat
