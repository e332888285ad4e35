#!/bin/bash
# The lead's GPU call (11th stop): tests/gpu (the GEMM definition tests among them), then gpu_bench, on main.
cd "$(dirname "$0")/.." && source bench/device/common.sh
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
cat .lead/commit.txt > $OUT/commit.txt
el tests
timeout 330 python3 -m pytest -q -p no:cacheprovider --maxfail=25 -rf tests/gpu > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log
tail -15 $OUT/tests.log
el gpu_bench
left=$(( 540 - ($(date +%s) - T0) ))
[ $left -gt 30 ] && timeout $left python3 bench/gpu_bench.py --out $OUT/gb > $OUT/gpu_bench.txt 2>&1; echo "rc $?" >> $OUT/gpu_bench.txt
tail -40 $OUT/gpu_bench.txt
el done
