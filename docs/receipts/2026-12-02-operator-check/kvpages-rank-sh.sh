#!/bin/bash
# deploy/rank.sh pair, TF_KV_PAGES on (rank 0) vs off (rank 1), times from rank 1's start
cd /tmp/o20-clone2; L=/tmp/o20-logs; n=$1
export PYTHON=/tmp/o20-clone/.venv/bin/python TF_CACHE_DIR=/tmp/o20-fpcache-rsh$n; rm -rf $TF_CACHE_DIR
TF_KV_PAGES=on timeout 60 nice -n 10 deploy/rank.sh 0 2 127.0.0.1:8232 --port 8233 > $L/rank-sh-$n-rank0.txt 2>&1 & p0=$!
for i in $(seq 1 300); do grep -q "waiting for rank 1" $L/rank-sh-$n-rank0.txt && break; sleep 0.1; done
t0=$(date +%s.%N); TF_KV_PAGES=off timeout 60 nice -n 10 deploy/rank.sh 1 2 127.0.0.1:8232 > $L/rank-sh-$n-rank1.txt 2>&1 & p1=$!
wait $p1; rc1=$?; t1=$(date +%s.%N); wait $p0; rc0=$?; t2=$(date +%s.%N)
echo "run $n: rank 1 exit $rc1 at $(echo "$t1-$t0"|bc) s, rank 0 exit $rc0 at $(echo "$t2-$t0"|bc) s; message on both: $(grep -l 'ranks disagree on TF_KV_PAGES: rank 0 resolved on, rank 1 resolved off' $L/rank-sh-$n-rank*.txt | wc -l); 'load' lines: $(grep -c load $L/rank-sh-$n-rank*.txt | paste -sd' ')"
