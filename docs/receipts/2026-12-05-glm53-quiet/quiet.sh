#!/bin/bash
# under the bench lock (the caller's): wait up to WAIT s for a quiet machine (under 0.3 cores
# busy over 5 s, this script's sampling aside), then one alternating round (bench.sh TAG 1);
# after WAIT s the round runs anyway and its load is recorded
TAG=$1; WAIT=${2:-240}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
t0=$(date +%s)
while :; do
  b0=$(busy); sleep 5; b1=$(busy)
  cores=$(awk -v a=$b0 -v b=$b1 -v h=$(getconf CLK_TCK) 'BEGIN{printf "%.2f", (b-a)/h/5}')
  if awk -v c=$cores 'BEGIN{exit !(c < 0.3)}'; then echo "$(date -u +%T) quiet: $cores cores busy over 5 s"; break; fi
  if [ $(( $(date +%s) - t0 )) -ge $WAIT ]; then echo "$(date -u +%T) not quiet after $WAIT s (last 5 s: $cores cores busy); running anyway"; break; fi
done
/tmp/glm53q-bench/bench.sh $TAG 1
