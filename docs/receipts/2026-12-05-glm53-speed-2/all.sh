#!/bin/bash
# one locked run: the side-by-side bench, then the stage profiles (base, tree) if time is left
/tmp/glm53c-bench/bench.sh > /tmp/glm53c-bench/bench.txt 2>&1
now=$(date -u +%s); stop=$(date -u -d "12:12" +%s)
if [ $now -lt $stop ]; then
  /tmp/glm53c-bench/prof.sh /tmp/glm53c-bench/prof2 /tmp/glm53c-bench/tree /tmp/glm53c-bench/base
else
  echo "profiles skipped $(date -u)" > /tmp/glm53c-bench/prof2.skipped
fi
