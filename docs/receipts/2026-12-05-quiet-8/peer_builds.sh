#!/bin/bash
# llama-bench of the AVX2 build (every receipt's peer) against an AVX-512 (VNNI, VBMI, BF16; no AMX) build, alternated
for F in "$@"; do
for r in 1 2; do
 for b in build-cpu build-avx512; do
  echo "== $(basename $F) round $r $b load $(cat /proc/loadavg)"
  /work/peers-build/llama.cpp/$b/bin/llama-bench -m $F -t 2 -p 512 -n 32 -r 1 2>&1 | grep -E "pp512|tg32" | awk -F'|' '{print $7, $8}'
 done
done
done
