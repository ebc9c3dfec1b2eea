#!/bin/sh
# ZeRO stage 1 (issue 45 item 2): `compile --ranks R --zero 1` shards the optimizer state across the
# ranks as DeepSpeed's flat partition: the updates' state cut into R equal runs, an update a cut falls
# in split into ranges, one per rank, over flat views of its parameter and gradient (the state region
# the largest shard, a quarter of the whole at 4 ranks within the alignment); `check --ranks R --zero
# 1` says so without running: gpt2-small at 8 ranks holds 8 bytes x its parameters / 8 of AdamW state
# (to 0.1%) and otherwise the stage-0 plan's bytes. A job of 2 and of 4 ranks, with split parameters,
# trains to the losses and the checkpoint of the same job at ZeRO stage 0 byte for byte (the same
# sums, each update or range run once by its owner, sent to the others; rank 0 gathers the shards,
# a split state piece by piece, into the checkpoint under the stage-0 names), with --checkpoint-every
# too; 3 + 3 steps across --resume (each rank loads its shard) end on the 6 steps' checkpoint; a
# stage-0 job or one process resumes a stage-1 checkpoint; a job of 4 ranks resumes one of 2 ranks
# (--accumulate 2, the same global batch) and the other way round, and one process (--accumulate 4)
# resumes the 4 ranks', at the straight job's losses (1e-6) and weights (1e-5; the sums' order
# differs); on lavapipe (vulkan:0, where present) 4 ranks with split parameters give stage 0's
# losses and checkpoint byte for byte. ZeRO stage 2 (the gradients sharded, the backward pass writing
# buckets reduced to their owners): 2 ranks give stage 0's losses and checkpoint byte for byte; 4
# ranks, 2 x --accumulate 2 and 4 ranks on lavapipe stage 0's losses to 1e-6 and state to 1e-5 (the
# reduction's order differs); --resume, a stage-0 job resuming it, and across rank counts and stages
# (2 x 2 <-> 4, stage 2 <-> 1) at the straight job's; gpt2-small's state and gradients per rank at 8
# ranks are 12 bytes x its parameters / 8 plus the buckets (1%). With --offload optimizer (ZeRO-Offload)
# each rank's shard of the state is in host memory and its updates on the host: on lavapipe, 4 ranks
# at stages 1 and 2 end on the device-state job's losses and checkpoint byte for byte, also across
# --resume, the host holding the largest shard; with --offload activations (and optimizer,activations)
# at stages 1 and 2 the device job's losses and checkpoint byte for byte; with --offload gradients at
# stage 1 (2 micro-batches, clipping) stage 0's offloaded job's, also across --resume, and at stage 2
# (the shards in host memory, the buckets on the device) the state-offloaded stage-2 job's byte for
# byte, also across --resume. With --clip at stage 2 (the norm summed by the job) 4 ranks x 2 micro-batches end on stage 0's losses to
# 1e-6; with f16 loss scaling (--autocast fp16) stage 2 skips the steps stage 0 skips, at its losses.
# Refused with the reason: --zero without --ranks, --checkpoint-every-minutes. SKIPs (exit 77) without mpirun or without MPI in the build.
# usage: test_ranks_zero.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
mpi="mpirun --allow-run-as-root --oversubscribe -np"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
data=models/data/text/train
region() { # region OUTPUT NAME: a region's exact bytes from compile's text
  sed -n "s/^  $2 .*(\([0-9]*\) bytes)$/\1/p" "$1"
}

"$tf" zoo gpt --param layers=1 -o "$dir/gpt.tfg" > /dev/null
for ranks in 2 4; do
  for zero in 0 1; do
    expect 0 "compile --ranks $ranks --zero $zero" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
      --fuse-loss off --ranks $ranks --zero $zero -o "$dir/r${ranks}z$zero.tfplan"
    cp "$dir/out" "$dir/r${ranks}z$zero.txt"
  done
  whole=$(region "$dir/r${ranks}z0.txt" optimizer_state) shard=$(region "$dir/r${ranks}z1.txt" optimizer_state)
  check "$ranks ranks: each holds at most its share of the state and a parameter's more ($shard of $whole bytes)" \
    test "$shard" -lt "$whole" -a "$shard" -le $((whole / ranks + 131072))
