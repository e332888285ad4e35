#!/bin/bash
# The GPU tests (tests/gpu: kernels against their definitions, the GEMM and attention
# definition tests, graphs, paged, sampling, TP=2 exit) on one device call.
#   bash bench/device/tests.sh [pytest args...]      e.g. -x, -k gemm, tests/gpu/test_wgmma.py
# Writes $OUT/tests.txt (the summary lines) and $OUT/tests.log (the whole run).
cd "$(dirname "$0")/../.." && source bench/device/common.sh
ARGS=("$@"); [ ${#ARGS[@]} -eq 0 ] && ARGS=(tests/gpu)
timeout "${TIMEOUT:-300}" python3 -m pytest -q "${ARGS[@]}" > "$OUT/tests.log" 2>&1
rc=$?
tail -15 "$OUT/tests.log" | tee "$OUT/tests.txt"
exit $rc
