#!/bin/bash
# rec.sh SYSTEM CALLERS SIZE OUTDIR EVENTS
# perf record -g of EVENTS (e.g. syscalls:sys_enter_futex) on the server and the
# client of one load run of SYSTEM, into OUTDIR/srv.data and OUTDIR/cli.data;
# read them with: perf report -i OUTDIR/srv.data --stdio --no-children -G
set -u
sys=$1; callers=$2; size=$3; out=$4; ev=$5
# B: the bench binary; default $BDIR/bench-SYSTEM (links that system alone; bench/scripts/build.sh BDIR), else $BDIR/bench
BDIR=${BDIR:-/tmp/pa}; B=${B:-$BDIR/bench-$sys}; [ -x "$B" ] || B=$BDIR/bench
mkdir -p $out; rm -f $out/in; mkfifo $out/in
$B -serve $sys < $out/in > $out/srv.out 2>$out/srv.err &
spid=$!
exec 3>$out/in
for i in $(seq 100); do grep -q READY $out/srv.out 2>/dev/null && break; sleep 0.1; done
read _ addr info stats < $out/srv.out
$B -client $sys -addr $addr -info "$info" -server-pid $spid ${stats:+-server-stats $stats} -callers $callers -size $size -warmup 1s -duration 5s > $out/cli.json 2>$out/cli.err &
cpid=$!
sleep 1.3
perf record -q -g -e $ev -p $spid -o $out/srv.data -- sleep 3 2>/dev/null &
p1=$!
perf record -q -g -e $ev -p $cpid -o $out/cli.data -- sleep 3 2>/dev/null &
p2=$!
wait $p1 $p2 $cpid
exec 3>&-
wait $spid
