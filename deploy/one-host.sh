#!/usr/bin/env bash
# foldserve on one host: TP ranks, one process per GPU (per CPU process with --device cpu).
# Rank 0 starts ranks 1..TP-1 as its children and serves HTTP; stop it (SIGTERM, Ctrl-C)
# and it tells the others to stop.
#
#   deploy/one-host.sh TP [extra `foldserve serve` args]
#   deploy/one-host.sh 1
#   deploy/one-host.sh 2 --device cpu
#   deploy/one-host.sh 3 --device cpu --model dummy:tiny
#
# Rank 0 serves on the env file's --port (8000) or, when that is taken (say by `make
# serve`), the next free one of the 10 above it: it says so at once, and its last startup
# line names the URL ("serving ... at http://127.0.0.1:8001/v1"). `--port-retries 0` makes
# a taken port an error instead.
#
# Reads deploy/foldserve.env (or $FOLDSERVE_ENV); extra args come after its FOLDSERVE_ARGS,
# so they win. FOLDSERVE_DRY_RUN=1 prints the command instead of running it.
set -euo pipefail

usage() { echo "usage: $0 TP [extra foldserve serve args]   (TP: 1, 2 or 3)" >&2; exit 2; }
[ $# -ge 1 ] || usage
tp=$1; shift
case "$tp" in 1|2|3) ;; *) echo "$0: TP $tp: this script starts 1, 2 or 3 ranks on one host" >&2; usage ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/common.sh"
load_env
# one host: rank 0 launches the others; torchrun's variables would make it wait for them
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT LOCAL_RANK

# shellcheck disable=SC2086  # FOLDSERVE_ARGS is a list of flags
run_foldserve serve --tp "$tp" --port-retries 10 ${FOLDSERVE_ARGS:-} "$@"