done
"$tf" train "$dir/r2z1.tfplan" --data $data --steps 1 > "$dir/out" 2> "$dir/err"
if grep -q "this build has no MPI" "$dir/err"; then
  echo "SKIP: this build has no MPI: $(cat "$dir/err")"
  exit 77
fi
expect_message 0 "report: the shards" "ZeRO stage 1 over 2 ranks: .* updates sharded; optimizer state .* MiB per rank" \
  "$tf" report "$dir/r2z1.tfplan"
expect_message 0 "report: 4 ranks split parameters across ranks" "ZeRO stage 1 over 4 ranks: .*; [1-9][0-9]* parameters \
split across ranks, in [1-9][0-9]* ranges" "$tf" report "$dir/r4z1.tfplan"
"$tf" zoo gpt2-small -o "$dir/gpt2.tfg" > /dev/null
for zero in 0 1; do
  expect 0 "check gpt2-small --ranks 8 --zero $zero --json" "$tf" check "$dir/gpt2.tfg" --set N=8,T=1024 \
    --optimizer adamw --target cuda --budget 80GiB --ranks 8 --zero $zero --json
  cp "$dir/out" "$dir/gpt2_z$zero.json"
done
trained=$("$tf" inspect "$dir/gpt2.tfg" | sed -n 's/^parameters: \([0-9,]*\) in .*/\1/p' | tr -d ,)
/usr/bin/python3 - "$dir" "$trained" << 'PY' && pass "gpt2-small, 8 ranks: AdamW state 8 bytes x parameters / 8 per rank (0.1%), the rest stage 0's" || fail "gpt2-small, 8 ranks: the per-rank state"
import json, sys
z0, z1 = (json.load(open(f"{sys.argv[1]}/gpt2_z{z}.json"))["categories"] for z in (0, 1))
formula = 8 * int(sys.argv[2]) / 8  # f32 AdamW: 8 bytes a parameter (Ψ of them), over 8 ranks
print(f"gpt2-small, 8 ranks: state {z1['optimizer_state'] / 2**20:.2f} MiB per rank, 8Ψ/8 = {formula / 2**20:.2f} "
      f"MiB (stage 0: {z0['optimizer_state'] / 2**20:.2f}); device total {z1['total'] / 2**30:.3f} GiB "
      f"(stage 0: {z0['total'] / 2**30:.3f})")
assert formula <= z1["optimizer_state"] <= formula * 1.001
for part in ("parameters", "gradients", "activations", "workspace", "inputs"):
    assert z1[part] == z0[part], part
expected = z0["total"] - z0["optimizer_state"] + formula
assert abs(z1["total"] - expected) <= 0.01 * expected, (z1["total"], expected)
PY
expect_message 0 "check --ranks 8 --zero 1 answers without running" "fits" "$tf" check "$dir/gpt.tfg" --set N=2,T=32 \
  --ranks 8 --zero 1 --budget 64MiB

