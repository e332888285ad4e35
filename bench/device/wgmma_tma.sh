#!/bin/bash
# One device call: build the variants of bench/wgmma_tma_proto.cu (TMA + mbarrier pipeline,
# warp-specialised, wgmma with operands from 128B-swizzled shared memory; compile-time macros,
# see its header) and run each on the prefill's shapes (llama3-8b: qkv, o, gate|up, down at
# 2,048 rows; 512 and 128 rows), plus two shapes for the edges: M = 1000 (a partial row tile,
# and not a multiple of 16) and K = 768 (3 chunks a range: ranges end inside a 64-k stage).
# Every run compares every output bit with the definition (`reference`) and prints the
# median time and TFLOP/s (SS variants also the X-permutation kernel's time); ptxas's
# register / spill lines come first. Writes $OUT/wgmma_tma.txt. Run from the repository root.
# COMPILE_ONLY=1: build and report only. VARIANTS="s256 r128": only those.
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT=${OUT:-/tmp}
ARCH="-gencode arch=compute_90a,code=sm_90a"
ALL=(
  "s256     -DBN=256 -DAREG=0 -DTOTR=64 -DST=3"
  "s256r96  -DBN=256 -DAREG=0 -DTOTR=96 -DST=4 -DREG_PRODUCER=24 -DREG_CONSUMER=240"
  "s256z    -DBN=256 -DAREG=0 -DTOTR=96 -DST=4 -DREG_PRODUCER=24 -DREG_CONSUMER=240 -DZFIRST=1"
  "s256g    -DBN=256 -DAREG=0 -DTOTR=64 -DTOTG=1 -DGB=16 -DST=4"
  "r256     -DBN=256 -DAREG=1 -DTOTR=64 -DST=3"
  "s128     -DBN=128 -DAREG=0 -DTOTR=64 -DST=6"
  "s128s7   -DBN=128 -DAREG=0 -DTOTR=64 -DST=7 -DGM=8"
  "r128     -DBN=128 -DAREG=1 -DTOTR=64 -DST=6"
)
V=()
for v in "${ALL[@]}"; do
  set -- $v
  if [ -z "$VARIANTS" ] || [[ " $VARIANTS " == *" $1 "* ]]; then V+=("$v"); fi
done
SHAPES="2048 6144 4096  2048 4096 4096  2048 28672 4096  2048 4096 14336  512 4096 4096  128 4096 4096  1000 4096 4096  2048 4096 768"
rc_all=0
{
  echo "== $(date -u) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null) $($NVCC --version | tail -1)"
  for v in "${V[@]}"; do                       # builds in parallel, logs kept per variant
    set -- $v; n=$1; shift
    ( $NVCC $ARCH -O3 -Xptxas -v "$@" -o /tmp/wtma_$n bench/wgmma_tma_proto.cu > /tmp/wtma_$n.log 2>&1;
      echo $? > /tmp/wtma_$n.rc ) &
  done
  wait
  for v in "${V[@]}"; do
    set -- $v; n=$1; shift
    echo "-- build $n: $* (rc $(cat /tmp/wtma_$n.rc))"
    awk '/Compiling entry function .*gemm_tma/{f=1} f&&/Used/{print; f=0} f; /C75|rror|arning/' /tmp/wtma_$n.log
  done
  if [ "${COMPILE_ONLY:-0}" = 1 ]; then exit 0; fi
  for v in "${V[@]}"; do
    set -- $v; n=$1; shift
    echo "-- run $n: $*"
    [ -x /tmp/wtma_$n ] && timeout 180 /tmp/wtma_$n $SHAPES
    echo "   (exit $?)"
  done
} 2>&1 | tee $OUT/wgmma_tma.txt
