#!/bin/bash
# The grammar masks' cost after prepare_many (llguidance's threads): 64 constrained vs 64 plain streams.
cd "$(dirname "$0")/.." && source bench/device/common.sh
cat .lead/commit.txt > $OUT/commit.txt; nproc > $OUT/nproc.txt
timeout 100 python3 bench/mask_cost.py --device cuda --model dummy:smollm2-135m --tokenizer .lead/tok --streams 64 --tokens 64 --out $OUT/mask > $OUT/mask_cost.txt 2>&1; echo "rc $?" >> $OUT/mask_cost.txt
tail -12 $OUT/mask_cost.txt
