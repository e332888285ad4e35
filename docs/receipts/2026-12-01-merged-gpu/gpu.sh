#!/bin/bash
# The lead's final GPU call: tests/gpu, gpu_bench, mask_cost (64 constrained streams) on the merged tree.
cd "$(dirname "$0")/.." && source bench/device/common.sh
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
cat .lead/commit.txt > $OUT/commit.txt
el tests
timeout 330 python3 -m pytest -q -p no:cacheprovider --maxfail=25 -rf tests/gpu > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log
tail -30 $OUT/tests.log
el mask_cost
timeout 90 python3 bench/mask_cost.py --device cuda --model dummy:smollm2-135m --tokenizer .lead/tok --streams 64 --tokens 64 --out $OUT/mask > $OUT/mask_cost.txt 2>&1; echo "rc $?" >> $OUT/mask_cost.txt
tail -25 $OUT/mask_cost.txt
el gpu_bench
left=$(( 515 - ($(date +%s) - T0) ))
[ $left -gt 30 ] && timeout $left python3 bench/gpu_bench.py --out $OUT/gb > $OUT/gpu_bench.txt 2>&1; echo "rc $?" >> $OUT/gpu_bench.txt
tail -30 $OUT/gpu_bench.txt
el done
