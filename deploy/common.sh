# Sourced by one-host.sh and rank.sh: the env file, and how to run foldserve.

# deploy/foldserve.env, or $FOLDSERVE_ENV; a missing file is fine (defaults apply)
load_env() {
    local file=${FOLDSERVE_ENV:-$here/foldserve.env}
    if [ -f "$file" ]; then
        set -a
        # shellcheck disable=SC1090
        . "$file"
        set +a
    fi
}

# the checkout this script lives in, else the installed console script
run_foldserve() {
    local cmd
    if [ -f "$here/../server/cli.py" ]; then
        cd "$here/.."
        cmd=("${PYTHON:-python3}" -m server.cli "$@")
    else
        cmd=(foldserve "$@")
    fi
    if [ "${FOLDSERVE_DRY_RUN:-0}" = 1 ]; then
        printf '%q ' "${cmd[@]}"; echo
        return 0
    fi
    exec "${cmd[@]}"
}
