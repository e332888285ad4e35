"""In process, each editing-set prompt three ways in one process, alternated (rep 0: plain,
main's two classes, three classes; rep 1 the reverse): the drafted rules side by side on the
same engine and load, which the server runs (one tree a process) cannot pair this closely.
main's rule is pace.MID out of reach (a match of LONG or more: one class).

  PYTHONPATH=$PWD python docs/receipts/2026-12-06-pace38/trace3.py [--reps 2] [--out F.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace as TR  # noqa: E402

DP = TR.DP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import server.drafts.pace as P
    from editing import EDIT_SET
    from server.engine.build import open_model
    mid = P.MID
    m = open_model(None, progress=False)
    tok = m.tokenizer
    DP.one(m.engine, tok.encode(EDIT_SET[0].prompt()), 8, True, None, 8)      # warm
    sides = [("plain", None), ("main", 10 ** 9), ("three", mid)]
    res = []
    for rep in range(a.reps):
        for t in EDIT_SET:
            prompt = tok.encode(t.prompt())
            got = {}
            for name, rule in (sides if rep % 2 == 0 else sides[::-1]):
                if rule is not None:
                    P.MID = rule
                TR.LOG.clear()
                ids, r = DP.one(m.engine, prompt, a.tokens, rule is not None, None, 8)
                rounds = TR.rounds_of(ids, TR.LOG)
                got[name] = {"ids": ids, "tps": r["decode_tps"], "fwd_ms": sum(x[1] for x in rounds),
                             "wall_ms": r["wall_s"] * 1e3, "rounds": len(rounds),
                             "drafted": sum(x[2] for x in rounds), "taken": sum(x[3] for x in rounds)}
            P.MID = mid
            assert got["main"]["ids"] == got["plain"]["ids"] == got["three"]["ids"], t.name
            row = {"prompt": t.name, "rep": rep, "loadavg": os.getloadavg(),
                   **{f"{s}_{k}": v for s in got for k, v in got[s].items() if k != "ids"}}
            for s in ("main", "three"):
                row[f"{s}_ratio"] = got[s]["tps"] / got["plain"]["tps"]
                row[f"{s}_fwd_ratio"] = got["plain"]["fwd_ms"] / got[s]["fwd_ms"]
            row["three_over_main"] = got["three"]["tps"] / got["main"]["tps"]
            row["three_over_main_fwd"] = got["main"]["fwd_ms"] / got["three"]["fwd_ms"]
            res.append(row)
            print(json.dumps(row), flush=True)
    for s in ("main", "three"):
        n = sum(a.tokens - 1 for _ in res)
        print(f"{s}: set pooled wall {sum(r['plain_wall_ms'] for r in res) / sum(r[s + '_wall_ms'] for r in res):.3f}x,"
              f" forward {sum(r['plain_fwd_ms'] for r in res) / sum(r[s + '_fwd_ms'] for r in res):.3f}x ({n} tokens a side)")
    if a.out:
        json.dump(res, open(a.out, "w"), indent=0)


if __name__ == "__main__":
    main()
