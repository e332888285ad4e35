#!/bin/bash
# Issue 35 quiet: drafted vs plain through the server, then beside llama-server's n-gram drafting (peer (a)).
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LS=/work/peers-build/llama.cpp/build-cpu/bin/llama-server
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "drafts start commit $(cat $T/COMMIT)"
PYTHONPATH=$T timeout 600 $PY bench/drafts.py --rounds 4 --out $O/drafts > $O/drafts.txt 2>&1; lg "drafts done"
PYTHONPATH=$T timeout 900 $PY bench/drafts.py --rounds 1 --llama-server $LS --out $O/drafts_llama > $O/drafts_llama.txt 2>&1; lg "drafts llama-server done"
