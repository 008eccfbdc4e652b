#!/bin/bash
# us.sh PROF TASKCLOCK_US_PER_CALL REGEX...  -> µs/call of cum for functions matching
prof=$1; tc=$2; shift 2
go tool pprof -top -cum -nodecount=100000 ${B:-/tmp/pa/bench} $prof 2>/dev/null > ${TMPDIR:-/tmp}/us.top
tot=$(grep -oP 'Total samples = \K[0-9.]+m?s' ${TMPDIR:-/tmp}/us.top | sed 's/ms$/ \/1000/;s/s$//' | bc -l)
for re in "$@"; do
  grep -E "$re" ${TMPDIR:-/tmp}/us.top | head -1 | awk -v t=$tot -v tc=$tc '{v=$4; if (v ~ /ms$/) {sub("ms","",v); v=v/1000} else sub("s","",v); printf "%5.2f µs  %s\n", v/t*tc, $6}'
done
