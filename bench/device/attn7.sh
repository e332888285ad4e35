#!/bin/bash
# Seventh stop, one H200: attention tests, bench/attn_prefill.py (tile order A/B, torch sdpa),
# and ncu's view of one prefill launch (stall reasons, occupancy). Carry .whl. Writes $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -q tests/gpu/test_attention_definition.py tests/gpu/test_split_attention.py 2>&1 | tail -2 | tee $OUT/tests.txt
timeout 100 python3 bench/attn_prefill.py 2>&1 | tee $OUT/attn_prefill.txt
[ "${NCU:-1}" = 1 ] || exit 0
timeout 200 ncu --clock-control none -k attend --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis python3 bench/attn_prefill.py --once > $OUT/ncu.txt 2>&1
grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Issued Ipc|Issue Slots|Eligible|Warp Cycles|Compute \(SM\)|Memory Throughput|Pipe|Local|spill" $OUT/ncu.txt | head -60
