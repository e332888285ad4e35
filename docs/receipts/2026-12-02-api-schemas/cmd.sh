cd /work/wt/a19
export PYTHONPATH=/work/wt/a19
export FOLDSERVE_E2E_SCHEMA_EXAMPLES=200 FOLDSERVE_E2E_SCHEMA_LOG=/tmp/a19/run/requests.jsonl
date -u +%FT%TZ > /tmp/a19/run/start
/usr/bin/time -v nice -n 10 /work/main/.venv/bin/python -m pytest tests/e2e/test_api_whole.py -k "random_schemas or bad_schema" --timeout 0 -p no:cacheprovider -q -rA
echo "rc=$?" > /tmp/a19/run/rc
date -u +%FT%TZ > /tmp/a19/run/end
