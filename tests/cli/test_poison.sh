#!/bin/sh
# Poisoned regions and wide Vulkan bindings through `tightfit train`. TIGHTFIT_POISON_ARENA=1
# (runtime/poison.h) fills the arena and input regions with NaNs before the first step: a kernel
# that read bytes no step or upload wrote would turn the losses NaN, so a poisoned run must end on
# the plain run's checkpoint byte for byte (the char gpt and the cnn, AdamW, 4 steps, on the cpu
# and on Vulkan). TIGHTFIT_VULKAN_WIDE_BINDINGS=1 (backends/vulkan/vk_device.c) binds every operand
# to its region's end, so that lavapipe, which gives 0 for a read past a binding and drops a write
# past it, meets the neighbouring bytes as a GPU would: with both, a shader that strays past its
# operand reads NaNs. A value other than 0 or 1 is refused (exit 2).
# usage: test_poison.sh TIGHTFIT   (run from the repository root; the Vulkan part is skipped, with a
# line saying so, where there is no Vulkan device)
tf=$1
. "$(dirname "$0")/harness.sh"

"$tf" zoo gpt --param layers=2 -o "$dir/gpt.tfg" > /dev/null
"$tf" zoo cnn -o "$dir/cnn.tfg" > /dev/null
data_of() { # data_of MODEL: its training data
  if [ "$1" = gpt ]; then echo models/data/text/train; else echo models/data/digits/train; fi
}
# same_run NAME MODEL TARGET DEVICE ENV...: the plain run and the one under ENV end on the same
# checkpoint, byte for byte
same_run() {
  name=$1 model=$2 target=$3 device=$4
  shift 4
  sizes=N=16
  [ "$model" != gpt ] || sizes=N=2,T=32
  "$tf" compile "$dir/$model.tfg" --set $sizes --optimizer adamw --target "$target" -o "$dir/$name.tfplan" > /dev/null
  expect_message 0 "$name: the plain run" "trained 4 steps" $vk "$tf" train "$dir/$name.tfplan" --data "$(data_of "$model")" \
    --steps 4 --threads 1 --device "$device" --checkpoint "$dir/ck_$name"
  expect_message 0 "$name: the run under $*" "trained 4 steps" env "$@" $vk "$tf" train "$dir/$name.tfplan" \
    --data "$(data_of "$model")" --steps 4 --threads 1 --device "$device" --checkpoint "$dir/ck_${name}_poisoned"
  check "$name: the same checkpoint under $*" cmp "$dir/ck_$name/latest.safetensors" \
    "$dir/ck_${name}_poisoned/latest.safetensors"
}

vk=""
same_run gpt_cpu gpt cpu cpu TIGHTFIT_POISON_ARENA=1
same_run cnn_cpu cnn cpu cpu TIGHTFIT_POISON_ARENA=1
expect_message 2 "TIGHTFIT_POISON_ARENA takes 0 or 1" "TIGHTFIT_POISON_ARENA='yes'; use 1" \
  env TIGHTFIT_POISON_ARENA=yes "$tf" train "$dir/gpt_cpu.tfplan" --data models/data/text/train --steps 1 --threads 1

if ! "$tf" devices | grep -q '^vulkan:0'; then
  echo "skip: no Vulkan device (the Vulkan part did not run)"
else
  vk="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  same_run gpt_vulkan gpt vulkan vulkan:0 TIGHTFIT_POISON_ARENA=1 TIGHTFIT_VULKAN_WIDE_BINDINGS=1
  same_run cnn_vulkan cnn vulkan vulkan:0 TIGHTFIT_POISON_ARENA=1 TIGHTFIT_VULKAN_WIDE_BINDINGS=1
  expect_message 2 "TIGHTFIT_VULKAN_WIDE_BINDINGS takes 0 or 1" "TIGHTFIT_VULKAN_WIDE_BINDINGS='on'; use 0 or 1" \
    env TIGHTFIT_VULKAN_WIDE_BINDINGS=on $vk "$tf" train "$dir/gpt_vulkan.tfplan" --data models/data/text/train \
    --steps 1 --threads 1 --device vulkan:0
fi
finish
