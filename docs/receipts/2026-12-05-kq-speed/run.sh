#!/bin/bash
# one locked run: commit, machine, load; mb2 (one-thread kernel CPU time) base / ours; bw;
# bench.moe_cpu qwen (2 rounds, --base main) and glm (1 round, --base main)
cd /tmp/kq-bench/tree
echo "commit afc601c (tree /tmp/kq-bench/tree = git archive of it); base /tmp/kq-bench/base = main 1d7017b"
date -u; cat /proc/loadavg; nproc
for t in /tmp/kq-bench/base /tmp/kq-bench/tree; do echo "== mb2 $t load $(cut -d' ' -f1-3 /proc/loadavg)"; (cd $t && PYTHONPATH=$t timeout 300 /work/main/.venv/bin/python /tmp/kq-bench/mb2.py 2>&1 | grep -v Warn); done
echo "== bw load $(cut -d' ' -f1-3 /proc/loadavg)"; PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/kq-bench/bw.py 2>&1 | grep -v Warn
for s in qwen3-30b-a3b:2 glm-4.5-air:1; do sh=${s%:*}; r=${s#*:}
  echo "== bench $sh start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  PYTHONPATH=$PWD timeout 420 /work/main/.venv/bin/python -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes $sh --types Q4_K_M --rounds $r --base /tmp/kq-bench/base --out /tmp/kq-bench/run_$sh.json
  echo "== bench $sh end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
done