job() { # job RANKS PLAN NAME STEPS [ARGS]: a job's 6 steps' JSON in $dir/NAME.json, checkpoint in $dir/ck_NAME
  ranks=$1 plan=$2 name=$3 steps=$4
  shift 4
  expect 0 "$ranks ranks: train $plan ($name, $steps steps)" $mpi "$ranks" "$tf" train "$dir/$plan.tfplan" --data $data \
    --steps "$steps" --threads 1 --json --checkpoint "$dir/ck_$name" "$@"
  grep '"step"' "$dir/out" | sed 's/, "samples_per_second".*//' > "$dir/$name.json"
}
same_job() { # same_job A B WHAT: jobs A and B end on the same losses and checkpoint, byte for byte
  check "$3 losses" cmp "$dir/$1.json" "$dir/$2.json"
  check "$3 checkpoint byte for byte" cmp "$dir/ck_$1/latest.safetensors" "$dir/ck_$2/latest.safetensors"
}
resumes() { # resumes PLAN WHAT: 4 ranks on vulkan:0, 2 + 1 steps across --resume end on job PLAN's 3 steps'
  job 4 "$1" "$1_resumed" 2 --device vulkan:0
  job 4 "$1" "$1_resumed" 3 --device vulkan:0 --resume
  check "$2, 2 + 1 steps across --resume end on the 3 steps' checkpoint" \
    cmp "$dir/ck_$1/latest.safetensors" "$dir/ck_$1_resumed/latest.safetensors"
}
close() { # close A B WHAT [LOSS STATE]: jobs A and B (their JSON and checkpoints): losses to 1e-6, state to
  # 1e-5 (or to LOSS and STATE)
  if ! /usr/bin/python3 -c "import numpy" 2> /dev/null; then
    echo "skipped: $3 (no numpy for /usr/bin/python3)"
    return
  fi
  /usr/bin/python3 - "$dir" "$1" "$2" "${4:-1e-6}" "${5:-1e-5}" << 'PY' && pass "$3: losses (${4:-1e-6}) and state (${5:-1e-5})" || fail "$3"
import json, re, struct, sys
import numpy as np
d, a, b = sys.argv[1:4]
loss_tolerance, state_tolerance = float(sys.argv[4]), float(sys.argv[5])
def losses(name):
    found = (re.search(r'"step": (\d+).*"loss": ([-0-9.e+]+)', line) for line in open(f"{d}/{name}.json"))
    return {int(m.group(1)): float(m.group(2)) for m in found if m}
def checkpoint(name):
    data = open(f"{d}/ck_{name}/latest.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header, body = json.loads(data[8:8 + n]), data[8 + n:]
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__"}
la, lb, ca, cb = losses(a), losses(b), checkpoint(a), checkpoint(b)
worst_loss = max(abs(la[s] - lb[s]) for s in lb)  # a resumed job's steps: the last of the other's
worst = max(float(np.max(np.abs(ca[k] - cb[k]))) for k in ca)
print(f"{a} / {b}: steps {sorted(lb)}, losses worst {worst_loss:.2g}, state worst {worst:.2g} over {len(cb)} tensors")
assert set(lb) <= set(la) and len(lb) >= 3 and max(lb) == max(la) and sorted(ca) == sorted(cb)
assert worst_loss <= loss_tolerance and worst <= state_tolerance
PY
}
job 2 r2z0 z0 6
job 2 r2z1 z1 6 --checkpoint-every 2
check "2 ranks: ZeRO 1 and 0 give the same losses" cmp "$dir/z0.json" "$dir/z1.json"
check "2 ranks: ZeRO 1 gathers the checkpoint of ZeRO 0, byte for byte" \
  cmp "$dir/ck_z0/latest.safetensors" "$dir/ck_z1/latest.safetensors"
job 4 r4z0 four0 4
job 4 r4z1 four1 4
check "4 ranks: the same losses" cmp "$dir/four0.json" "$dir/four1.json"
check "4 ranks: the same checkpoint, byte for byte" \
  cmp "$dir/ck_four0/latest.safetensors" "$dir/ck_four1/latest.safetensors"

job 2 r2z1 half 3
cp -r "$dir/ck_half" "$dir/ck_resumed"
cp -r "$dir/ck_half" "$dir/ck_stage0"
job 2 r2z1 resumed 6 --resume
check "ZeRO 1: 3 + 3 steps across --resume (each rank loads its shard) end on the 6 steps' checkpoint" \
  cmp "$dir/ck_z1/latest.safetensors" "$dir/ck_resumed/latest.safetensors"
job 2 r2z0 stage0 6 --resume
check "a ZeRO 0 job resumes the ZeRO 1 checkpoint to the same 6 steps' checkpoint" \
  cmp "$dir/ck_z0/latest.safetensors" "$dir/ck_stage0/latest.safetensors"

# Across rank counts: 2 ranks x --accumulate 2 and 4 ranks take the same 8 samples a step (each
# rank's micro-batches as one process with --accumulate 4 would), so each resumes the other's
# checkpoint at the straight 4-rank job's losses and state, as one process does.
expect 0 "compile --ranks 2 --zero 1 --accumulate 2" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
  --fuse-loss off --ranks 2 --zero 1 --accumulate 2 -o "$dir/r2a2z1.tfplan"
expect 0 "compile one process --accumulate 4" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
  --fuse-loss off --accumulate 4 --no-update-in-backward -o "$dir/one4.tfplan"
job 4 r4z1 straight4 6
job 2 r2a2z1 two_then_four 3
job 4 r4z1 two_then_four 6 --resume
job 4 r4z1 four_then_two 3
cp -r "$dir/ck_four_then_two" "$dir/ck_four_then_one"
job 2 r2a2z1 four_then_two 6 --resume
expect 0 "one process (ZeRO 0) resumes the 4 ranks' checkpoint" "$tf" train "$dir/one4.tfplan" --data $data \
  --steps 6 --threads 1 --json --checkpoint "$dir/ck_four_then_one" --resume
grep '"step"' "$dir/out" | sed 's/, "samples_per_second".*//' > "$dir/four_then_one.json"
if /usr/bin/python3 -c "import numpy" 2> /dev/null; then
  /usr/bin/python3 - "$dir" << 'PY' && pass "across rank counts: the straight job's losses (1e-6) and checkpoint (1e-5)" || fail "across rank counts"
import json, re, struct, sys
import numpy as np
d = sys.argv[1]
def losses(name):  # the job's lines, cut before their timing: {"step": S, ... "loss": L
    found = (re.search(r'"step": (\d+).*"loss": ([-0-9.e+]+)', line) for line in open(f"{d}/{name}.json"))
    return {int(m.group(1)): float(m.group(2)) for m in found if m}
def checkpoint(folder):
    data = open(f"{d}/{folder}/latest.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return ({k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
             for k, v in header.items() if k != "__metadata__"}, header["__metadata__"])
