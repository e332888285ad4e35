#!/bin/bash
# One device call: build the variants of bench/wgmma_gemm_v2.cu (compile-time macros, see its
# header) and run each on the prefill's shapes (llama3-8b: qkv, o, gate|up, down at 2,048
# rows; and 128 rows). Every run checks every output bit against the definition (`reference`)
# and prints its time and TFLOP/s; ptxas's register / spill lines come first.
# Writes $OUT/wgmma_v2.txt. Run from the repository root. COMPILE_ONLY=1: build and report only.
V=(
  "proto   -DBN=128 -DST=4 -DCPS=1 -DDIST=1 -DLAYOUT=1 -DPAD=0 -DGM=1"
  "b128a   -DBN=128 -DST=12 -DCPS=1 -DDIST=2 -DLAYOUT=1 -DPAD=1 -DGM=16"
  "b128b   -DBN=128 -DST=6 -DCPS=2 -DDIST=2 -DLAYOUT=1 -DPAD=1 -DGM=16"
  "b128p   -DBN=128 -DST=6 -DCPS=2 -DDIST=2 -DLAYOUT=0 -DPAD=1 -DGM=16"
  "b128p0  -DBN=128 -DST=6 -DCPS=2 -DDIST=2 -DLAYOUT=0 -DPAD=0 -DGM=16"
  "b128g1  -DBN=128 -DST=6 -DCPS=2 -DDIST=2 -DLAYOUT=0 -DPAD=1 -DGM=1"
  "b256a   -DBN=256 -DTOTR=64 -DST=6 -DCPS=1 -DDIST=2 -DLAYOUT=1 -DPAD=1 -DGM=16"
  "b256p   -DBN=256 -DTOTR=64 -DST=6 -DCPS=1 -DDIST=2 -DLAYOUT=0 -DPAD=1 -DGM=16"
  "b256p48 -DBN=256 -DTOTR=48 -DST=5 -DCPS=1 -DDIST=2 -DLAYOUT=0 -DPAD=1 -DGM=16"
  "b256t0  -DBN=256 -DTOTR=0 -DST=3 -DCPS=1 -DDIST=2 -DLAYOUT=0 -DPAD=1 -DGM=16"
)
SHAPES="2048 6144 4096  2048 4096 4096  2048 28672 4096  2048 4096 14336  128 4096 4096"
SRC=bench/wgmma_gemm_v2.cu TAG=wg2 ENTRY=gemm_v2 OUT_FILE=${OUT:-/tmp}/wgmma_v2.txt
source bench/device/cu_variants.sh
