#!/usr/bin/env bash
# Run a local ZooKeeper 3.8 for minidubbo, without systemd.
#
#   scripts/zookeeper.sh start      standalone server on 127.0.0.1:$ZK_PORT (default 2181)
#   scripts/zookeeper.sh ensemble   3 servers on 127.0.0.1:$ZK_PORT, +1, +2 (a quorum survives one loss)
#   scripts/zookeeper.sh status     mode of every server started here
#   scripts/zookeeper.sh stop       stop every server started here
#   scripts/zookeeper.sh kill N     kill -9 server N (ensemble experiments); `start-member N` restarts it
#   scripts/zookeeper.sh wipe       stop and delete the data directory
#   scripts/zookeeper.sh install    only make sure ZooKeeper is there (installing it as root)
#
# Data, configs, logs and pid files live in $ZK_DIR (default ./.zk), one srvN/ per server.
# ZooKeeper is found from $ZOOKEEPER_HOME, the Debian package layout (/usr/share/java/zookeeper.jar),
# or zkServer.sh / zkServer (Homebrew) on PATH. Run as root without any of them, the script
# installs the Debian package `zookeeper`; otherwise it says what to install.
set -euo pipefail

ZK_DIR=${ZK_DIR:-./.zk}
ZK_PORT=${ZK_PORT:-2181}
ZK_PEER_BASE=${ZK_PEER_BASE:-12888}
ZK_ELECTION_BASE=${ZK_ELECTION_BASE:-13888}
ZK_TIMEOUT=${ZK_TIMEOUT:-60}

die() { echo "zookeeper.sh: $*" >&2; exit 1; }
say() { echo "zookeeper.sh: $*" >&2; }

# srvr PORT: print the srvr answer of 127.0.0.1:PORT (empty when nothing answers).
srvr() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && cat <&3" 2>/dev/null || true
}

# mode PORT: standalone, leader, follower, or empty.
mode() { srvr "$1" | sed -n 's/^Mode: //p'; }

# answers PORT: something accepts TCP connections there.
answers() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

INSTALL_HINT="install ZooKeeper 3.8: 'sudo apt-get install zookeeper' (Debian/Ubuntu), 'brew install zookeeper' (macOS), or unpack an Apache ZooKeeper release and set ZOOKEEPER_HOME"

