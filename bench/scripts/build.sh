#!/bin/bash
# build.sh OUTDIR [GIT-REF]
# Builds the bench binaries into OUTDIR: OUTDIR/bench, which links every
# system (the parent of `make bench-peers`, and the fallback), and for each
# system OUTDIR/bench-SYSTEM, built with the tags benchone,bench_SYSTEM so it
# links that system alone (its server and load clients run it). With
# GIT-REF, builds that commit of this repository (git archive into a
# temporary directory) instead of the working tree: for A/B runs.
# Two builds at a time; GO names the go command (default: go).
set -eu
out=$1; ref=${2:-}
GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
if [ -n "$ref" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  git -C "$src" archive "$ref" | tar -x -C "$tmp"
  src=$tmp
fi
# A system's tag is its name with "-" as "_" (minidubbo-borrow: bench_minidubbo_borrow).
systems="raw netrpc rpcx kitex grpc minidubbo minidubbo-borrow"
printf '%s\n' all $systems | xargs -P 2 -I{} sh -c '
  if [ {} = all ]; then exec "$0" -C "$1/bench" build -mod=mod -o "$2/bench" .; fi
  exec "$0" -C "$1/bench" build -mod=mod -tags "benchone,bench_$(echo {} | tr - _)" -o "$2/bench-{}" .' "$GO" "$src" "$out"
