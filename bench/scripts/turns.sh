#!/bin/bash
# turns.sh SYSTEM CALLERS SIZE OUTDIR [SECONDS]
# How the two processes of one load run of SYSTEM take turns: records the
# writev/read syscalls of the server and the client together (perf record of
# syscall tracepoints, both pids in one file, for SECONDS, default 0.3, after
# 2 s of the run), then prints for each side the writevs by how many buffers
# (frames) they carried, and a stretch of the client's sequence of reads
# (R<frames read, as SIZE+21-byte frames>) and writes (W<buffers>), e.g.
# "R16 W1 W13 W2": a read of 16 responses, then three writes. Needs perf and
# python3. B / BDIR pick the bench binary as in prof.sh.
set -u
sys=$1; callers=$2; size=$3; out=$4; win=${5:-0.3}
BDIR=${BDIR:-/tmp/pa}; B=${B:-$BDIR/bench-$sys}; [ -x "$B" ] || B=$BDIR/bench
mkdir -p $out; rm -f $out/in; mkfifo $out/in
$B -serve $sys < $out/in > $out/srv.out 2>$out/srv.err &
spid=$!
exec 3>$out/in
for i in $(seq 100); do grep -q READY $out/srv.out 2>/dev/null && break; sleep 0.1; done
read _ addr info stats < $out/srv.out
$B -client $sys -addr $addr -info "$info" -server-pid $spid -callers $callers -size $size -warmup 1s -duration 3s > $out/cli.json 2>$out/cli.err &
cpid=$!
sleep 2
perf record -q -e 'syscalls:sys_enter_writev,syscalls:sys_exit_read' -p $spid,$cpid -o $out/turns.data -- sleep $win 2>/dev/null
wait $cpid
exec 3>&-
wait $spid
perf script -i $out/turns.data -F pid,event,trace 2>/dev/null > $out/turns.txt
python3 - "$out/turns.txt" "$spid" "$cpid" "$size" <<'PY'
import collections, re, sys
path, srv, cli, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
frame = size + 21  # a dubbo frame of an echo of SIZE bytes, about
w = {srv: collections.Counter(), cli: collections.Counter()}
seq = []
for l in open(path):
    m = re.match(r"\s*(\d+)\s+(\S+):\s*(.*)", l)
    if not m or m[1] not in w:
        continue
    pid, ev, rest = m.groups()
    if ev.endswith("enter_writev"):
        n = int(re.search(r"vlen: (0x[0-9a-f]+)", rest)[1], 16)
        w[pid][n] += 1
        if pid == cli:
            seq.append(f"W{n}")
    elif ev.endswith("exit_read") and pid == cli:
        v = int(rest.split()[0], 16)
        if v < 1 << 62 and v >= frame // 2:
            seq.append(f"R{round(v / frame)}")
for name, pid in (("server", srv), ("client", cli)):
    c = w[pid]
    n, frames = sum(c.values()), sum(k * v for k, v in c.items())
    print(f"{name}: {n} writevs, {frames} buffers, {frames / max(n, 1):.1f} a writev; by buffers: " +
          " ".join(f"{k}:{v}" for k, v in sorted(c.items())))
mid = len(seq) // 2
print("client, a stretch:", " ".join(seq[mid:mid + 60]))
PY
