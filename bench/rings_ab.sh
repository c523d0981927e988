#!/usr/bin/env bash
# bench/rings_ab.sh [MESSAGES] [ROUNDS]: what a graceful stop's dedup rings save the next
# start. Fills one folder with MESSAGES (50M) messages in 200 partitions, stops the node
# (SIGTERM), then each round starts it twice on that folder: with the rings file the stop
# wrote, and with it removed (the rings then warm from the message records at each
# partition's first push). Prints the time to /health, RSS, how fast the first 200k pushes
# go and the stop's time.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${1:-50000000}
rounds=${2:-3}
single_node_setup
stop() {
  local t0
  t0=$(date +%s%N)
  kill "$pid"
  wait "$pid" || true
  echo "  stop $((($(date +%s%N) - t0) / 1000000)) ms," \
    "rings file $(find "$data/store" -name 'rings.*' -printf '%s') bytes"
}
push() {
  build/bench/queen-bench --hosts "127.0.0.1:$port" --scenario push --producers 16 \
    --batch 100 --messages "$1" --duration-s 7200 2>&1 >/dev/null | tail -1
}
node_start build/server/queen
wait_healthy "$port" 20
echo "fill: $(push "$n")"
echo "RSS after the fill: $(($(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024)) MiB"
stop
for r in $(seq 1 "$rounds"); do
  for mode in rings none; do
    [[ $mode == none ]] && rm -f "$data"/store/rings.*
    t0=$(date +%s%N)
    node_start build/server/queen
    wait_healthy "$port" 600
    t1=$(date +%s%N)
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    echo "round $r, $mode: restart $(((t1 - t0) / 1000000)) ms, RSS $((rss / 1024)) MiB"
    echo "  first 200k: $(push 200000)"
    stop
  done
done
