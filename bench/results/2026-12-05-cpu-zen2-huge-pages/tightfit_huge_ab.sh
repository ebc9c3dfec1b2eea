#!/bin/bash
# tightfit with and without its regions on huge pages (tightfit_huge_pages.patch applied; TF_THP=1 turns it
# on), interleaved: PLANS=DIR tightfit_huge_ab.sh THREADS ROUNDS, from the repository root. DIR holds
# gpt<T>.tfplan, asr<T>.tfplan, g2s<T>.tfplan and cnn<T>.tfplan (the bench rows compiled --threads T) and asrdata.
# Prints the median of each process's steps after the first two, in ms: gpt-32 asr-128-6-3-16 gpt2-small-l2-2 cnn-256.
B=${BUILD:-build-rel}; T=$1; P=${PLANS:-.}
D=models/data
run() { # plan data steps
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=$T $B/bench/tf_step_timer $1 $2 $3 $T | /usr/bin/python3 -c "
import sys,json,statistics; l=[json.loads(x) for x in sys.stdin if x.startswith('{')]; s=[x['seconds'] for x in l[:-1]][2:]; print('%.1f'%(1e3*statistics.median(s)), end=' ')"
}
for r in $(seq $2); do
 for m in "" 1; do
  echo -n "thp=${m:-0}: "
  TF_THP=$m run $P/gpt$T.tfplan $D/text/train 8
  TF_THP=$m run $P/asr$T.tfplan $P/asrdata 7
  TF_THP=$m run $P/g2s$T.tfplan $D/text/train 5
  TF_THP=$m run $P/cnn$T.tfplan $D/digits/train 40
  echo
 done
done
