"""Counts from the e2e run's request log (FOLDSERVE_E2E_SCHEMA_LOG, one JSON line a request):
python3 summarize.py requests.jsonl > summary.json"""
import collections
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
schemas = []                                 # in order, each schema once a time it was tried
for r in rows:
    key = json.dumps(r["schema"], sort_keys=True)
    if not r["stream"]:
        schemas.append(key)
pairs = collections.Counter()
for a, b in zip(rows, rows[1:]):             # a schema's whole request, then its streamed one
    if not a["stream"] and b["stream"] and a["schema"] == b["schema"]:
        pairs["same text" if a["text"] == b["text"] else "different text"] += 1
tok = sorted(r["completion_tokens"] for r in rows if r["completion_tokens"] is not None)
budget = sorted(r["max_tokens"] for r in rows)
out = {
    "requests": len(rows),
    "streamed": sum(r["stream"] for r in rows),
    "whole": sum(not r["stream"] for r in rows),
    "schemas_tried": len(schemas),
    "distinct_schemas": len(set(schemas)),
    "finish": dict(collections.Counter(r["finish"] for r in rows)),
    "verdict": dict(collections.Counter(r["verdict"].split(":")[0] for r in rows)),
    "whole_vs_streamed": dict(pairs),
    "completion_tokens_whole": {"min": tok[0], "median": tok[len(tok) // 2], "max": tok[-1]} if tok else None,
    "max_tokens": {"min": budget[0], "median": budget[len(budget) // 2], "max": budget[-1]},
    "most_of_budget_used": max((r["completion_tokens"] / r["max_tokens"]
                                for r in rows if r["completion_tokens"]), default=None),
}
print(json.dumps(out, indent=1))
