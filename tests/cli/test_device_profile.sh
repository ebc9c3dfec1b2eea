#!/bin/sh
# Device profiles (issue 42): `devices --calibrate D -o F` measures a device into a profile and
# `compile`/`check --device-profile F` take it on any machine. Here: a calibration of lavapipe
# (vulkan:0) read back and used (its target, its memory as the budget); a hand-written profile of
# a CUDA card whose measured parts replace the defaults part by part in the plan (compared with
# the same plan under --target cuda); --budget over the profile's memory; every malformed profile
# refused with its file and line; the conflicting options.
# usage: test_device_profile.sh TIGHTFIT   (run from the repository root)
tf=$1
. "$(dirname "$0")/harness.sh"

"$tf" zoo gpt -o "$dir/gpt.tfg" > /dev/null || { echo "FAIL: zoo gpt"; exit 1; }

# ---- a calibration on lavapipe ----
# the sanitizer build's leak check is off for the lavapipe runs (the driver's own caches leak from its
# unloaded module, as in test_compat.sh); its other checks stay
vk="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if $vk "$tf" devices 2>/dev/null | grep -q '^vulkan:0'; then
  expect_phrase 0 "calibrate vulkan:0" "profile of vulkan" $vk "$tf" devices --calibrate vulkan:0 -o "$dir/lvp.profile"
  check "... 7 calibration sessions ran, the autocast gpt among them (progress on stderr)" "[ \"\$(grep -c '^calibrate: session [1-7]/7' '$dir/err')\" -eq 7 ] && grep -q 'autocast bf16' '$dir/err'"
  check "... the profile names the backend, device and memory" \
    "grep -q '^backend vulkan\$' '$dir/lvp.profile' && grep -q '^device vulkan:0\$' '$dir/lvp.profile' && grep -q '^memory [1-9][0-9]*\$' '$dir/lvp.profile'"
  memory=$(sed -n 's/^memory //p' "$dir/lvp.profile")
  expect 0 "check with the lavapipe profile" "$tf" check "$dir/gpt.tfg" --device-profile "$dir/lvp.profile" --json
  check "... target vulkan, the card's memory as the budget ($memory)" \
    "grep -q '\"target\": \"vulkan\"' '$dir/out' && grep -q '\"budget_bytes\": $memory' '$dir/out'"
  expect_phrase 0 "calibrate without -o prints the profile" "tightfit-device-profile 1" $vk "$tf" devices --calibrate vulkan:0
else
  echo "note: no vulkan:0 here: the calibration itself is not run"
fi

# ---- a CUDA card's profile, used where there is no CUDA device ----
cat > "$dir/card.profile" << 'P'
# a comment, then the facts
tightfit-device-profile 1
backend cuda
device cuda:0
name NVIDIA Test Card
measured-at 2026-12-02T21:00:00Z
memory 17179869184
free 16000000000
granularity 4194304
part context 300000000 measured on NVIDIA Test Card: by hand
part libraries 50000000 measured on NVIDIA Test Card: by hand
part module_code 20000000 measured on NVIDIA Test Card: by hand
graphs 1000000 5000 measured on NVIDIA Test Card: by hand
P
json_of() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
expect 0 "check with the card's profile" "$tf" check "$dir/gpt.tfg" --set N=8,T=64 --no-smallest --device-profile "$dir/card.profile" --json
cp "$dir/out" "$dir/profile.json"
expect 0 "the same plan for --target cuda (the default model)" "$tf" check "$dir/gpt.tfg" --set N=8,T=64 --no-smallest --target cuda --budget 16GiB --json
cp "$dir/out" "$dir/default.json"
parts=$(json_of "$dir/profile.json" "' '.join('%s=%d' % (p['name'], p['bytes']) for p in d['overhead'])")
echo "profile parts: $parts"
check "the measured parts replace the defaults by name" \
  "echo '$parts' | grep -q 'context=300000000 libraries=50000000 module_code=20000000 rounding=[0-9]* graphs=[0-9]*'"
regions=$(json_of "$dir/profile.json" "sum(d['regions'].values())")
rounding=$(/usr/bin/python3 -c "import json; d=json.load(open('$dir/profile.json')); print(sum(-v % 4194304 for v in d['regions'].values() if v))")
check "rounding to the profile's 4 MiB granularity ($rounding bytes)" "echo '$parts' | grep -q 'rounding=$rounding '"
steps=$(json_of "$dir/profile.json" "[p['bytes'] for p in d['overhead'] if p['name'] == 'graphs'][0]")
check "graphs from the profile's base and per-step figures (1000000 + 5000 x steps: $steps)" \
  "[ \$(( ($steps - 1000000) % 5000 )) -eq 0 ] && [ $steps -gt 1000000 ]"