straight = losses("straight4")
job, _ = checkpoint("ck_straight4")
for name in ("two_then_four", "four_then_two", "four_then_one"):
    resumed = losses(name)
    tensors, meta = checkpoint(f"ck_{name}")
    worst_loss = max(abs(resumed[s] - straight[s]) for s in (4, 5, 6))
    worst_weight = max(float(np.max(np.abs(tensors[k] - job[k]))) for k in job)
    print(f"{name}: steps {sorted(resumed)}, losses worst {worst_loss:.2g}, state worst {worst_weight:.2g} over "
          f"{len(tensors)} tensors (the straight job's {len(job)}), micro-step {meta['tightfit.micro_step']}")
    assert sorted(resumed)[-3:] == [4, 5, 6] and worst_loss <= 1e-6 and worst_weight <= 1e-5
    assert sorted(tensors) == sorted(job) and meta["tightfit.micro_step"] == "24"
PY
else
  echo "skipped: across rank counts (no numpy for /usr/bin/python3)"
fi

# The Vulkan backend binds each view at its offset in the region: on lavapipe, 4 ranks with split
# parameters give stage 0's losses and checkpoint byte for byte too.
if "$tf" devices 2> /dev/null | grep -q '^vulkan:0'; then
  for zero in 0 1 2; do
    expect 0 "compile --target vulkan --ranks 4 --zero $zero" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 \
      --optimizer adamw --fuse-loss off --ranks 4 --zero $zero --target vulkan -o "$dir/vk$zero.tfplan"
    job 4 vk$zero vk$zero 3 --device vulkan:0
  done
  check "vulkan, 4 ranks: ZeRO 1 (split parameters) and 0 give the same losses" cmp "$dir/vk0.json" "$dir/vk1.json"
  check "vulkan, 4 ranks: the same checkpoint, byte for byte" \
    cmp "$dir/ck_vk0/latest.safetensors" "$dir/ck_vk1/latest.safetensors"
  close vk0 vk2 "vulkan, 4 ranks: ZeRO 2 (its micro-batch blocks paused at each bucket's reduction) against ZeRO 0"
  # ZeRO-Offload: each rank's shard of the state in host memory, its updates (and split ranges) run
  # on the host's cores; the device holds no state, the host the largest shard; the host's AdamW is
  # the shader's bit for bit, so the job ends on the device-state job's checkpoint byte for byte.
  for zero in 1 2; do
    for off in "" off; do
      # shellcheck disable=SC2046
      expect 0 "compile --target vulkan --ranks 4 --zero $zero${off:+ --offload optimizer} --json" "$tf" compile \
        "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --fuse-loss off --ranks 4 --zero $zero --target vulkan \
        $([ -n "$off" ] && echo --offload optimizer) --json -o "$dir/vk$zero$off.tfplan"
      cp "$dir/out" "$dir/vk$zero${off}_plan.json"
    done
    /usr/bin/python3 - "$dir/vk${zero}_plan.json" "$dir/vk${zero}off_plan.json" << 'PY' &&
import json, sys
device, host = (json.load(open(f)) for f in sys.argv[1:])
shard = device["regions"]["optimizer_state"]
print(f"     the largest shard {shard} bytes; offloaded: host {host['host_bytes']}, device state "
      f"{host['regions']['optimizer_state']}, moved {host['host_moved_bytes_per_step']} bytes a step")
