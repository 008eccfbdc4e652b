#!/bin/bash
# ab.sh BIN_A BIN_B SYSTEM CALLERS SIZE [RUNS] [SECONDS]
# Interleaved A/B of two bench binaries (built from two commits with
# bench/scripts/build.sh DIR REF; pass DIR/bench-SYSTEM): RUNS pairs of prof.sh runs (A, B,
# A, B, ...; B first in odd pairs), then the medians per call of each side:
# perf task-clock, getrusage CPU, syscalls, futex, context switches, calls/s
# and p50. Run directories go to ${ABDIR:-/tmp/ab}/{a,b}N. SYSTEM may be
# SYS_A,SYS_B to compare two systems (e.g. minidubbo,minidubbo-borrow with
# DIR/bench-minidubbo and DIR/bench-minidubbo-borrow). The runs take no CPU
# profiles (prof.sh NOPROF=1): a profile's buffer is about 1.1 MiB of live
# heap in each process, which at 16 KiB made the provider collect 39 times
# per 10k calls instead of 62-68 as in the bench's table. PROF=1 takes them.
set -u
np=1; [ -n "${PROF:-}" ] && np=
A=$1; Bb=$2; sys=$3; callers=$4; size=$5; runs=${6:-5}; dur=${7:-5}
sysa=${sys%%,*}; sysb=${sys##*,}
here=$(dirname "$0"); d=${ABDIR:-/tmp/ab}
rm -rf $d; mkdir -p $d
for i in $(seq $runs); do
  if [ $((i % 2)) = 1 ]; then order="a b"; else order="b a"; fi
  for w in $order; do
    bin=$A; s=$sysa; [ $w = b ] && bin=$Bb && s=$sysb
    B=$bin NOPROF=$np timeout $((dur + 60)) $here/prof.sh $s $callers $size $d/$w$i $dur > $d/$w$i.txt 2>&1
  done
done
python3 - "$d" "$runs" "$dur" "$A" "$Bb" <<'PY'
import json, statistics, sys
d, runs, dur, A, Bb = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
def stat(path, calls):
    v = {}
    for l in open(path):
        f = l.strip().split(",")
        if len(f) > 3 and f[0] and f[0][0].isdigit():
            v[f[2]] = float(f[0]) / calls
    return v
rows = {"a": [], "b": []}
for w in "ab":
    for i in range(1, runs + 1):
        try:
            r = json.load(open(f"{d}/{w}{i}/cli.json"))
        except Exception as e:
            print(f"{w}{i}: no result ({e})"); continue
        calls = r["qps"] * (dur - 1)
        s, c = stat(f"{d}/{w}{i}/srv.stat", calls), stat(f"{d}/{w}{i}/cli.stat", calls)
        rows[w].append({"calls/s": r["qps"], "p50 µs": r["p50_us"], "errors": r["errors"],
            "srv task-clock µs": s.get("task-clock", 0) * 1000, "cli task-clock µs": c.get("task-clock", 0) * 1000,
            "srv getrusage µs": r["server_cpu_us_per_call"], "cli getrusage µs": r["client_cpu_us_per_call"],
            "srv syscalls": s.get("raw_syscalls:sys_enter", 0), "cli syscalls": c.get("raw_syscalls:sys_enter", 0),
            "srv futex": s.get("syscalls:sys_enter_futex", 0), "cli futex": c.get("syscalls:sys_enter_futex", 0),
            "srv ctx switches": s.get("context-switches", 0), "cli ctx switches": c.get("context-switches", 0),
            "other load (CPUs)": r["other_cpus"]})
        for side, k in (("srv", "server_go"), ("cli", "client_go")):
            g = r.get(k)
            if g and (k == "client_go" or r.get("have_server_go")):
                rows[w][-1].update({f"{side} GCs per 10k calls": g["gcs_per_10k_calls"], f"{side} GC CPU µs": g["gc_cpu_us_per_call"],
                    f"{side} allocs": g["allocs_per_call"], f"{side} B allocated": g["alloc_bytes_per_call"], f"{side} live heap MiB": g["live_heap_mib"],
                    f"{side} goroutines": g.get("goroutines", 0), f"{side} GC-scanned stacks KiB": g.get("scan_stack_kib", 0), f"{side} GC-scanned heap KiB": g.get("scan_heap_kib", 0),
                    f"{side} max GC stop-the-world wait ms": g.get("max_gc_stop_ms", 0), f"{side} GC stops over 1 ms": g.get("gc_stops_over_1ms", 0),
                    f"{side} scavenger CPU µs": g.get("scavenge_cpu_us_per_call", 0)})
print(f"A = {A}, B = {Bb}: {sys.argv[0] and ''}{len(rows['a'])}+{len(rows['b'])} interleaved runs of {dur:.0f} s; medians (min–max)")
print("| per call | A | B | B − A |")
print("|---|---:|---:|---:|")
for k in rows["a"][0] if rows["a"] else []:
    va = [x[k] for x in rows["a"] if k in x]; vb = [x[k] for x in rows["b"] if k in x]
    if not va or not vb: continue
    ma, mb = statistics.median(va), statistics.median(vb)
    f = (lambda x: f"{x:,.0f}") if k in ("calls/s", "p50 µs", "errors") else (lambda x: f"{x:.2f}" if x < 10 else f"{x:.1f}")
    print(f"| {k} | {f(ma)} ({f(min(va))}–{f(max(va))}) | {f(mb)} ({f(min(vb))}–{f(max(vb))}) | {mb - ma:+.2f} ({(mb - ma) / ma * 100 if ma else 0:+.0f} %) |")
PY
