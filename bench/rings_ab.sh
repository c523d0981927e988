#!/usr/bin/env bash
# bench/rings_ab.sh [MESSAGES] [ROUNDS] [stop|kill]: what the dedup rings kept on disk save
# the next start. Fills one folder with MESSAGES (50M) messages in 200 partitions, each
# naming its transactionId (so each partition holds a ring), then ends the node: `stop`
# (SIGTERM: the stop writes the rings beside its checkpoint) or `kill` (SIGKILL: the newest
# rings file a store checkpoint wrote is what is left; it is kept aside and put back before
# each start with it). Each round then starts the node twice on that folder: with the rings
# file, and with it removed (the rings then warm from the message records at each
# partition's first push). Prints the time to /health, RSS, how fast the first 200k pushes
# go and the stop's time.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${1:-50000000}
rounds=${2:-3}
ending=${3:-stop}
single_node_setup
stop() {
  local t0
  t0=$(date +%s%N)
  if [[ $ending == kill ]]; then kill -9 "$pid"; else kill "$pid"; fi
  wait "$pid" || true
  echo "  stop $((($(date +%s%N) - t0) / 1000000)) ms," \
    "rings file $(find "$data/store" -name 'rings.*' -printf '%s') bytes"
}
push() {
  build/bench/queen-bench --hosts "127.0.0.1:$port" --scenario push --producers 16 \
    --batch 100 --messages "$1" --duration-s 7200 --txn-ids 1 2>&1 >/dev/null | tail -1
}
node_start build/server/queen
wait_healthy "$port" 20
echo "fill: $(push "$n")"
echo "RSS after the fill: $(($(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024)) MiB"
stop
saved=$(mktemp -d)
if [[ $ending == kill ]]; then cp "$data"/store/rings.* "$saved"/; fi
for r in $(seq 1 "$rounds"); do
  for mode in rings none; do
    if [[ $mode == none ]]; then
      rm -f "$data"/store/rings.*
    elif [[ $ending == kill ]]; then
      rm -f "$data"/store/rings.*
      cp "$saved"/rings.* "$data"/store/
    fi
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
rm -rf "$saved"
