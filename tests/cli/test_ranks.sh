#!/bin/sh
# Data-parallel training over MPI (issue 45, first part: ZeRO stage 0): a plan compiled with
# --ranks 2 trained by `mpirun -np 2 tightfit train` gives the losses of one process training the
# same global batch (the same plan with --accumulate 2) to 1e-6, and weights within 1e-5; rank 0
# alone prints and writes the checkpoint; the ranks are summed before every update. Refused with the
# reason: the plan outside mpirun, the wrong process count, --update-in-backward, --resume, a bad
# --ranks. SKIPs (exit 77) without mpirun or without MPI in the build.
# usage: test_ranks.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
# Open MPI as root needs saying so; two ranks on a 2-core machine; its own allocations are not ours
mpi="mpirun --allow-run-as-root --oversubscribe -np"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
expect 0 "compile --ranks 2" "$tf" compile "$dir/gpt.tfg" --set N=4,T=32 --optimizer adamw --fuse-loss off --ranks 2 \
  -o "$dir/dp.tfplan"
expect 0 "compile the one-process twin: --accumulate 2" "$tf" compile "$dir/gpt.tfg" --set N=4,T=32 --optimizer adamw \
  --fuse-loss off --accumulate 2 --no-update-in-backward -o "$dir/one.tfplan"
expect 0 "report --json" "$tf" report "$dir/dp.tfplan" --json
check "the rank's plan: micro-batch 4 x 1, global batch 8 over 2 ranks" \
  "grep -q '\"micro_batch\": 4' '$dir/out' && grep -q '\"global_batch\": 8' '$dir/out'"

"$tf" train "$dir/dp.tfplan" --data models/data/text/train --steps 1 > "$dir/out" 2> "$dir/err"
if grep -q "this build has no MPI" "$dir/err"; then
  echo "SKIP: this build has no MPI: $(cat "$dir/err")"
  exit 77
fi
check "outside mpirun it is refused, saying how to run it" "grep -q 'run it as .mpirun -np 2 tightfit train' '$dir/err'"

expect 0 "mpirun -np 2 tightfit train 6 steps" $mpi 2 "$tf" train "$dir/dp.tfplan" --data models/data/text/train \
  --steps 6 --threads 1 --json --checkpoint "$dir/ck_dp"
cp "$dir/out" "$dir/dp.json"
expect 0 "one process, the same global batch" "$tf" train "$dir/one.tfplan" --data models/data/text/train --steps 6 \
  --threads 1 --json --checkpoint "$dir/ck_one"
cp "$dir/out" "$dir/one.json"
check "one rank printed: 6 step lines and one summary" "[ \$(grep -c '\"step\"' '$dir/dp.json') = 6 ]"
/usr/bin/python3 - "$dir" << 'PY' && passed=$((passed + 1)) || fail "losses and weights of 2 ranks against one process"
import json, struct, sys
import numpy as np
d = sys.argv[1]
def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if line.startswith('{"step"')]
def weights(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__" and not k.startswith("adam")}
a, b = losses(f"{d}/dp.json"), losses(f"{d}/one.json")
worst_loss = max(abs(x - y) for x, y in zip(a, b))
wa, wb = weights(f"{d}/ck_dp/latest.safetensors"), weights(f"{d}/ck_one/latest.safetensors")
worst_weight = max(float(np.max(np.abs(wa[k] - wb[k]))) for k in wb)
print(f"2 ranks vs one process: losses {a} vs {b}, worst {worst_loss:.2g}; weights worst {worst_weight:.2g} "
      f"over {len(wb)} tensors")
assert len(a) == len(b) == 6 and worst_loss <= 1e-6 and worst_weight <= 1e-5 and len(wa) == len(wb)
print("ok: 2 ranks give one process's losses (<= 1e-6) and weights (<= 1e-5)")
PY

expect_message 2 "3 processes for a plan of 2 ranks" "but mpirun started 3 processes" \
  $mpi 3 "$tf" train "$dir/dp.tfplan" --data models/data/text/train --steps 1
expect_message 2 "--resume of a job" "--resume of a data-parallel job" \
  $mpi 2 "$tf" train "$dir/dp.tfplan" --data models/data/text/train --steps 8 --checkpoint "$dir/ck_dp" --resume
expect_message 2 "--ranks with --update-in-backward" "cannot go with --update-in-backward" \
  "$tf" compile "$dir/gpt.tfg" --ranks 2 --update-in-backward
expect_message 2 "--ranks 0" "--ranks takes 1..1024" "$tf" compile "$dir/gpt.tfg" --ranks 0
finish test_ranks
