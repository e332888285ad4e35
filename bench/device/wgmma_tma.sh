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
V=(
  "s256     -DBN=256 -DAREG=0 -DTOTR=64 -DST=3"
  "s256r96  -DBN=256 -DAREG=0 -DTOTR=96 -DST=4 -DREG_PRODUCER=24 -DREG_CONSUMER=240"
  "s256z    -DBN=256 -DAREG=0 -DTOTR=96 -DST=4 -DREG_PRODUCER=24 -DREG_CONSUMER=240 -DZFIRST=1"
  "s256g    -DBN=256 -DAREG=0 -DTOTR=64 -DTOTG=1 -DGB=16 -DST=4"
  "r256     -DBN=256 -DAREG=1 -DTOTR=64 -DST=3"
  "s128     -DBN=128 -DAREG=0 -DTOTR=64 -DST=6"
  "s128s7   -DBN=128 -DAREG=0 -DTOTR=64 -DST=7 -DGM=8"
  "r128     -DBN=128 -DAREG=1 -DTOTR=64 -DST=6"
)
SHAPES="2048 6144 4096  2048 4096 4096  2048 28672 4096  2048 4096 14336  512 4096 4096  128 4096 4096  1000 4096 4096  2048 4096 768"
SRC=bench/wgmma_tma_proto.cu TAG=wtma ENTRY=gemm_tma OUT_FILE=${OUT:-/tmp}/wgmma_tma.txt RUN_TIMEOUT=180
source bench/device/cu_variants.sh