# find_zk sets LAUNCH (a command prefix that takes the zoo.cfg path) or fails.
find_zk() {
  local java=${JAVA_HOME:+$JAVA_HOME/bin/}java
  if [ -n "${ZOOKEEPER_HOME:-}" ]; then
    for s in "$ZOOKEEPER_HOME/bin/zkServer.sh" "$ZOOKEEPER_HOME/bin/zkServer"; do
      if [ -x "$s" ]; then LAUNCH=("$s" start-foreground); return; fi
    done
    local cp
    cp=$(ls "$ZOOKEEPER_HOME"/*.jar "$ZOOKEEPER_HOME"/lib/*.jar 2>/dev/null | tr '\n' ':' || true)
    if [ -n "$cp" ] && command -v "$java" >/dev/null; then
      LAUNCH=("$java" -Xmx256m -XX:+UseSerialGC -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain); return
    fi
    die "ZOOKEEPER_HOME=$ZOOKEEPER_HOME has no bin/zkServer.sh or jars (and java is needed for jars); $INSTALL_HINT"
  fi
  if [ -f /usr/share/java/zookeeper.jar ]; then
    command -v "$java" >/dev/null || die "/usr/share/java/zookeeper.jar found but no java; install a JRE: apt-get install default-jre-headless"
    local cp=/usr/share/java/zookeeper.jar
    [ -f /usr/share/java/slf4j-simple.jar ] && cp=$cp:/usr/share/java/slf4j-simple.jar
    LAUNCH=("$java" -Xmx256m -XX:+UseSerialGC -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain)
    return
  fi
  for s in zkServer.sh zkServer; do
    if command -v "$s" >/dev/null; then LAUNCH=("$(command -v "$s")" start-foreground); return; fi
  done
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "ZooKeeper not found; installing the Debian package zookeeper"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >&2
    [ -f /usr/share/java/zookeeper.jar ] || die "apt-get install zookeeper did not provide /usr/share/java/zookeeper.jar"
    find_zk
    return
  fi
  die "ZooKeeper not found (\$ZOOKEEPER_HOME unset, no /usr/share/java/zookeeper.jar, no zkServer.sh on PATH); $INSTALL_HINT"
}

# write_cfg N CLIENT_PORT PEERS: srvN/zoo.cfg and data/myid.
write_cfg() {
  local n=$1 port=$2 peers=$3 dir
  dir=$(cd "$ZK_DIR" && pwd)/srv$n
  mkdir -p "$dir/data"
  echo "$n" > "$dir/data/myid"
  cat > "$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=20
syncLimit=10
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,conf,wchs,dump,envi
maxClientCnxns=0
EOF
  if [ -n "$peers" ]; then
    printf '%s' "$peers" >> "$dir/zoo.cfg"
    echo "standaloneEnabled=false" >> "$dir/zoo.cfg"
  fi
  echo "$port" > "$dir/port"
}

# launch N: start srvN in the background, detached.
launch() {
  local dir
  dir=$(cd "$ZK_DIR/srv$1" && pwd)
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    say "server $1 already running (pid $(cat "$dir/pid"))"; return
  fi
  JMXDISABLE=true ZOO_LOG_DIR="$dir" setsid "${LAUNCH[@]}" "$dir/zoo.cfg" >> "$dir/server.log" 2>&1 < /dev/null &
  echo $! > "$dir/pid"
}

# wait_serving PORT...: until every port reports a Mode.
wait_serving() {
  local deadline=$((SECONDS + ZK_TIMEOUT)) p
  for p in "$@"; do
    until [ -n "$(mode "$p")" ]; do
      if [ $SECONDS -ge $deadline ]; then
        for f in "$ZK_DIR"/srv*/server.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2 || true; done
        die "ZooKeeper on 127.0.0.1:$p not serving after ${ZK_TIMEOUT}s"
      fi
      sleep 0.1
    done
  done
}

servers() { ls -d "$ZK_DIR"/srv* 2>/dev/null || true; }

cmd_start() {
  if [ -n "$(mode "$ZK_PORT")" ]; then say "a ZooKeeper already serves 127.0.0.1:$ZK_PORT"; return; fi
  answers "$ZK_PORT" && die "127.0.0.1:$ZK_PORT is taken by something that is not a serving ZooKeeper; set ZK_PORT"
  find_zk
  mkdir -p "$ZK_DIR"
  write_cfg 1 "$ZK_PORT" ""
  launch 1
  wait_serving "$ZK_PORT"
  say "standalone ZooKeeper serving on 127.0.0.1:$ZK_PORT (data in $ZK_DIR/srv1); stop with: $0 stop"
}

cmd_ensemble() {
  local ports=() peers="" i
  for i in 1 2 3; do
    ports+=($((ZK_PORT + i - 1)))
    peers+="server.$i=127.0.0.1:$((ZK_PEER_BASE + i - 1)):$((ZK_ELECTION_BASE + i - 1))"$'\n'
  done
  for p in "${ports[@]}"; do
    answers "$p" && die "127.0.0.1:$p is taken; stop what runs there or set ZK_PORT"
  done
  find_zk
  mkdir -p "$ZK_DIR"
  for i in 1 2 3; do write_cfg "$i" "${ports[$((i - 1))]}" "$peers"; done
  for i in 1 2 3; do launch "$i"; done
  wait_serving "${ports[@]}"
  say "ZooKeeper ensemble serving; registry address: zookeeper://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
}

# stop_one DIR SIGNAL
stop_one() {
  local dir=$1 sig=$2 pid i
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    say "stopped $(basename "$dir") (pid $pid)"
  fi
  rm -f "$dir/pid"
}

cmd_stop() {
  local d
  for d in $(servers); do stop_one "$d" TERM; done
}

cmd_status() {
  local d any=1 port m
  for d in $(servers); do
    any=0
    port=$(cat "$d/port" 2>/dev/null || echo "?")
    m=$(mode "$port")
    if [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then
      echo "$(basename "$d") 127.0.0.1:$port pid $(cat "$d/pid") mode ${m:-not-serving}"
    else
      echo "$(basename "$d") 127.0.0.1:$port stopped"
    fi
  done
  if [ $any = 1 ]; then
    m=$(mode "$ZK_PORT")
    if [ -n "$m" ]; then echo "no server started from $ZK_DIR; 127.0.0.1:$ZK_PORT answers (mode $m)"; else echo "no server started from $ZK_DIR"; fi
    return 1
  fi
}

case "${1:-}" in
  start) cmd_start ;;
  ensemble) cmd_ensemble ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  kill) [ -n "${2:-}" ] || die "usage: $0 kill N"; stop_one "$ZK_DIR/srv$2" KILL ;;
  start-member)
    [ -n "${2:-}" ] && [ -d "$ZK_DIR/srv$2" ] || die "usage: $0 start-member N (N from $ZK_DIR/srvN)"
    find_zk; launch "$2"; wait_serving "$(cat "$ZK_DIR/srv$2/port")" ;;
  wipe) cmd_stop; rm -rf "$ZK_DIR"; say "removed $ZK_DIR" ;;
  install) find_zk; say "ZooKeeper ready: ${LAUNCH[*]}" ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
