cd /work/main
for i in 1 2; do
  t0=$(date +%s.%N)
  (make serve > /tmp/w/make_serve_$i.log 2>&1 &)
  until curl -sf 127.0.0.1:8000/health > /dev/null; do sleep 0.1; done
  t1=$(date +%s.%N)
  echo "make serve -> /health $(echo "$t1 - $t0" | bc) s"
  PYTHONPATH=$PWD .venv/bin/python -c "
import sys; sys.path.insert(0, 'bench')
from bench.cpu_serve import curl
print('first request', curl('http://127.0.0.1:8000'))
print('second request', curl('http://127.0.0.1:8000'))
"
  pkill -f "foldserve serve --host 127.0.0.1 --port 8000"; sleep 2
done
