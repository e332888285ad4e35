#!/bin/bash
# One device call (next session): build and run the tensor-core attention prototype
# bench/attn_tc_proto.cu (NOT YET RUN when written). Each case checks every output bit of
# `prefill` (tile shifts 0 and 7) against `reference` (the definition), a sample of rows against
# float64, and times `prefill` (ms, TFLOP/s). ptxas's register / spill lines come first.
# Cases: the llama3-8b prefill (T 2048, 32 q heads, 8 kv, hd 128), the small case (300 4 2 64),
# and two more GQA groupings (G = 1: one q head a block; G = 8: 4 of 8 heads a block).
# Writes $OUT/attn_tc_proto.txt. Run from the repository root.
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT=${OUT:-/tmp}
{
  echo "== $(date -u) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null)"
  $NVCC -O3 -arch=sm_90 -Xptxas -v -o /tmp/attn_tc bench/attn_tc_proto.cu > /tmp/attn_tc_build.log 2>&1
  rc=$?
  echo "-- build (rc $rc)"
  grep -E "Compiling entry|Used|spill|rror|arning" /tmp/attn_tc_build.log
  if [ $rc != 0 ]; then cat /tmp/attn_tc_build.log; exit 1; fi
  for s in "2048 32 8 128" "300 4 2 64" "1000 8 8 128" "777 16 2 128"; do
    echo "-- run $s"
    timeout 60 /tmp/attn_tc $s
    echo "   (exit $?)"
  done
} 2>&1 | tee $OUT/attn_tc_proto.txt
