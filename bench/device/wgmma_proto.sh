#!/bin/bash
# One device call (next session): build and run the wgmma GEMM prototype on the prefill's
# shapes (llama3-8b: qkv, o, gate|up, down at 2,048 rows); each run checks every output bit
# against the definition and prints its TFLOP/s. Writes $OUT/wgmma_proto.txt.
nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o /tmp/wgp bench/wgmma_gemm_proto.cu || exit 1
for s in "2048 6144 4096" "2048 4096 4096" "2048 28672 4096" "2048 4096 14336" "128 4096 4096"; do
  timeout 60 /tmp/wgp $s
done 2>&1 | tee $OUT/wgmma_proto.txt
