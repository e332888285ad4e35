#!/bin/bash
# Shared by the .cu experiments' device scripts: build each variant of one source in parallel
# (ptxas's register / spill lines reported), then run each on the shapes. Source this after
# setting SRC (the .cu), TAG (binary prefix), ENTRY (kernel name pattern for the report),
# V (array of "name -Dmacros ..."), SHAPES, OUT_FILE and optionally RUN_TIMEOUT (s).
# COMPILE_ONLY=1: build and report only. VARIANTS="a b": only those variants.
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH="-gencode arch=compute_90a,code=sm_90a"
SEL=()
for v in "${V[@]}"; do
  set -- $v
  if [ -z "$VARIANTS" ] || [[ " $VARIANTS " == *" $1 "* ]]; then SEL+=("$v"); fi
done
{
  echo "== $(date -u) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null) $($NVCC --version | tail -1)"
  for v in "${SEL[@]}"; do                     # builds in parallel, logs kept per variant
    set -- $v; n=$1; shift
    ( $NVCC $ARCH -O3 -Xptxas -v "$@" -o /tmp/${TAG}_$n $SRC > /tmp/${TAG}_$n.log 2>&1;
      echo $? > /tmp/${TAG}_$n.rc ) &
  done
  wait
  for v in "${SEL[@]}"; do
    set -- $v; n=$1; shift
    echo "-- build $n: $* (rc $(cat /tmp/${TAG}_$n.rc))"
    awk "/Compiling entry function .*$ENTRY/{f=1} f&&/Used/{print; f=0} f; /C75|rror|arning/" /tmp/${TAG}_$n.log
  done
  if [ "${COMPILE_ONLY:-0}" = 1 ]; then exit 0; fi
  for v in "${SEL[@]}"; do
    set -- $v; n=$1; shift
    echo "-- run $n: $*"
    [ -x /tmp/${TAG}_$n ] && timeout ${RUN_TIMEOUT:-60} /tmp/${TAG}_$n $SHAPES
    echo "   (exit $?)"
  done
} 2>&1 | tee $OUT_FILE