check "the budget is the card's memory (16 GiB)" "[ \"\$(json_of '$dir/profile.json' \"d['budget_bytes']\")\" = 17179869184 ]"
default_regions=$(json_of "$dir/default.json" "sum(d['regions'].values())")
echo "regions: profile $regions, default $default_regions"
check "the regions equal the default model's plan (--no-smallest: the smallest-plan choice counts the rounding)" \
  "[ '$default_regions' = '$regions' ]"
expect 0 "--budget wins over the profile's memory" "$tf" check "$dir/gpt.tfg" --device-profile "$dir/card.profile" --budget 1GiB --json
check "... budget 1 GiB" "grep -q '\"budget_bytes\": 1073741824' '$dir/out'"
expect 0 "compile --device-profile writes a plan" "$tf" compile "$dir/gpt.tfg" --device-profile "$dir/card.profile" -o "$dir/card.tfplan"
expect_phrase 0 "... whose report shows the measured context" "measured on NVIDIA Test Card" "$tf" report "$dir/card.tfplan"

# ---- bad profiles: the file and line named ----
bad() { # bad NAME MESSAGE LINES...: a profile of LINES (printf format) refused with MESSAGE
  name=$1 message=$2
  shift 2
  printf "$@" > "$dir/$name.profile"
  expect_phrase 2 "refused: $name" "$message" "$tf" check "$dir/gpt.tfg" --device-profile "$dir/$name.profile"
}
head='tightfit-device-profile 1\nbackend cuda\nname X\n'
bad not_a_profile "not_a_profile.profile:1: not a tightfit device profile" 'hello\n'
bad empty "empty: not a tightfit device profile" ''
bad unknown_fact "unknown_fact.profile:4: unknown fact" "${head}colour blue\nmemory 1000\n"
bad repeated "repeated.profile:5: this fact was given before" "${head}memory 1000\nmemory 2000\n"
bad bad_memory "bad_memory.profile:4: a positive byte count" "${head}memory 16GiB\n"
bad zero_memory "zero_memory.profile:4: a positive byte count" "${head}memory 0\n"
bad no_memory "the profile lacks 'memory'" "${head}"
bad no_backend "the profile lacks 'backend'" 'tightfit-device-profile 1\nname X\nmemory 1000\n'
bad cpu_backend "cpu_backend.profile:2: the backend is cuda or vulkan" 'tightfit-device-profile 1\nbackend cpu\n'
bad part_no_source "part_no_source.profile:4: a part is 'part NAME BYTES SOURCE'" "${head}part context 100\nmemory 1000\n"
bad part_negative "part_negative.profile:4: a part is" "${head}part context -5 x\nmemory 1000\n"
bad part_twice "part_twice.profile:5: this part was given before" "${head}part context 5 x\npart context 6 y\nmemory 1000\n"
bad part_rounding "part_rounding.profile:4: 'rounding' and 'graphs' follow" "${head}part rounding 5 x\nmemory 1000\n"
bad graphs_short "graphs_short.profile:4: 'graphs BASE PER_STEP SOURCE'" "${head}graphs 100\nmemory 1000\n"
expect_phrase 2 "a missing profile is named" "missing.profile: cannot open the device profile" \
  "$tf" check "$dir/gpt.tfg" --device-profile "$dir/missing.profile"
expect_phrase 2 "--gpu and --device-profile" "give one of --gpu, --device and --device-profile" \
  "$tf" check "$dir/gpt.tfg" --gpu t4 --device-profile "$dir/card.profile"
expect_phrase 2 "--target vulkan with a cuda profile" "is of a cuda device" \
  "$tf" check "$dir/gpt.tfg" --target vulkan --device-profile "$dir/card.profile"
expect_phrase 2 "--calibrate cpu:0 refused" "'cpu:0' is not cuda:N or vulkan:N" "$tf" devices --calibrate cpu:0
expect_phrase 2 "--calibrate without a device" "--calibrate needs a device" "$tf" devices --calibrate
expect_phrase 2 "--calibrate with a stray option" "--calibrate D takes only -o FILE" $vk "$tf" devices --calibrate vulkan:0 --json
finish
