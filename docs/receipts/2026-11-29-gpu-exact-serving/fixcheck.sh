export PYTHONUNBUFFERED=1
cp server/engine/graphs.py /tmp/new_graphs.py
cp bench/device/old_graphs.py server/engine/graphs.py
echo "== before the fix (expected to fail):"
timeout 120 python3 -m pytest -q tests/gpu/test_graphs.py 2>&1 | tail -3
cp /tmp/new_graphs.py server/engine/graphs.py
echo "== after:"
timeout 120 python3 -m pytest -q tests/gpu/test_graphs.py 2>&1 | tail -2
bash bench/device/serve_checks.sh 2>&1 | grep -v "^+ "
