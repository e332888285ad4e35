# Sourced by one-host.sh and rank.sh: the env file, and which foldserve to run.

# deploy/foldserve.env, or $FOLDSERVE_ENV; a missing file is fine (defaults apply). A variable
# already set in the caller's environment wins over the file's line for it (as extra args win
# over FOLDSERVE_ARGS), and is said on stderr: `TF_KV_PAGES=on deploy/rank.sh ...` runs with on.
load_env() {
    local file=${FOLDSERVE_ENV:-$here/foldserve.env}
    [ -f "$file" ] || return 0
    local key
    local -A given=()
    while IFS= read -r key; do
        if [ -n "${!key+x}" ]; then given[$key]=${!key}; fi
    done < <(sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$file")
    set -a
    # shellcheck disable=SC1090
    . "$file"
    set +a
    for key in "${!given[@]}"; do
        if [ "${!key}" != "${given[$key]}" ]; then
            if [ "$key" = FOLDSERVE_API_KEY ]; then     # a secret: named, never shown
                echo "deploy: $key from the environment, over $file's" >&2
            else
                echo "deploy: $key=${given[$key]} from the environment, over $file's $key=${!key}" >&2
            fi
            export "$key=${given[$key]}"
        fi
    done
}

# Which foldserve, first found (and said on stderr, so the log shows it):
#   $PYTHON, if set: that interpreter runs this checkout (python -m server.cli)
#   the checkout's own .venv (what `make install` / `make serve` build) beside deploy/
#   `foldserve` on PATH (what `make install-system` links into /usr/local/bin)
find_foldserve() {
    local root
    root=$(cd "$here/.." && pwd)
    if [ -n "${PYTHON:-}" ] && [ -f "$root/server/cli.py" ]; then
        FOLDSERVE_CMD=("$PYTHON" -m server.cli) FOLDSERVE_CWD=$root
        FOLDSERVE_FROM="\$PYTHON ($PYTHON) on the checkout $root"
    elif [ -x "$root/.venv/bin/python" ] && [ -f "$root/server/cli.py" ]; then
        FOLDSERVE_CMD=("$root/.venv/bin/python" -m server.cli) FOLDSERVE_CWD=$root
        FOLDSERVE_FROM="the checkout's .venv ($root/.venv)"
    elif command -v foldserve >/dev/null 2>&1; then
        FOLDSERVE_CMD=("$(command -v foldserve)") FOLDSERVE_CWD=$PWD
        FOLDSERVE_FROM="foldserve on PATH (${FOLDSERVE_CMD[0]})"
    else
        echo "$0: no foldserve found: no $root/.venv (run \`make install\` in $root)," \
             "no foldserve on PATH (\`sudo make install-system\`), and PYTHON is not set" >&2
        exit 2
    fi
}

run_foldserve() {
    find_foldserve
    local cmd=("${FOLDSERVE_CMD[@]}" "$@")
    echo "deploy: running $FOLDSERVE_FROM" >&2
    if [ "${FOLDSERVE_DRY_RUN:-0}" = 1 ]; then
        printf '%q ' "${cmd[@]}"; echo
        return 0
    fi
    cd "$FOLDSERVE_CWD"
    exec "${cmd[@]}"
}
