#!/bin/sh
# The CUDA backend is a module of its own (libtightfit_cuda.so, backends/cuda/cuda_module.h), checked
# from outside the code: the CLI and libtightfit.so name no CUDA library (readelf), commands that do
# not ask for a CUDA device never open one (the dynamic loader's own log, LD_DEBUG=files), one that
# does loads the module and through it the CUDA runtime and cuBLAS (the same log), a missing or
# broken module is an error that names it (exit 2) while cpu and vulkan keep working, and the
# module exports its entry point only.
# usage: test_cuda_module.sh TIGHTFIT MODULE   (run from the repository root)
tf=$1 module=$2
. "$(dirname "$0")/harness.sh"
lib=$(dirname "$tf")/libtightfit.so

for f in "$tf" "$lib"; do
  readelf -d "$f" | grep NEEDED > "$dir/needed"
  check "$(basename "$f") needs no CUDA library: $(tr -s ' ' < "$dir/needed" | sed 's/.*\[//; s/\]//' | tr '\n' ' ')" \
    "! grep -qi 'libcu' '$dir/needed'"
done
readelf -d "$module" | grep NEEDED > "$dir/needed"
check "the module needs the CUDA runtime and cuBLAS" "grep -q libcudart '$dir/needed' && grep -q libcublas '$dir/needed'"
nm -D --defined-only "$module" | awk '{print $3}' | grep -v '^$' > "$dir/exports"
check "the module exports tf_cuda_module_get only: $(tr '\n' ' ' < "$dir/exports")" \
  "[ \"\$(cat '$dir/exports')\" = tf_cuda_module_get ]"

# What the dynamic loader opens, from its own log.
LD_DEBUG=files "$tf" zoo mlp -o "$dir/mlp.tfg" > /dev/null 2> "$dir/ld"
check "zoo loads no CUDA library" "! grep -q 'libcu' '$dir/ld'"
LD_DEBUG=files "$tf" compile "$dir/mlp.tfg" --target cuda --optimizer adamw -o "$dir/mlp.tfplan" > /dev/null 2> "$dir/ld"
check "compile --target cuda loads no CUDA library" "! grep -q 'libcu' '$dir/ld'"
LD_DEBUG=files "$tf" check "$dir/mlp.tfg" --target cuda --budget 16GiB > /dev/null 2> "$dir/ld"
check "check --target cuda loads no CUDA library" "! grep -q 'libcu' '$dir/ld'"
LD_DEBUG=files "$tf" devices > "$dir/devices" 2> "$dir/ld"
check "devices loads the module" "grep -q 'file=.*libtightfit_cuda.so' '$dir/ld'"
check "... and through it the CUDA runtime and cuBLAS" "grep -q 'file=libcudart' '$dir/ld' && grep -q 'file=libcublas' '$dir/ld'"
check "devices lists cuda (a device or why there is none)" "grep -q '^cuda' '$dir/devices'"

# A module that is not there, or not one.
TIGHTFIT_CUDA_MODULE=$dir/none.so expect 0 "devices without the module" "$tf" devices
check "cpu still listed" "grep -q '^cpu:0' '$dir/out'"
check "cuda: unavailable, naming the path that is not there and the module" \
  "grep -q '^cuda: unavailable: TIGHTFIT_CUDA_MODULE names $dir/none.so, which is not there.*libtightfit_cuda.so' '$dir/out'"
TIGHTFIT_CUDA_MODULE=$dir/none.so expect 0 "devices --json without the module" "$tf" devices --json
check "cuda is unavailable in the JSON, with the reason" "/usr/bin/python3 -c \"
import json
d = json.load(open('$dir/out'))['devices']
cuda = [e for e in d if e['backend'] == 'cuda']
assert len(cuda) == 1 and cuda[0]['available'] is False and 'TIGHTFIT_CUDA_MODULE' in cuda[0]['why'], cuda
assert d[0]['device'] == 'cpu:0' and d[0]['available'], d[0]
\""
TIGHTFIT_CUDA_MODULE=$dir/none.so expect 2 "train on cuda without the module" "$tf" train "$dir/mlp.tfplan" \
  --device cuda:0 --steps 1 --data models/data/digits/train
check "the error names the module" "grep -q 'libtightfit_cuda.so' '$dir/err'"
printf 'not an ELF file\n' > "$dir/broken.so"
TIGHTFIT_CUDA_MODULE=$dir/broken.so expect 2 "train on cuda with a broken module" "$tf" train "$dir/mlp.tfplan" \
  --device cuda:0 --steps 1 --data models/data/digits/train
check "the error says it does not load, and why" "grep -q 'broken.so does not load: .*' '$dir/err'"
TIGHTFIT_CUDA_MODULE=$dir/none.so expect 2 "check --device cuda:0 without the module" "$tf" check "$dir/mlp.tfg" \
  --device cuda:0
check "the error names the device and the module" "grep -q -- '--device cuda:0: .*libtightfit_cuda.so' '$dir/err'"
TIGHTFIT_CUDA_MODULE=$dir/none.so expect 0 "compile for cpu without the module" "$tf" compile "$dir/mlp.tfg" \
  --target cpu --optimizer adamw -o "$dir/cpu.tfplan"
TIGHTFIT_CUDA_MODULE=$dir/none.so expect 0 "train on cpu without the module" "$tf" train "$dir/cpu.tfplan" --steps 2 \
  --data models/data/digits/train

finish test_cuda_module
