#!/usr/bin/env python3
"""wheremed.py SIDE DIR... : medians over runs (where.sh output dirs) of µs per
call by kind of work, for each system, side by side (the first system is the
baseline; the last column is the difference from it)."""
import json, statistics, sys, collections
side = sys.argv[1]
runs = collections.defaultdict(list)
for d in sys.argv[2:]:
    j = json.load(open(f"{d}/{side}.where.json"))
    runs[j["system"]].append(j)
systems = list(runs)
kinds = sorted({k for js in runs.values() for j in js for k in j["kinds"]})
med = lambda s, f: statistics.median(f(j) for j in runs[s])
rows = []
for k in kinds:
    vals = [med(s, lambda j: j["kinds"].get(k, 0.0)) for s in systems]
    rows.append((vals[-1] - vals[0], k, vals))
hdr = ", ".join("%s (%d runs, %.0f/s, other load %.2f)" % (s, len(runs[s]), med(s, lambda j: j["qps"]), med(s, lambda j: j["other"])) for s in systems)
print(f"{side}: µs/call, medians of {hdr}")
print("| kind | " + " | ".join(systems) + " | diff |")
print("|---|" + "---:|" * (len(systems) + 1))
tot = [med(s, lambda j: j["total"]) for s in systems]
print("| total sampled | " + " | ".join("%.1f" % t for t in tot) + " | %+.1f |" % (tot[-1] - tot[0]))
for d, k, vals in sorted(rows, reverse=True):
    print(f"| {k} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {d:+.2f} |")
