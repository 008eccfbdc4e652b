#!/bin/bash
# where.sh SYSTEM CALLERS SIZE OUTDIR [SECONDS]
# One load run of SYSTEM (bench binary $B) with `perf record -g` of CPU time
# (cpu-clock, $FREQ Hz, kernel included) on the server and the client over the
# recorded window, then where.py: µs per call by kind of work (syscalls, page
# faults, copies, allocation, GC, scheduler, ...) and by the code that did it.
set -u
sys=$1; callers=$2; size=$3; out=$4; dur=${5:-6}
# B: the bench binary; default $BDIR/bench-SYSTEM (links that system alone; bench/scripts/build.sh BDIR), else $BDIR/bench
BDIR=${BDIR:-/tmp/pa}; B=${B:-$BDIR/bench-$sys}; [ -x "$B" ] || B=$BDIR/bench; F=${FREQ:-1999}
here=$(dirname "$0")
mkdir -p $out; rm -f $out/in; mkfifo $out/in
$B -serve $sys ${SRVFLAGS:-} < $out/in > $out/srv.out 2>$out/srv.err &
spid=$!
exec 3>$out/in
for i in $(seq 100); do grep -q READY $out/srv.out 2>/dev/null && break; sleep 0.1; done
read _ addr info stats < $out/srv.out
$B -client $sys -addr $addr -info "$info" -server-pid $spid ${stats:+-server-stats $stats} -callers $callers -size $size -warmup 1s -duration ${dur}s ${CLIFLAGS:-} > $out/cli.json 2>$out/cli.err &
cpid=$!
sleep 1.3
perf record -q -g -F $F -e cpu-clock -p $spid -o $out/srv.data -- sleep $((dur-1)) 2>/dev/null &
p1=$!
perf record -q -g -F $F -e cpu-clock -p $cpid -o $out/cli.data -- sleep $((dur-1)) 2>/dev/null &
p2=$!
wait $p1 $p2 $cpid
exec 3>&-
wait $spid
for side in srv cli; do
  perf script -F period,ip,sym -i $out/$side.data 2>/dev/null | python3 $here/where.py $out/cli.json $((dur-1)) $side $out/$side.where.json > $out/$side.where
done
head -1 $out/srv.where
for side in srv cli; do tail -n +2 $out/$side.where; done
