#!/bin/sh
# --optimizer without --lr (issue 44): the zoo's mlp says SGD at lr 0.05; compiled with --optimizer adamw
# it takes AdamW's defaults (lr 3e-4, betas 0.9/0.999, eps 1e-8), not SGD's learning rate, and --lr
# still sets the rate; the graph's own optimizer keeps the graph's settings; gpt (AdamW 3e-4 in the
# graph) with --optimizer sgd takes SGD's 0.01; --optimizer adamw8bit takes AdamW's defaults.
# usage: test_optimizer_defaults.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
"$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null
"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
compile_report() { # compile_report PLAN GRAPH OPTIONS...: the report of the compiled plan
  plan=$1 graph=$2
  shift 2
  "$tf" compile "$graph" --set N=8 -o "$plan" "$@" > /dev/null && "$tf" report "$plan"
}
expect_phrase 0 "mlp as its graph says: SGD at 0.05" "optimizer sgd, lr 0.05" \
  compile_report "$dir/a.tfplan" "$dir/mlp.tfg"
expect_phrase 0 "mlp --optimizer adamw: AdamW's defaults, not SGD's rate" "optimizer adamw, lr 0.0003," \
  compile_report "$dir/b.tfplan" "$dir/mlp.tfg" --optimizer adamw
expect_phrase 0 "mlp --optimizer adamw --lr 0.002" "optimizer adamw, lr 0.002," \
  compile_report "$dir/c.tfplan" "$dir/mlp.tfg" --optimizer adamw --lr 0.002
expect_phrase 0 "mlp --optimizer sgd (its own): the graph's 0.05" "optimizer sgd, lr 0.05" \
  compile_report "$dir/d.tfplan" "$dir/mlp.tfg" --optimizer sgd
expect_phrase 0 "gpt --optimizer sgd: SGD's 0.01, not AdamW's rate" "optimizer sgd, lr 0.01," \
  compile_report "$dir/e.tfplan" "$dir/gpt.tfg" --optimizer sgd
# 8-bit AdamW keeps Adam's moments: AdamW's defaults too (its updates' attributes carry the betas)
expect_phrase 0 "mlp --optimizer adamw8bit: AdamW's defaults" "optimizer adamw8bit, lr 0.0003," \
  compile_report "$dir/f.tfplan" "$dir/mlp.tfg" --optimizer adamw8bit
expect_phrase 0 "mlp --optimizer adamw8bit: beta1 0.9 in its updates" '"beta1": 0.9,' "$tf" dump "$dir/f.tfplan"
finish test_optimizer_defaults
