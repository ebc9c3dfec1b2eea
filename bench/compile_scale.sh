#!/bin/sh
# Compile time vs node count (docs/performance.md, "Compile time vs node count"): writes relu and
# add chains of each size with tests/scale's chain_graph and prints the seconds `tightfit compile`
# takes for training and --inference plans. By hand, never a test.
# usage: bench/compile_scale.sh BUILD_DIR [SIZE ...]    (default sizes 10000 50000 100000)
set -e
build=${1:?usage: bench/compile_scale.sh BUILD_DIR [SIZE ...]}
shift
[ $# -gt 0 ] || set -- 10000 50000 100000
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%-6s %8s %10s %10s\n' chain ops training inference
for kind in relu add; do
  for n in "$@"; do
    "$build/tests/chain_graph" "$kind" "$n" "$dir/g.tfg" > /dev/null
    times=""
    for mode in "" --inference; do
      start=$(date +%s.%N)
      "$build/tightfit" compile "$dir/g.tfg" $mode -o "$dir/p.tfplan" > /dev/null
      end=$(date +%s.%N)
      times="$times $(echo "$end - $start" | bc)"
    done
    printf '%-6s %8s %9.2fs %9.2fs\n' "$kind" "$n" $times
  done
done
