#!/bin/sh
TAG=$1; shift; i=0
for t in "$@"; do
  i=$((i+1)); n=$(basename $t)
  l0=$(cut -d' ' -f1-3 /proc/loadavg)
  (cd $t && PYTHONPATH=$t /work/main/.venv/bin/python bench/verify_rows.py --sizes ${SIZES:-1,2,3,4,5,6,7,8,9} --reps ${REPS:-7} --out /tmp/dr39/ab/rows_${TAG}_${i}_$n.json >/dev/null)
  python3 -c "
import json,sys; d=json.load(open('/tmp/dr39/ab/rows_${TAG}_${i}_$n.json'))['cases']
print('%-10s' % '$n', ' '.join('%5.1f' % v['median_ms'] for v in d.values()), '| load $l0 $(date -u +%T)')"
done
