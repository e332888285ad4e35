#!/usr/bin/env bash
# One rank of a group spread over hosts, a rank a host (e.g. GB10 boxes, one GPU each).
# Start it on every host; rank 0 listens on MASTER_HOST:PORT (an address of rank 0's own
# host) and serves HTTP, the others connect to it within --join-timeout (default 60 s).
#
#   deploy/rank.sh RANK WORLD MASTER_HOST:PORT [extra `foldserve serve` args]
#   host A (10.0.0.1):  FOLDSERVE_API_KEY="$KEY" deploy/rank.sh 0 2 10.0.0.1:29551 --host 0.0.0.0
#   host B:             deploy/rank.sh 1 2 10.0.0.1:29551
# (the key in the environment or the env file, not as --api-key: ps shows a command line)
#
# Reads deploy/foldserve.env (or $FOLDSERVE_ENV): every host needs the same TF_* values
# and the same model file. FOLDSERVE_DRY_RUN=1 prints the command instead of running it.
set -euo pipefail

usage() { echo "usage: $0 RANK WORLD MASTER_HOST:PORT [extra foldserve serve args]" >&2; exit 2; }
[ $# -ge 3 ] || usage
rank=$1 world=$2 master=$3; shift 3
[[ "$rank" =~ ^[0-9]+$ && "$world" =~ ^[0-9]+$ ]] || usage
if (( rank >= world )); then echo "$0: rank $rank is outside 0..$((world - 1))" >&2; exit 2; fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/common.sh"
load_env
# the arguments say who this rank is; leftovers from the env file would only disagree
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT

# shellcheck disable=SC2086  # FOLDSERVE_ARGS is a list of flags
run_foldserve serve --tp "$world" --rank "$rank" --master "$master" ${FOLDSERVE_ARGS:-} "$@"
