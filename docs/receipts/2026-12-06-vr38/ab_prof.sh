#!/bin/sh
tag=$1; shift
for side in "$@"; do
  if [ $side = base ]; then tree=/tmp/vr38-base; else tree=/work/wt/vr38; fi
  cd $tree
  echo "== $side $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
  PYTHONPATH=$tree /work/main/.venv/bin/python bench/drafts_profile.py --reps 2 --out /tmp/vr38/prof_${tag}_${side}.json > /tmp/vr38/prof_${tag}_${side}.txt 2>&1
  grep -E "split|rows|tok/s|forward" /tmp/vr38/prof_${tag}_${side}.txt | head -30
done
echo "== end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
