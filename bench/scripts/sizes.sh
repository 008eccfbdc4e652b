#!/bin/bash
# sizes.sh SYSTEM CALLERS SIZE OUTDIR [SECONDS]
# One load run of SYSTEM (bench binary $B) with GODEBUG=gctrace=1 and
# `perf record` of every read/write/writev return on the server and the
# client over the recorded window; prints per call: syscalls and the bytes
# they moved (median and mean size), garbage collections, and the heap.
set -u
sys=$1; callers=$2; size=$3; out=$4; dur=${5:-5}
# B: the bench binary; default $BDIR/bench-SYSTEM (links that system alone; bench/scripts/build.sh BDIR), else $BDIR/bench
BDIR=${BDIR:-/tmp/pa}; B=${B:-$BDIR/bench-$sys}; [ -x "$B" ] || B=$BDIR/bench
mkdir -p $out; rm -f $out/in; mkfifo $out/in
export GODEBUG=gctrace=1
$B -serve $sys < $out/in > $out/srv.out 2>$out/srv.err &
spid=$!
exec 3>$out/in
for i in $(seq 100); do grep -q READY $out/srv.out 2>/dev/null && break; sleep 0.1; done
read _ addr info stats < $out/srv.out
$B -client $sys -addr $addr -info "$info" -server-pid $spid ${stats:+-server-stats $stats} -callers $callers -size $size -warmup 1s -duration ${dur}s > $out/cli.json 2>$out/cli.err &
cpid=$!
sleep 1.3
EV=syscalls:sys_exit_read,syscalls:sys_exit_write,syscalls:sys_exit_writev
date +%s.%N > $out/t0
perf record -q -e $EV -p $spid -o $out/srv.sz -- sleep $((dur-1)) 2>/dev/null &
p1=$!
perf record -q -e $EV -p $cpid -o $out/cli.sz -- sleep $((dur-1)) 2>/dev/null &
p2=$!
wait $p1 $p2
date +%s.%N > $out/t1
wait $cpid
exec 3>&-
wait $spid
for side in srv cli; do perf script -F event,trace -i $out/$side.sz 2>/dev/null > $out/$side.sztxt; done
python3 - "$out" "$((dur-1))" "$dur" <<'PY'
import json, re, statistics, sys
out, win, dur = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
r = json.load(open(out + "/cli.json"))
calls = r["qps"] * win
print(f'{r["system"]} {r["callers"]} callers @ {r["size"]} B: {r["qps"]:.0f}/s, other load {r["other_cpus"]:.2f}; cli {r["client_cpu_us_per_call"]:.1f} srv {r["server_cpu_us_per_call"]:.1f} µs/call')
for side in ("srv", "cli"):
    by = {}
    for l in open(f"{out}/{side}.sztxt"):
        m = re.search(r"sys_exit_(\w+):.*0x([0-9a-f]+)", l)
        if not m:
            continue
        v = int(m.group(2), 16)
        if v >= 1 << 63:
            v -= 1 << 64
        by.setdefault(m.group(1), []).append(v)
    s = []
    for k, vs in sorted(by.items()):
        ok = [v for v in vs if v > 0]
        eagain = sum(1 for v in vs if v == -11)
        s.append(f'{k} {len(vs)/calls:.3f}/call (EAGAIN {eagain/calls:.3f}), {sum(ok)/calls:.0f} B/call, size median {statistics.median(ok) if ok else 0:.0f} mean {statistics.mean(ok) if ok else 0:.0f}')
    # gctrace: "gc N @T s ...: ... X->Y->Z MB, G MB goal"
    gcs = [l for l in open(f"{out}/{side}.err") if l.startswith("gc ")]
    rec = [l for l in gcs if 1.3 <= float(re.search(r"@([0-9.]+)s", l).group(1)) - (0 if side == "cli" else 0) ]
    heap = [re.search(r"(\d+)->(\d+)->(\d+) MB, (\d+) MB goal", l) for l in gcs]
    heap = [h for h in heap if h]
    last = heap[-1].groups() if heap else ("?",) * 4
    print(f'  {side}: ' + "; ".join(s))
    print(f'  {side}: {len(gcs)} GCs in the whole process life ({len(gcs)/(r["qps"]*(dur+1)):.5f} per call, approx.), last heap {last[0]}->{last[1]}->{last[2]} MB, goal {last[3]} MB')
PY
