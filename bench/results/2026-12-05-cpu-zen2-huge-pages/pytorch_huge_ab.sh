#!/bin/bash
# PyTorch's steps with glibc's warm tunables, without and with glibc.malloc.hugetlb=1, interleaved:
#   pytorch_huge_ab.sh ROUNDS ASR_DATA      (run from the repository root; ASR_DATA as run-vs-pytorch makes it)
# Prints the median of each process's steps after the first two, in ms.
WARM=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
rows=("gpt|models/data/text/train|32|64|8" "asr-128-6-3|$2|16|-|7" "gpt2-small layers=2|models/data/text/train|2|128|6" "cnn|models/data/digits/train|256|-|30")
for round in $(seq "$1"); do
  for python in /usr/bin/python3 .venv-torch2/bin/python; do
    for huge in 0 1; do
      printf '%-28s hugetlb=%s:' "$python" "$huge"
      for row in "${rows[@]}"; do
        IFS='|' read -r preset data n t steps <<<"$row"
        GLIBC_TUNABLES=$WARM:glibc.malloc.hugetlb=$huge OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
          "$python" bench/pytorch/torch_side.py "$preset" "$data" "$n" "$t" "$steps" 1 |
          /usr/bin/python3 -c "
import json, statistics, sys
steps = [json.loads(line)['seconds'] for line in sys.stdin if line.startswith('{\"step')][2:]
print(' %7.1f' % (1e3 * statistics.median(steps)), end='')"
      done
      echo
    done
  done
done