assert shard > 0 and host["host_bytes"] == shard and host["regions"]["optimizer_state"] == 0
PY
      pass "ZeRO $zero offloaded: the host holds the largest shard of the state, the device none" ||
      fail "ZeRO $zero offloaded: the host holds the largest shard of the state, the device none"
    job 4 vk${zero}off vk${zero}off 3 --device vulkan:0
    check "vulkan, 4 ranks: ZeRO $zero with the state offloaded, the device-state job's losses" \
      cmp "$dir/vk$zero.json" "$dir/vk${zero}off.json"
    check "vulkan, 4 ranks: ZeRO $zero with the state offloaded, its checkpoint byte for byte" \
      cmp "$dir/ck_vk$zero/latest.safetensors" "$dir/ck_vk${zero}off/latest.safetensors"
  done
  # Offloaded activations under ZeRO: their copies are host steps of the micro-batch block, which at
  # stage 2 is cut at the buckets' pauses (each copy runs in the range it falls in); alone and with
  # the state offloaded, 4 ranks end on the device job's losses and checkpoint byte for byte.
  for zero in 1 2; do
    for off in activations optimizer,activations; do
      expect_message 0 "compile --target vulkan --ranks 4 --zero $zero --offload $off" "the offloaded activations" \
        "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --fuse-loss off --ranks 4 --zero $zero \
        --target vulkan --offload $off -o "$dir/vk${zero}act.tfplan"
      job 4 vk${zero}act vk${zero}act 3 --device vulkan:0
      check "vulkan, 4 ranks: ZeRO $zero with --offload $off, the device job's losses" \
        cmp "$dir/vk$zero.json" "$dir/vk${zero}act.json"
      check "vulkan, 4 ranks: ZeRO $zero with --offload $off, its checkpoint byte for byte" \
        cmp "$dir/ck_vk$zero/latest.safetensors" "$dir/ck_vk${zero}act/latest.safetensors"
    done
  done
  # Offloaded gradients at stage 1: each micro-batch's parts added into the gradients in host memory
  # by host steps; the ranks sum the whole gradients there after the block, then each updates its
  # shard on the host. With 2 micro-batches and clipping, 4 ranks end on stage 0's offloaded job's
  # losses and checkpoint byte for byte (the parts' sums in host memory order the additions alike).
  for zero in 0 1; do
    expect_message 0 "compile --target vulkan --ranks 4 --zero $zero --offload gradients" \
      "the offloaded gradients and optimizer state" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
      --fuse-loss off --ranks 4 --zero $zero --accumulate 2 --clip 1.0 --target vulkan --offload gradients \
      -o "$dir/vk${zero}grad.tfplan"
    job 4 vk${zero}grad vk${zero}grad 3 --device vulkan:0
  done
  same_job vk0grad vk1grad "vulkan, 4 ranks: ZeRO 1 with the gradients offloaded, stage 0's offloaded job's"
  resumes vk1grad "vulkan, 4 ranks: ZeRO 1 with the gradients offloaded"
  # Offloaded gradients at stage 2: the backward pass writes the device's buckets, the ranks reduce
  # each into its owner's shard in host memory, and each updates its shard on the host: 4 ranks with
  # 2 micro-batches and clipping end on the stage-2 job with the state offloaded (the same reductions,
  # the same host updates) byte for byte, also across --resume.
  for off in optimizer gradients; do
    expect_message 0 "compile --target vulkan --ranks 4 --zero 2 --offload $off" "host memory" "$tf" compile \
      "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw --fuse-loss off --ranks 4 --zero 2 --accumulate 2 --clip 1.0 \
      --target vulkan --offload $off -o "$dir/vk2$off.tfplan"
    cp "$dir/out" "$dir/vk2$off.txt"
    job 4 vk2$off vk2$off 3 --device vulkan:0
  done
  check "compile: ZeRO 2 with the gradients offloaded, the shards in host memory (a smaller gradients region)" \
    test "$(region "$dir/vk2gradients.txt" gradients)" -lt "$(region "$dir/vk2optimizer.txt" gradients)"
  same_job vk2optimizer vk2gradients "vulkan, 4 ranks: ZeRO 2 with the gradients offloaded, the state-offloaded job's"
  resumes vk2gradients "vulkan, 4 ranks: ZeRO 2 with the gradients offloaded"
  # resumed: each rank loads its shard into host memory
  resumes vk1off "vulkan, 4 ranks: ZeRO 1 offloaded"
