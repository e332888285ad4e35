#!/bin/bash
# two ranks of the default model, TF_KV_PAGES on vs off, by hand as docs/operations.md shows
cd /tmp/o20-clone; L=/tmp/o20-logs; tag=$1; wrap=${2:-}
export TF_CACHE_DIR=/tmp/o20-fpcache-$tag; rm -rf $TF_CACHE_DIR
TF_KV_PAGES=on timeout 60 nice -n 10 $wrap .venv/bin/foldserve serve --tp 2 --rank 0 --master 127.0.0.1:8210 --port 8211 > $L/kvpages-$tag-rank0.txt 2>&1 & p0=$!
for i in $(seq 1 300); do grep -q "waiting for rank 1" $L/kvpages-$tag-rank0.txt && break; sleep 0.1; done
t0=$(date +%s.%N); TF_KV_PAGES=off timeout 60 nice -n 10 $wrap .venv/bin/foldserve serve --tp 2 --rank 1 --master 127.0.0.1:8210 --port 8212 > $L/kvpages-$tag-rank1.txt 2>&1 & p1=$!
wait $p1; rc1=$?; t1=$(date +%s.%N); wait $p0; rc0=$?; t2=$(date +%s.%N)
echo "$tag: rank 1 exit $rc1 $(echo "$t1-$t0"|bc) s, rank 0 exit $rc0 $(echo "$t2-$t0"|bc) s after rank 1's start; TF_CACHE_DIR after: $(ls $TF_CACHE_DIR 2>/dev/null | wc -l) files"
