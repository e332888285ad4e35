cd /work/main
export NUMBA_CACHE_DIR=/tmp/nbc_cold_$$
rm -rf $NUMBA_CACHE_DIR
t0=$(date +%s.%N)
(NUMBA_CACHE_DIR=$NUMBA_CACHE_DIR .venv/bin/foldserve serve --host 127.0.0.1 --port 8000 > /tmp/w/cold.log 2>&1 &)
until curl -sf 127.0.0.1:8000/health > /dev/null; do sleep 0.1; done
t1=$(date +%s.%N)
echo "cold cache: serve -> /health $(echo "$t1 - $t0" | bc) s"
PYTHONPATH=$PWD .venv/bin/python -c "
from bench.cpu_serve import curl
print('first request (compiles)', curl('http://127.0.0.1:8000'))
print('second request', curl('http://127.0.0.1:8000'))
"
pkill -f "foldserve serve --host 127.0.0.1 --port 8000"
