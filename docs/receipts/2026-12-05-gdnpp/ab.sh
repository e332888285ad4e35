#!/bin/bash
# /tmp/gdnpp/ab.py: ab.py of this folder; /tmp/gdnpp/{base,new}: git archive f54632e / 271df9a
for r in 1 2 3; do
for T in /tmp/gdnpp/base /tmp/gdnpp/new; do
  echo "round $r $(cat $T/COMMIT) load $(cat /proc/loadavg)"
  cd $T && PYTHONPATH=$T timeout 200 /work/main/.venv/bin/python /tmp/gdnpp/ab.py 2>&1 | grep RESULT
done; done
echo "end load $(cat /proc/loadavg)"
