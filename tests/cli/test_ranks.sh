#!/bin/sh
# Data-parallel training over MPI (issue 45, ZeRO stage 0): a plan compiled with --ranks 2 trained by
# `mpirun -np 2 tightfit train` gives the losses of one process training the same global batch (the
# same plan with --accumulate 2) to 1e-6, and weights within 1e-5; so do 4 ranks against one process
# with --accumulate 4; rank 0 alone prints and writes the checkpoint; the ranks are summed before
# every update; each gradient summed on a thread of its own as the backward pass finishes it gives
# the sums after the backward pass byte for byte. Refused with the reason: the plan outside mpirun, the wrong process count,
# --update-in-backward, a bad --ranks. --resume: test_ranks_resume.sh; failures and mismatched ranks:
# test_ranks_failures.sh. SKIPs (exit 77) without mpirun or without MPI in the build.
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
# how the gradients are summed, said once by rank 0: the cpu backend has no device collectives (NCCL
# is the cuda backend's: scripts/gpu-verify, item nccl)
check "rank 0 says once that the ranks sum over MPI, host-staged, and why" \
  "[ \$(grep -c 'sum their gradients' '$dir/err') = 1 ] && grep -q '^tightfit train: 2 ranks sum their gradients over \
MPI, host-staged (the cpu backend has no device collectives)$' '$dir/err'"
expect 0 "one process, the same global batch" "$tf" train "$dir/one.tfplan" --data models/data/text/train --steps 6 \
  --threads 1 --json --checkpoint "$dir/ck_one"
