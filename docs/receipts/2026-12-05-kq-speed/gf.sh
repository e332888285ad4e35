#!/bin/bash
date -u; cat /proc/loadavg
for t in t64 tgf t64 tgf; do echo "== $t load $(cut -d' ' -f1-3 /proc/loadavg)"; (cd /tmp/kq-bench/$t && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/kq-bench/mb3.py 2>&1 | grep -v Warn); done
date -u; cat /proc/loadavg
