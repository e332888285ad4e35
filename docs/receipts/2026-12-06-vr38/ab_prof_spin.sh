#!/bin/sh
# ab_prof.sh with a third busy process (a shell loop) beside each run
tag=$1; shift
for side in "$@"; do
  if [ $side = base ]; then tree=/tmp/vr38-base; else tree=/work/wt/vr38; fi
  cd $tree
  sh -c 'while :; do :; done' &
  spin=$!
  echo "== $side $(date -u +%H:%M:%S) load $(cat /proc/loadavg) (spinner $spin)"
  PYTHONPATH=$tree /work/main/.venv/bin/python bench/drafts_profile.py --reps 2 --out /tmp/vr38/prof_${tag}_${side}.json > /tmp/vr38/prof_${tag}_${side}.txt 2>&1
  kill $spin
done
echo "== end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
