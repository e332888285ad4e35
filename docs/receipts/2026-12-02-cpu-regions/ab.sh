# ab.sh DIR_A DIR_B ROUNDS: two servers up at once, b1 and b8 TPOT alternated
A=$1; Bd=$2; R=${3:-6}
start() { (cd $1 && NUMBA_NUM_THREADS=2 PYTHONPATH=$1 nohup /work/main/.venv/bin/python -m server.cli serve --host 127.0.0.1 --port $2 > /tmp/exp/srv_$2.log 2>&1 &) ; }
start $A 8131
start $Bd 8132
for p in 8131 8132; do until curl -sf localhost:$p/health > /dev/null; do sleep 0.5; done; done
B() { cd /work/main && PYTHONPATH=/work/main /work/main/.venv/bin/python -m server.cli bench --url http://127.0.0.1:$1 --concurrency $2 --requests $3 --input-len 64 --output-len 128 --seed $4 | grep "Median TPOT" | awk '{print $4}'; }
B 8131 1 1 1 > /dev/null; B 8132 1 1 1 > /dev/null; B 8131 8 8 1 > /dev/null; B 8132 8 8 1 > /dev/null
for i in $(seq 1 $R); do
  a=$(B 8131 1 3 $((i+10))); b=$(B 8132 1 3 $((i+10)))
  a8=$(B 8131 8 8 $((i+30))); b8=$(B 8132 8 8 $((i+30)))
  echo "round $i b1 TPOT A $a B $b | b8 TPOT A $a8 B $b8"
done
pkill -f "port 813[12]"