check "one process says nothing of sums" "! grep -q 'sum their gradients' '$dir/err'"
cp "$dir/out" "$dir/one.json"
check "one rank printed: 6 step lines and one summary" "[ \$(grep -c '\"step\"' '$dir/dp.json') = 6 ]"
# compare.py JOB_JSON ONE_JSON JOB_CHECKPOINT ONE_CHECKPOINT RANKS: the job's losses against one
# process's (<= 1e-6) and its weights (<= 1e-5, the sums' order differs)
cat > "$dir/compare.py" << 'PY'
import json, struct, sys
import numpy as np
job_json, one_json, job_ck, one_ck, ranks = sys.argv[1:6]
def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if line.startswith('{"step"')]
def weights(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__" and not k.startswith("adam")}
a, b = losses(job_json), losses(one_json)
worst_loss = max(abs(x - y) for x, y in zip(a, b))
wa, wb = weights(f"{job_ck}/latest.safetensors"), weights(f"{one_ck}/latest.safetensors")
worst_weight = max(float(np.max(np.abs(wa[k] - wb[k]))) for k in wb)
print(f"{ranks} ranks vs one process: losses {a} vs {b}, worst {worst_loss:.2g}; weights worst {worst_weight:.2g} "
      f"over {len(wb)} tensors")
assert len(a) == len(b) > 0 and worst_loss <= 1e-6 and worst_weight <= 1e-5 and len(wa) == len(wb)
print(f"ok: {ranks} ranks give one process's losses (<= 1e-6) and weights (<= 1e-5)")
PY
/usr/bin/python3 "$dir/compare.py" "$dir/dp.json" "$dir/one.json" "$dir/ck_dp" "$dir/ck_one" 2 &&
  passed=$((passed + 1)) || fail "losses and weights of 2 ranks against one process"

# 4 ranks on this 2-core machine: a smaller step (N=2), 4 steps
expect 0 "compile --ranks 4" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --fuse-loss off --ranks 4 \
  -o "$dir/dp4.tfplan"
expect 0 "compile its one-process twin: --accumulate 4" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
  --fuse-loss off --accumulate 4 --no-update-in-backward -o "$dir/one4.tfplan"
expect 0 "mpirun -np 4 tightfit train 4 steps" $mpi 4 "$tf" train "$dir/dp4.tfplan" --data models/data/text/train \
  --steps 4 --threads 1 --json --checkpoint "$dir/ck_dp4"
cp "$dir/out" "$dir/dp4.json"
expect 0 "one process, the same global batch" "$tf" train "$dir/one4.tfplan" --data models/data/text/train --steps 4 \
  --threads 1 --json --checkpoint "$dir/ck_one4"
cp "$dir/out" "$dir/one4.json"
/usr/bin/python3 "$dir/compare.py" "$dir/dp4.json" "$dir/one4.json" "$dir/ck_dp4" "$dir/ck_one4" 4 &&
  passed=$((passed + 1)) || fail "losses and weights of 4 ranks against one process"

# Each gradient summed as the backward pass finishes it, on a thread of its own (tools/dist_buckets.c:
# where the machine has a core to spare, or TIGHTFIT_DIST_OVERLAP=1), or all after the backward pass
# (TIGHTFIT_DIST_OVERLAP=0): the same MPI_Allreduce of each gradient, so the same losses and checkpoint
# byte for byte, also when a step's micro-batches accumulate first (the sum after the last one)
expect 0 "compile --ranks 2 --accumulate 2" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
  --fuse-loss off --ranks 2 --accumulate 2 --no-update-in-backward -o "$dir/dp_acc.tfplan"
for plan in dp dp_acc; do
  for overlap in 0 1; do
    expect 0 "$plan, TIGHTFIT_DIST_OVERLAP=$overlap" env TIGHTFIT_DIST_OVERLAP=$overlap $mpi 2 "$tf" train \
      "$dir/$plan.tfplan" --data models/data/text/train --steps 4 --threads 1 --json --checkpoint "$dir/ck_${plan}_$overlap"
    grep '"step"' "$dir/out" | sed 's/, "samples_per_second".*//' > "$dir/${plan}_$overlap.json"
    if [ $overlap = 1 ]; then said="grep -q 'sum each of the [0-9]* gradients as the backward pass finishes it' '$dir/err'"
    else said="! grep -q 'sum each of the' '$dir/err'"; fi
    check "$plan, TIGHTFIT_DIST_OVERLAP=$overlap: rank 0 says where the sums run" "$said"
  done
  check "$plan: summed in the backward pass, the losses of the sums after it" \
    cmp "$dir/${plan}_0.json" "$dir/${plan}_1.json"
  check "$plan: and the checkpoint, byte for byte" \
    cmp "$dir/ck_${plan}_0/latest.safetensors" "$dir/ck_${plan}_1/latest.safetensors"
done

expect_message 2 "3 processes for a plan of 2 ranks" "but mpirun started 3 processes" \
  $mpi 3 "$tf" train "$dir/dp.tfplan" --data models/data/text/train --steps 1
expect_message 2 "--ranks with --update-in-backward" "cannot go with --update-in-backward" \
  "$tf" compile "$dir/gpt.tfg" --ranks 2 --update-in-backward
expect_message 2 "--ranks 0" "--ranks takes 1..1024" "$tf" compile "$dir/gpt.tfg" --ranks 0

# TIGHTFIT_DIST_NCCL (tools/dist.h): 0 sums host-staged, as unset does on the cpu, to the same losses; 1 demands
# the device's all-reduce, which the cpu backend has not, so it is refused, in a job and in one process; other
# values are refused
expect 0 "TIGHTFIT_DIST_NCCL=0: 2 ranks, host-staged" env TIGHTFIT_DIST_NCCL=0 $mpi 2 "$tf" train "$dir/dp.tfplan" \
  --data models/data/text/train --steps 6 --threads 1 --json
check "TIGHTFIT_DIST_NCCL=0 says so and gives the same losses" \
  "grep -q 'over MPI, host-staged (TIGHTFIT_DIST_NCCL=0)' '$dir/err' && \
[ \"\$(grep -o '\"loss\": [^,]*' '$dir/out')\" = \"\$(grep -o '\"loss\": [^,]*' '$dir/dp.json')\" ]"
expect_message 2 "TIGHTFIT_DIST_NCCL=1 on the cpu, 2 ranks" \
  "TIGHTFIT_DIST_NCCL=1 asks for the gradients to be summed on the device (NCCL), but the cpu backend has no device" \
  env TIGHTFIT_DIST_NCCL=1 $mpi 2 "$tf" train "$dir/dp.tfplan" --data models/data/text/train --steps 1 --threads 1
expect_message 2 "TIGHTFIT_DIST_NCCL=1 on the cpu, one process" \
  "but the cpu backend has no device collectives (unset it, or set it to 0" \
  env TIGHTFIT_DIST_NCCL=1 "$tf" train "$dir/one.tfplan" --data models/data/text/train --steps 1 --threads 1
expect_message 2 "TIGHTFIT_DIST_NCCL=yes" "TIGHTFIT_DIST_NCCL='yes': takes 0" \
  env TIGHTFIT_DIST_NCCL=yes "$tf" train "$dir/one.tfplan" --data models/data/text/train --steps 1 --threads 1
finish test_ranks