else
  echo "skipped: the vulkan jobs (no vulkan:0)"
fi

# ZeRO stage 2: the gradients sharded too. Each rank holds the gradients of its shard (a gradient
# whole, or the pieces of a split one) and the buckets the backward pass writes, each reduced to its
# owners after its last writer (MPI_Reduce per range, tools/dist_buckets.c). 2 ranks give stage 0's
# losses and checkpoint byte for byte (a + b either way); 4 ranks, and 2 x --accumulate 2 (reduced
# per micro-batch, then added), sum in another order (MPI_Reduce's tree, not MPI_Allreduce's; the
# micro-batches' sums added after the reduction): stage 0's losses to 1e-6 and state to 1e-5.
for ranks in 2 4; do
  expect 0 "compile --ranks $ranks --zero 2" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 --optimizer adamw \
    --fuse-loss off --ranks $ranks --zero 2 -o "$dir/r${ranks}z2.tfplan"
  cp "$dir/out" "$dir/r${ranks}z2.txt"
  whole=$(region "$dir/r${ranks}z0.txt" gradients) sharded=$(region "$dir/r${ranks}z2.txt" gradients)
  check "$ranks ranks, stage 2: the gradients region is the shard and the buckets ($sharded of $whole bytes)" \
    test "$sharded" -lt "$whole"
  check "$ranks ranks, stage 2: the state shards of stage 1" \
    test "$(region "$dir/r${ranks}z2.txt" optimizer_state)" -eq "$(region "$dir/r${ranks}z1.txt" optimizer_state)"
done
expect_message 0 "report: stage 2's gradients and buckets" "ZeRO stage 2: gradients .* MiB per rank (shards .*) of \
.* MiB, plus .* MiB of buckets" "$tf" report "$dir/r4z2.tfplan"
job 2 r2z2 z2 6 --checkpoint-every 2
check "2 ranks: ZeRO 2 and 0 give the same losses" cmp "$dir/z0.json" "$dir/z2.json"
check "2 ranks: ZeRO 2 gathers the checkpoint of ZeRO 0, byte for byte" \
  cmp "$dir/ck_z0/latest.safetensors" "$dir/ck_z2/latest.safetensors"
job 4 r4z2 four2 4
close four0 four2 "4 ranks: ZeRO 2 against ZeRO 0"
for zero in 0 2; do
  expect 0 "compile --ranks 2 --zero $zero --accumulate 2" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 \
    --optimizer adamw --fuse-loss off --ranks 2 --zero $zero --accumulate 2 -o "$dir/r2a2z$zero.tfplan"
  job 2 r2a2z$zero acc$zero 4
done
close acc0 acc2 "2 ranks x --accumulate 2: ZeRO 2 (each micro-batch reduced, then added) against ZeRO 0"
# Clipping at stage 2: no rank holds the whole gradients, so the plan's norm is a constant the job
# writes before each optimizer block, the ranks' sums of squares of their summed ranges added over
# MPI (tools/dist_buckets.c). 4 ranks with 2 micro-batches and --clip 1 end on stage 0's losses to
# 1e-6 and state to 1e-5; clipping binds (the unclipped job's losses differ).
for zero in 0 2; do
  expect 0 "compile --ranks 4 --zero $zero --accumulate 2 --clip 1" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 \
    --optimizer adamw --fuse-loss off --ranks 4 --zero $zero --accumulate 2 --clip 1 -o "$dir/r4clipz$zero.tfplan"
  job 4 r4clipz$zero clip$zero 4
done
close clip0 clip2 "4 ranks x --accumulate 2 with --clip 1: ZeRO 2 (the norm summed by the job) against ZeRO 0"
expect 0 "compile --ranks 4 --accumulate 2 (no clipping)" "$tf" compile "$dir/gpt.tfg" --set N=2,T=32 \
  --optimizer adamw --fuse-loss off --ranks 4 --accumulate 2 -o "$dir/r4noclip.tfplan"
