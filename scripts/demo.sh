#!/usr/bin/env bash
# make demo: a local ZooKeeper (started only if nothing answers on 127.0.0.1:2181), the monitor
# server, three providers of weights 100, 200 and 300, and a consumer that calls them with weighted
# random and with round robin, every process reporting its call counts to the monitor each second;
# prints who served what, then the monitor's call-count report of the run, then stops everything it
# started and says so.
#
# MONITOR_HTTP (default 127.0.0.1:8080) is where the dashboard is served. From a terminal, the
# demo prints the dashboard's address and waits for Enter before stopping the monitor, so the
# dashboard can be looked at; otherwise (stdin not a terminal) it stops at once.
set -euo pipefail
cd "$(dirname "$0")/.."

ZK_ADDR=127.0.0.1:2181
MONITOR_HTTP=${MONITOR_HTTP:-127.0.0.1:8080}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/minidubbo-demo.XXXXXX")
PIDS=()
MONITOR_PID=
STARTED_ZK=
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$MONITOR_PID" ]; then
    kill -TERM "$MONITOR_PID" 2>/dev/null || true
    wait "$MONITOR_PID" 2>/dev/null || true
  fi
  if [ -n "$STARTED_ZK" ]; then bash scripts/zookeeper.sh stop >/dev/null 2>&1 || true; fi
  rm -rf "$BIN"
}
trap cleanup EXIT

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/${1%:*}/${1#*:}" 2>/dev/null; }

# srvr ADDR: ZooKeeper's answer to its srvr command at ADDR (empty when nothing answers).
srvr() { timeout 2 bash -c "exec 3<>/dev/tcp/${1%:*}/${1#*:} && printf srvr >&3 && cat <&3" 2>/dev/null || true; }

# wait_line FILE REGEX WHAT [HINT]: wait (at most 30 s) until FILE has a line matching REGEX;
# if it never does, print FILE, and HINT when FILE says an address was in use, and exit 1.
wait_line() {
  for _ in $(seq 300); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$3 did not start:"; cat "$1"
  if [ -n "${4:-}" ] && grep -q 'address already in use' "$1"; then echo "$4"; fi
  exit 1
}

if answers "$ZK_ADDR"; then
  # A serving ZooKeeper says its mode; one that keeps srvr off says so.
  if ! srvr "$ZK_ADDR" | grep -q -e '^Mode: ' -e 'not in the whitelist'; then
    echo "something answers on $ZK_ADDR, but not as a serving ZooKeeper; the demo needs one there:"
    echo "stop what listens on that port (ss -ltnp 'sport = :${ZK_ADDR#*:}' names it), then run make demo again"
    exit 1
  fi
  echo "== using the ZooKeeper already answering on $ZK_ADDR"
else
  echo "== starting a local ZooKeeper on $ZK_ADDR"
  bash scripts/zookeeper.sh start
  STARTED_ZK=1
fi
if answers "$MONITOR_HTTP"; then
  echo "something already answers on $MONITOR_HTTP; set MONITOR_HTTP=127.0.0.1:PORT to a free port"
  exit 1
fi

echo "== building the hello example and the minidubbo command"
go build -o "$BIN/provider" ./examples/hello/provider
go build -o "$BIN/consumer" ./examples/hello/consumer
go build -o "$BIN/minidubbo" ./cmd/minidubbo

echo "== starting the monitor server"
"$BIN/minidubbo" monitor -registry "zookeeper://$ZK_ADDR" -http "$MONITOR_HTTP" -data "$BIN/monitor-data" -refresh 2s \
  >"$BIN/monitor.log" 2>&1 &
MONITOR_PID=$!
wait_line "$BIN/monitor.log" '^dashboard at' "the monitor" \
  "(make demo: set MONITOR_HTTP=127.0.0.1:PORT to a free port)"
sed 's/^/   /' "$BIN/monitor.log"

for spec in p1:100 p2:200 p3:300; do
  name=${spec%:*} weight=${spec#*:}
  "$BIN/provider" -registry "zookeeper://$ZK_ADDR" -name "$name" -weight "$weight" -report-interval 1s >"$BIN/$name.log" 2>&1 &
  PIDS+=($!)
done
# Wait until every provider says it is registered.
for name in p1 p2 p3; do
  wait_line "$BIN/$name.log" '^serving' "provider $name"
  grep '^serving' "$BIN/$name.log"
done

echo
echo "== 3000 calls, weighted random (expect about 1/6, 2/6, 3/6)"
"$BIN/consumer" -registry "zookeeper://$ZK_ADDR" -loadbalance random -calls 3000 -concurrency 8 -report-interval 1s
echo
echo "== 600 calls, smooth weighted round robin (exactly 100, 200, 300)"
"$BIN/consumer" -registry "zookeeper://$ZK_ADDR" -loadbalance roundrobin -calls 600 -concurrency 1 -report-interval 1s
echo
echo "== the same as JSON"
"$BIN/consumer" -registry "zookeeper://$ZK_ADDR" -loadbalance roundrobin -calls 600 -concurrency 1 -json -report-interval 1s
echo
echo "== stopping the providers gracefully (each sends its last report)"
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

echo
echo "== the monitor's report of the run, by provider (consumer rows: attempts sent; provider rows: calls served)"
"$BIN/minidubbo" report -monitor "http://$MONITOR_HTTP" -since 10m -by provider
echo
echo "== by method (consumer rows: calls as the application made them)"
"$BIN/minidubbo" report -monitor "http://$MONITOR_HTTP" -since 10m -by method
echo
if [ -t 0 ]; then
  echo "== dashboard: http://$MONITOR_HTTP/   (JSON: http://$MONITOR_HTTP/api/report?since=10m, Prometheus: http://$MONITOR_HTTP/metrics)"
  read -r -p "press Enter to stop the monitor and end the demo " _ || true
else
  # No terminal to wait on (a pipe, CI): the monitor stops now, so its
  # address is not offered as something to open.
  echo "== no terminal: not waiting; from a terminal the demo keeps the dashboard (http://$MONITOR_HTTP/) up until Enter"
fi
cleanup
trap - EXIT
echo "== demo over: the monitor, the providers${STARTED_ZK:+ and the ZooKeeper it started} are stopped"
