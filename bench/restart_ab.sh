#!/usr/bin/env bash
# bench/restart_ab.sh PARTITIONS BIN_A BIN_B [ROUNDS]: the restart of two builds on the same
# data folder, alternated. BIN_A fills PARTITIONS partitions (one message each) on a fresh
# folder; then each round starts BIN_A and BIN_B in turn on it and prints the time to /health
# and the node's peak RSS (VmHWM) at that moment. Both builds must read the folder's format.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${1:?usage: bench/restart_ab.sh PARTITIONS BIN_A BIN_B [ROUNDS]}
a=${2:?BIN_A}
b=${3:?BIN_B}
rounds=${4:-3}
single_node_setup
stop() {
  kill "$pid"
  wait "$pid" || true
}
node_start "$a"
wait_healthy "$port" 20
build/bench/queen-bench --hosts "127.0.0.1:$port" --scenario push --producers 8 --batch 100 \
  --fill 1 --partitions "$n" --duration-s 600 >/dev/null
stop
for _ in $(seq 1 "$rounds"); do
  for bin in "$a" "$b"; do
    t0=$(date +%s%N)
    node_start "$bin"
    wait_healthy "$port" 600
    t1=$(date +%s%N)
    peak_kb=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    stop
    echo "$bin: restart $(((t1 - t0) / 1000000)) ms, peak RSS $((peak_kb / 1024)) MiB"
  done
done
