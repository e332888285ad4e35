#!/bin/bash
# Issue 18's sampling half on one GPU, one call: tests/gpu/test_sample.py (the device sampler
# against kernels/sample.py at 4 vocabularies, hypothesis, solo == among 63 through the
# scheduler), the sampler launch beside the arg-max (bench/sample_time.py), and greedy vs
# sampled b1 TPOT and 64-concurrent tok/s through the scheduler (bench/sampled_tpot.py).
#   bash bench/device/sampling.sh        ($OUT: tests.txt tests.log sample_time.txt
#                                          sampled_tpot.json sampled_tpot.log nvidia-smi.txt)
cd "$(dirname "$0")/../.." && source bench/device/common.sh
[ -f .commit ] && cp .commit "$OUT/commit.txt"
timeout "${T_TESTS:-120}" python3 -m pytest -q -p no:cacheprovider tests/gpu/test_sample.py \
  > "$OUT/tests.log" 2>&1
echo "pytest rc=$?" >> "$OUT/tests.log"
tail -15 "$OUT/tests.log" > "$OUT/tests.txt"
timeout "${T_TIME:-40}" python3 -m bench.sample_time > "$OUT/sample_time.txt" 2>&1
timeout "${T_TPOT:-150}" python3 bench/sampled_tpot.py --out "$OUT" > "$OUT/sampled_tpot.log" 2>&1
cat "$OUT/tests.txt" "$OUT/sample_time.txt"
tail -12 "$OUT/sampled_tpot.log"