job 4 r4noclip noclip 4
check "--clip 1 changes the 4 ranks' losses (the norm is read)" "! cmp -s '$dir/clip0.json' '$dir/noclip.json'"
# f16 loss scaling at stage 2: the skip of an update whose gradients overflowed is read from the same
# summed norm, so every rank skips the same steps and halves the same scale. --autocast fp16 (the
# gradients pass through f16) from 2^16 with a window of 2: the scale grows until gradients overflow.
# 2 ranks: stage 0's losses, scales, skips and checkpoint byte for byte; 4 ranks x 2 micro-batches:
# the same skips and scales, losses to 5e-5 and state to 5e-3: with gradients rounded to f16, any
# other order of the sums moves AdamW's first updates (here stage 2 is at 9.8e-6 and 1.2e-3; by hand,
# one process with --accumulate 8 against the 4 ranks' stage 0: losses 1.0e-5, state 5.1e-4).
for run in "2 1 6" "4 2 4"; do
  set -- $run
  for zero in 0 2; do
    expect 0 "compile --ranks $1 --zero $zero --accumulate $2 --autocast fp16" "$tf" compile "$dir/gpt.tfg" \
      --set N=2,T=32 --optimizer adamw --fuse-loss off --ranks $1 --zero $zero --accumulate $2 --autocast fp16 \
      -o "$dir/r$1f16z$zero.tfplan"
    job $1 r$1f16z$zero f16_$1_$zero 10 --loss-scale-window 2
    grep '"step"' "$dir/out" | sed 's/.*"loss_scale"/"loss_scale"/' > "$dir/f16_$1_$zero.scales"
  done
  check "$1 ranks, f16: steps skipped and steps taken" \
    "grep -q '\"skipped\": true' '$dir/f16_$1_0.scales' && grep -q '\"skipped\": false' '$dir/f16_$1_0.scales'"
  check "$1 ranks, f16: ZeRO 2 skips the steps ZeRO 0 skips, at the same scales" \
    cmp "$dir/f16_$1_0.scales" "$dir/f16_$1_2.scales"
done
check "2 ranks, f16: ZeRO 2 and 0 give the same losses" cmp "$dir/f16_2_0.json" "$dir/f16_2_2.json"
check "2 ranks, f16: and the same checkpoint, byte for byte" \
  cmp "$dir/ck_f16_2_0/latest.safetensors" "$dir/ck_f16_2_2/latest.safetensors"
close f16_4_0 f16_4_2 "4 ranks x --accumulate 2 with f16 loss scaling: ZeRO 2 against ZeRO 0" 5e-5 5e-3
# The reductions on a thread of their own while the backward pass goes on (tools/dist_buckets.c), and
# at each pause: the same MPI calls in the same order, so the same losses and checkpoints byte for
# byte, also where a step's micro-batches add their sums (--accumulate 2) and with 4 ranks
for run in "2 r2z2 6" "2 r2a2z2 4" "4 r4z2 4"; do
  set -- $run
  for overlap in 0 1; do
    export TIGHTFIT_DIST_OVERLAP=$overlap
    job "$1" "$2" "$2_overlap$overlap" "$3"
    unset TIGHTFIT_DIST_OVERLAP
    check "$2, TIGHTFIT_DIST_OVERLAP=$overlap: rank 0 says where the buckets are reduced" \
      grep -q "ZeRO stage 2 reduces its [0-9]* gradient buckets $([ $overlap = 1 ] && echo 'on a thread of their own' ||
        echo 'at each pause')" "$dir/err"
  done
  check "$2: the buckets reduced on their own thread give the losses of the reductions at each pause" \
    cmp "$dir/$2_overlap0.json" "$dir/$2_overlap1.json"
  check "$2: and the checkpoint, byte for byte" \
    cmp "$dir/ck_$2_overlap0/latest.safetensors" "$dir/ck_$2_overlap1/latest.safetensors"
done
expect_message 2 "TIGHTFIT_DIST_OVERLAP=2 refused" "TIGHTFIT_DIST_OVERLAP='2': takes 0" \
  env TIGHTFIT_DIST_OVERLAP=2 $mpi 2 "$tf" train "$dir/r2z2.tfplan" --data $data --steps 1
