#!/usr/bin/env bash
# make demo: a local ZooKeeper (started only if nothing answers on 127.0.0.1:2181), three providers
# of weights 100, 200 and 300, and a consumer that calls them with weighted random and with round
# robin; prints who served what, then stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

ZK_ADDR=127.0.0.1:2181
BIN=$(mktemp -d "${TMPDIR:-/tmp}/minidubbo-demo.XXXXXX")
PIDS=()
STARTED_ZK=
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$STARTED_ZK" ]; then bash scripts/zookeeper.sh stop >/dev/null 2>&1 || true; fi
  rm -rf "$BIN"
}
trap cleanup EXIT

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/${ZK_ADDR%:*}/${ZK_ADDR#*:}" 2>/dev/null; }

if answers; then
  echo "== using the ZooKeeper already answering on $ZK_ADDR"
else
  echo "== starting a local ZooKeeper on $ZK_ADDR"
  bash scripts/zookeeper.sh start
  STARTED_ZK=1
fi

echo "== building the hello example"
go build -o "$BIN/provider" ./examples/hello/provider
go build -o "$BIN/consumer" ./examples/hello/consumer

for spec in p1:100 p2:200 p3:300; do
  name=${spec%:*} weight=${spec#*:}
  "$BIN/provider" -registry "zookeeper://$ZK_ADDR" -name "$name" -weight "$weight" >"$BIN/$name.log" 2>&1 &
  PIDS+=($!)
done
# Wait (at most 30 s) until every provider says it is registered.
for name in p1 p2 p3; do
  for _ in $(seq 300); do
    grep -q '^serving' "$BIN/$name.log" 2>/dev/null && break
    sleep 0.1
  done
  grep '^serving' "$BIN/$name.log" || { echo "provider $name did not start:"; cat "$BIN/$name.log"; exit 1; }
done

echo
echo "== 3000 calls, weighted random (expect about 1/6, 2/6, 3/6)"
"$BIN/consumer" -registry "zookeeper://$ZK_ADDR" -loadbalance random -calls 3000 -concurrency 8
echo
echo "== 600 calls, smooth weighted round robin (exactly 100, 200, 300)"
"$BIN/consumer" -registry "zookeeper://$ZK_ADDR" -loadbalance roundrobin -calls 600 -concurrency 1
echo
echo "== the same as JSON"
"$BIN/consumer" -registry "zookeeper://$ZK_ADDR" -loadbalance roundrobin -calls 600 -concurrency 1 -json
echo
echo "== stopping the providers gracefully"
