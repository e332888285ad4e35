"""16 concurrent chat requests, drafted (--draft ngram server, the requests' default) against
`"draft": false` on the same server, PAIRS pairs in alternating order, TOKENS a reply:
each pair's ratio, the median and the pooled ratio. Usage: PYTHONPATH=TREE python x16_ab.py PAIRS TOKENS"""
import importlib.util, os, signal, statistics, sys
root = os.environ["PYTHONPATH"].split(":")[0]
spec = importlib.util.spec_from_file_location("drafts_bench", os.path.join(root, "bench", "drafts.py"))
B = importlib.util.module_from_spec(spec); spec.loader.exec_module(B)
pairs, tokens = int(sys.argv[1]), int(sys.argv[2])
proc, url = B.start_server(8131, ["--draft", "ngram"])
B.SERVER_PID[0] = proc.pid
try:
    B.concurrent(url, True, tokens=4)
    got = {False: [], True: []}
    for k in range(pairs):
        for dr in ((False, True) if k % 2 == 0 else (True, False)):
            got[dr].append(B.concurrent(url, dr, tokens=tokens))
        p, d = got[False][-1], got[True][-1]
        print(f"pair {k}: plain {p['tps']:.1f} drafted {d['tps']:.1f} tok/s ({d['tps'] / p['tps']:.3f}x; "
              f"per CPU second {d['cpu_tps'] / p['cpu_tps']:.3f}x) drafted tokens {d['draft_tokens']} "
              f"equal={p['texts'] == d['texts']} load {os.getloadavg()[0]:.2f}", flush=True)
    r = [d["tps"] / p["tps"] for p, d in zip(got[False], got[True])]
    c = [d["cpu_tps"] / p["cpu_tps"] for p, d in zip(got[False], got[True])]
    P, D = B.pooled16(got[False]), B.pooled16(got[True])
    print(f"median of {pairs} pairs {statistics.median(r):.3f}x (per CPU second {statistics.median(c):.3f}x); "
          f"pooled {D['tps'] / P['tps']:.3f}x (per CPU second {D['cpu_tps'] / P['cpu_tps']:.3f}x); "
          f"range {min(r):.3f}-{max(r):.3f}; drafted tokens {D['draft_tokens']}")
finally:
    os.killpg(proc.pid, signal.SIGTERM)