job 2 r2z2 half2 3
cp -r "$dir/ck_half2" "$dir/ck_resumed2"
cp -r "$dir/ck_half2" "$dir/ck_stage0_of2"
job 2 r2z2 resumed2 6 --resume
check "ZeRO 2: 3 + 3 steps across --resume end on the 6 steps' checkpoint" \
  cmp "$dir/ck_z2/latest.safetensors" "$dir/ck_resumed2/latest.safetensors"
job 2 r2z0 stage0_of2 6 --resume
check "a ZeRO 0 job resumes the ZeRO 2 checkpoint to the same 6 steps' checkpoint" \
  cmp "$dir/ck_z0/latest.safetensors" "$dir/ck_stage0_of2/latest.safetensors"
# across rank counts and stages: 2 ranks x 2 (stage 2) then 4 ranks (stage 2), 4 ranks (stage 2) then
# 2 ranks x 2 (stage 1), each against the straight 4-rank stage-1 job
job 2 r2a2z2 two_then_four2 3
job 4 r4z2 two_then_four2 6 --resume
close straight4 two_then_four2 "2 ranks x 2 (ZeRO 2) resumed by 4 ranks (ZeRO 2)"
job 4 r4z2 four2_then_two 3
job 2 r2a2z1 four2_then_two 6 --resume
close straight4 four2_then_two "4 ranks (ZeRO 2) resumed by 2 ranks x 2 (ZeRO 1)"

# check --ranks 8 --zero 2: gpt2-small's state and gradients per rank are 12 bytes x Ψ / 8 plus the
# buckets (the report's figure), the rest stage 0's
expect 0 "check gpt2-small --ranks 8 --zero 2 --json" "$tf" check "$dir/gpt2.tfg" --set N=8,T=1024 \
  --optimizer adamw --target cuda --budget 80GiB --ranks 8 --zero 2 --json
cp "$dir/out" "$dir/gpt2_z2.json"
expect 0 "compile gpt2-small --ranks 8 --zero 2" "$tf" compile "$dir/gpt2.tfg" --set N=8,T=1024 --optimizer adamw \
  --target cuda --ranks 8 --zero 2 -o "$dir/gpt2_z2.tfplan"
buckets=$("$tf" report "$dir/gpt2_z2.tfplan" | sed -n 's/.*plus \([0-9.]*\) MiB of buckets.*/\1/p')
/usr/bin/python3 - "$dir" "$trained" "$buckets" << 'PY' && pass "gpt2-small, 8 ranks, stage 2: state + gradients = 12Ψ/8 + the buckets (1%), the rest stage 0's" || fail "gpt2-small, 8 ranks, stage 2"
import json, sys
z0, z2 = (json.load(open(f"{sys.argv[1]}/gpt2_z{z}.json"))["categories"] for z in (0, 2))
psi, buckets = int(sys.argv[2]), float(sys.argv[3]) * 2**20
formula = 12 * psi / 8  # f32 AdamW: 4 bytes of gradient and 8 of state a parameter, over 8 ranks
held = z2["optimizer_state"] + z2["gradients"]
print(f"gpt2-small, 8 ranks, stage 2: state {z2['optimizer_state'] / 2**20:.2f} + gradients "
      f"{z2['gradients'] / 2**20:.2f} MiB per rank = 12Ψ/8 {formula / 2**20:.2f} + buckets {buckets / 2**20:.2f} "
      f"(stage 0: {(z0['optimizer_state'] + z0['gradients']) / 2**20:.2f}); device total {z2['total'] / 2**30:.3f} GiB "
      f"(stage 0: {z0['total'] / 2**30:.3f})")
assert abs(held - (formula + buckets)) <= 0.01 * (formula + buckets), (held, formula, buckets)
assert 0 < buckets < 4 * psi / 2  # the buckets live at once: under half the gradients
for part in ("parameters", "activations", "workspace", "inputs"):
    assert z2[part] == z0[part], part
PY

expect_message 2 "--zero without --ranks" "give --ranks R" "$tf" compile "$dir/gpt.tfg" --zero 1
expect_message 2 "--zero 3" "--zero takes 0, 1 or 2" "$tf" compile "$dir/gpt.tfg" --ranks 2 --zero 3
expect_message 2 "--checkpoint-every-minutes with a ZeRO plan" "save at the same steps" \
  $mpi 2 "$tf" train "$dir/r2z1.tfplan" --data $data --steps 2 --checkpoint "$dir/ck_minutes" \
  --checkpoint-every-minutes 1
finish test_ranks_zero
