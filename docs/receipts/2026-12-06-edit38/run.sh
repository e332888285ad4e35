#!/bin/sh
# one timed run under the bench lock: ours (bench-N) or llama-server's (llama-N), with the
# load average and UTC before and after, beside the output
# usage: run.sh ours|llama N
set -e
cd "$(dirname "$0")/../../.."
R=docs/receipts/2026-12-06-edit38
if [ "$1" = ours ]; then
  name=bench-$2; args="--rounds 2"
else
  name=llama-$2; args="--llama-server /work/peers-build/llama.cpp/build-cpu/bin/llama-server --rounds 1"
fi
flock /work/notes/bench.lock sh -c "
  echo \"start \$(date -u +%H:%M:%S) \$(cat /proc/loadavg)\" > $R/$name.load
  PYTHONPATH=\$PWD timeout 300 /work/main/.venv/bin/python bench/drafts.py $args --out $R/$name > $R/$name.stdout 2>&1
  echo \"end \$(date -u +%H:%M:%S) \$(cat /proc/loadavg)\" >> $R/$name.load"
