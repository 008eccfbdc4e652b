#!/bin/bash
# prof.sh SYSTEM CALLERS SIZE OUTDIR [SECONDS]
# One load run of SYSTEM (a server process and a client process of the bench
# binary $B: see below; bench/scripts/build.sh /tmp/pa builds them), with a
# CPU profile of each (OUTDIR/srv.prof, OUTDIR/cli.prof; none with NOPROF=1)
# and perf stat on each
# over the recorded window, printed per call: task-clock (µs), page faults,
# context switches, syscalls by kind. EXTRA adds perf events (e.g. uprobes made
# with: perf probe -x $B -a 'probe_bench:park_m=runtime.park_m'). Needs perf
# and python3.
set -u
sys=$1; callers=$2; size=$3; out=$4; dur=${5:-5}
# B: the bench binary; default $BDIR/bench-SYSTEM (links that system alone; bench/scripts/build.sh BDIR), else $BDIR/bench
BDIR=${BDIR:-/tmp/pa}; B=${B:-$BDIR/bench-$sys}; [ -x "$B" ] || B=$BDIR/bench
mkdir -p $out; rm -f $out/in; mkfifo $out/in
# NOPROF=1: no CPU profiles. The profiler's buffer (about 1.1 MiB per
# process) is live heap, so with profiles a process that collects often
# (16 KiB payloads) collects less often than it does in the bench's table.
sprof="-cpuprofile $out/srv.prof"; cprof="-cpuprofile $out/cli.prof"
[ -n "${NOPROF:-}" ] && sprof= && cprof=
$B -serve $sys ${SRVFLAGS:-} $sprof < $out/in > $out/srv.out 2>$out/srv.err &
spid=$!
exec 3>$out/in
for i in $(seq 100); do grep -q READY $out/srv.out 2>/dev/null && break; sleep 0.1; done
read _ addr info stats < $out/srv.out
EV=task-clock,page-faults,context-switches,cpu-migrations,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_nanosleep,syscalls:sys_enter_sched_yield,syscalls:sys_enter_tgkill,syscalls:sys_enter_madvise,syscalls:sys_enter_getrusage${EXTRA:+,$EXTRA}
$B -client $sys -addr $addr -info "$info" -server-pid $spid ${stats:+-server-stats $stats} -callers $callers -size $size -warmup 1s -duration ${dur}s ${CLIFLAGS:-} $cprof > $out/cli.json 2>$out/cli.err &
cpid=$!
sleep 1.3
perf stat -x, -e $EV -p $spid -- sleep $((dur-1)) 2> $out/srv.stat &
p1=$!
perf stat -x, -e $EV -p $cpid -- sleep $((dur-1)) 2> $out/cli.stat &
p2=$!
wait $p1 $p2 $cpid
exec 3>&-
wait $spid
python3 - "$out" "$((dur-1))" <<'PY'
import json,sys
out,win=sys.argv[1],float(sys.argv[2])
r=json.load(open(out+"/cli.json"))
calls=r["qps"]*win
print(f'{r["system"]} callers {r["callers"]} size {r["size"]} ({r.get("binary","?")}): {r["qps"]:.0f}/s p50 {r["p50_us"]:.0f} cli {r["client_cpu_us_per_call"]:.1f} srv {r["server_cpu_us_per_call"]:.1f} µs/call errs {r["errors"]}, other load {r["other_cpus"]:.2f}')
for side, k in (("srv", "server_go"), ("cli", "client_go")):
    g = r.get(k)
    if g and (k == "client_go" or r.get("have_server_go")):
        print(f'  {side} Go: GCs/10k calls {g["gcs_per_10k_calls"]:.2f}, GC CPU {g["gc_cpu_us_per_call"]:.2f} µs/call, {g["allocs_per_call"]:.2f} allocs {g["alloc_bytes_per_call"]:.0f} B/call, live heap {g["live_heap_mib"]:.1f} MiB, {g.get("goroutines", 0)} goroutines, last GC scanned stacks {g.get("scan_stack_kib", 0):.0f} KiB, heap {g.get("scan_heap_kib", 0):.0f} KiB, scavenger {g.get("scavenge_cpu_us_per_call", 0):.2f} µs/call')
for side in ("srv","cli"):
    d={}
    for l in open(f"{out}/{side}.stat"):
        f=l.strip().split(",")
        if len(f)>3 and f[0] and f[0][0].isdigit():
            d[f[2]]=float(f[0])
    s=" ".join(f'{k.replace("syscalls:sys_enter_","").replace("raw_syscalls:sys_enter","sys").replace("probe_bench:","").replace("probe_bench4:","").replace("probe_bench8:","")}={(v/calls*(1 if k!="task-clock" else 1000)):.3g}' for k,v in d.items())
    print(f'  {side}/call: {s}')
PY
