import json, sys, collections, statistics as st
d = collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    if l.startswith("{"):
        j = json.loads(l)
        for k in ("b1", "b8"):
            d[j["wt"]][k] += j[k]
for wt, v in d.items():
    print(wt, {k: (round(st.median(x), 2), round(min(x), 2), len(x)) for k, x in v.items()})
