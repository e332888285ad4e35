#!/bin/bash
# locked run 3: issue 32's side by side, GLM-4.7-Flash-shaped Q8_0, 2 rounds (no depth run)
PY=/work/main/.venv/bin/python
NEW=/tmp/q8-cca4936; BASE=/tmp/q8-base
date -u; cat /proc/loadavg
cd $NEW && PYTHONPATH=$NEW timeout 900 $PY -m bench.mla_cpu --stages bench --rounds 2 --depth 0 --base $BASE --out /tmp/q8-out/run3_mla.json
date -u; cat /proc/loadavg
