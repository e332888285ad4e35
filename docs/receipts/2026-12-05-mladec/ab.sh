#!/bin/bash
# ab.sh ROUNDS CTX : alternating fresh processes, base (1f8397c) and this worktree
R=$1; CTX=${2:-1}
PY=/work/main/.venv/bin/python
for i in $(seq $R); do
  (cd /tmp/mladec/base && TAG=base PYTHONPATH=/tmp/mladec/base timeout 200 $PY /tmp/mladec/step.py $CTX 64 2>&1 | grep ctx)
  (cd /work/wt/mladec && TAG=mine PYTHONPATH=/work/wt/mladec timeout 200 $PY /tmp/mladec/step.py $CTX 64 2>&1 | grep ctx)
done
