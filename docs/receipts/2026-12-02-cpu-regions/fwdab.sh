# fwdab.sh N dirA dirB ...: each dir's forward alone, alternated N times
N=$1; shift
for i in $(seq 1 $N); do for d in "$@"; do (cd $d && PYTHONPATH=$d .venv/bin/python /tmp/w/fwd.py 2>&1 | tail -1); done; done
