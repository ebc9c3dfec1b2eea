#!/bin/sh
# --resume of a data-parallel job (issue 45): rank 0's checkpoint holds the whole state (ZeRO stage 0:
# every rank has the same weights and optimizer state) and counts the job's micro-batches, so every
# rank loads it and takes its micro-batches from there. A job of 2 ranks trained 3 + 3 steps across
# --resume ends at the checkpoint of 6 steps straight, byte for byte (the same sums in the same
# order), with the same losses; one process with --accumulate 2 (the same global batch) resumes that
# 3-step checkpoint at the job's losses (<= 1e-6) and weights (<= 1e-5: its sums run in another
# order), and a job resumes one process's checkpoint alike. Only rank 0 takes the checkpoint lock and
# writes. SKIPs (exit 77) without mpirun or without MPI in the build.
# usage: test_ranks_resume.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
skip_without_numpy
mpi="mpirun --allow-run-as-root --oversubscribe -np"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
data=models/data/text/train

"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
expect 0 "compile --ranks 2" "$tf" compile "$dir/gpt.tfg" --set N=4,T=32 --optimizer adamw --fuse-loss off --ranks 2 \
  -o "$dir/dp.tfplan"
expect 0 "compile the one-process twin: --accumulate 2" "$tf" compile "$dir/gpt.tfg" --set N=4,T=32 --optimizer adamw \
  --fuse-loss off --accumulate 2 --no-update-in-backward -o "$dir/one.tfplan"
"$tf" train "$dir/dp.tfplan" --data $data --steps 1 > "$dir/out" 2> "$dir/err"
if grep -q "this build has no MPI" "$dir/err"; then
  echo "SKIP: this build has no MPI: $(cat "$dir/err")"
  exit 77
fi

train_job() { # train_job NAME STEPS CHECKPOINT [--resume]: 2 ranks; their lines in $dir/NAME.json
  expect 0 "$1: mpirun -np 2 tightfit train --steps $2 $4" $mpi 2 "$tf" train "$dir/dp.tfplan" --data $data \
    --steps "$2" --threads 1 --json --checkpoint "$3" $4
  cp "$dir/out" "$dir/$1.json"
  cp "$dir/err" "$dir/$1.err"
}
train_job straight 6 "$dir/ck_straight"
train_job first 3 "$dir/ck_resumed"
cp -r "$dir/ck_resumed" "$dir/ck_one"
cp -r "$dir/ck_resumed" "$dir/ck_job3"
train_job second 6 "$dir/ck_resumed" --resume
check "the resumed job said so once (rank 0): 'resumed from ... at step 3'" \
  "[ \$(grep -c 'resumed from .* at step 3' '$dir/second.err') = 1 ]"
check "3 + 3 steps across --resume end at the checkpoint of 6 straight, byte for byte" \
  cmp "$dir/ck_straight/latest.safetensors" "$dir/ck_resumed/latest.safetensors"
check "only rank 0 writes: the folder holds latest.safetensors and rank 0's train.lock" \
  "[ \"\$(ls '$dir/ck_resumed' | tr '\n' ' ')\" = 'latest.safetensors train.lock ' ]"

# One process with --accumulate 2 resumes the job's 3-step checkpoint; then a job resumes one
# process's 3-step checkpoint.
expect 0 "one process --accumulate 2 resumes the job's checkpoint" "$tf" train "$dir/one.tfplan" --data $data \
  --steps 6 --threads 1 --json --checkpoint "$dir/ck_one" --resume
cp "$dir/out" "$dir/one_resumed.json"
expect 0 "one process --accumulate 2, 3 steps" "$tf" train "$dir/one.tfplan" --data $data --steps 3 --threads 1 \
  --checkpoint "$dir/ck_from_one"
train_job from_one 6 "$dir/ck_from_one" --resume

/usr/bin/python3 - "$dir" << 'PY' && passed=$((passed + 1)) || fail "the resumed runs' losses, weights and counters"
import json, struct, sys
import numpy as np
d = sys.argv[1]
def losses(name):
    return {json.loads(line)["step"]: json.loads(line)["loss"] for line in open(f"{d}/{name}.json")
            if line.startswith('{"step"')}
def checkpoint(folder):
    data = open(f"{d}/{folder}/latest.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
               for k, v in header.items() if k != "__metadata__"}
    return tensors, header["__metadata__"]
straight, first, second = losses("straight"), losses("first"), losses("second")
print(f"6 straight {straight}; 3 {first} + 3 resumed {second}")
assert sorted(first) == [1, 2, 3] and sorted(second) == [4, 5, 6]
assert all(straight[s] == {**first, **second}[s] for s in straight), "the resumed job's losses differ"
job, meta = checkpoint("ck_straight")
counters = {k: meta[k] for k in ("tightfit.optimizer_step", "tightfit.micro_step", "tightfit.accumulate")}
print(f"the job's checkpoint counts the job's micro-batches: {counters}")
assert counters == {"tightfit.optimizer_step": "6", "tightfit.micro_step": "12", "tightfit.accumulate": "2"}
for name, folder in (("one_resumed", "ck_one"), ("from_one", "ck_from_one")):
    resumed = losses(name)
    worst_loss = max(abs(resumed[s] - straight[s]) for s in (4, 5, 6))
    tensors, meta = checkpoint(folder)
    worst_weight = max(float(np.max(np.abs(tensors[k] - job[k]))) for k in job)
    print(f"{name}: steps {sorted(resumed)} losses worst {worst_loss:.2g} from the job's; state worst "
          f"{worst_weight:.2g} over {len(job)} tensors; step {meta['tightfit.optimizer_step']}, micro-step "
          f"{meta['tightfit.micro_step']}")
    assert sorted(resumed) == [4, 5, 6] and worst_loss <= 1e-6 and worst_weight <= 1e-5 and len(tensors) == len(job)
    assert meta["tightfit.optimizer_step"] == "6" and meta["tightfit.micro_step"] == "12"
print("ok: 3 + 3 steps of 2 ranks give 6 straight's losses; one process (--accumulate 2) resumes the job, "
      "and the job one process, at the job's losses (<= 1e-6) and state (<= 1e-5)")
PY
finish test_ranks_resume
