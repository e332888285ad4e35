#!/bin/bash
# plan line of `foldserve plan ARGS` vs `foldserve serve ARGS` (rank 0's block), clone's .venv
cd /tmp/o20-clone; L=/tmp/o20-logs; tag=$1; port=$2; shift 2
.venv/bin/foldserve plan "$@" > $L/plan-$tag.out 2> $L/plan-$tag.err; prc=$?
timeout 120 nice -n 10 .venv/bin/foldserve serve "$@" --port $port > /dev/null 2> $L/serve-$tag.err & sp=$!
for i in $(seq 1 1000); do grep -q "^serving " $L/serve-$tag.err && break; kill -0 $sp 2>/dev/null || break; sleep 0.1; done
r0=$(pgrep -P $sp); kill -TERM $r0; wait $sp; src=$?
a=$(head -1 $L/plan-$tag.out); b=$(grep "^  plan          " $L/serve-$tag.err | sed 's/^  plan          //')
if [ -n "$a" ] && [ "$a" = "$b" ]; then v=SAME; else v=DIFFER; fi
echo "$tag: plan rc $prc, serve rc $src: $v"; echo "  plan : $a"; echo "  serve: $b"
