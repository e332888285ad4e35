#!/bin/bash
for r in 1 2 3; do
for T in /tmp/gdnpp/base /tmp/gdnpp/new; do
  echo "round $r $(cat $T/COMMIT) load $(cat /proc/loadavg)"
  cd $T && PYTHONPATH=$T timeout 200 /work/main/.venv/bin/python /tmp/gdnpp/ab.py 2>&1 | grep RESULT
done; done
echo "end load $(cat /proc/loadavg)"
