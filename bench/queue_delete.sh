#!/usr/bin/env bash
# bench/queue_delete.sh [PARTITIONS]: how long deleting a queue takes when every one of its
# partitions has a consumer group's cursor. One node on a fresh folder; PARTITIONS (40000 by
# default) partitions get one message each, a group seeks to their start (a cursor on each),
# and the DELETE of the queue is timed. QUEEN_BIN: another build to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${1:-40000}
bin=${QUEEN_BIN:-build/server/queen}
unset QUEEN_BIN  # read; the broker would warn of it as a setting it does not know
[[ -x $bin && -x build/bench/queen-bench ]] || { echo "build first: cmake --build build -j2"; exit 2; }
data=$(mktemp -d)
port=$(free_port)
PORT=$port QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_DIR=$data LOG_LEVEL=warn "$bin" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
wait_healthy "$port" 10
build/bench/queen-bench --hosts "127.0.0.1:$port" --scenario push --producers 8 --batch 100 \
  --fill 1 --partitions "$n" --duration-s 600 >/dev/null
curl -sf -X POST -H 'content-type: application/json' -d '{"timestamp":"2020-01-01T00:00:00Z"}' \
  "http://127.0.0.1:$port/api/v1/consumer-groups/g/queues/bench/seek" >/dev/null
curl -sf -o /dev/null -w "queue delete with $n partitions and cursors: %{time_total} s\n" \
  -X DELETE "http://127.0.0.1:$port/api/v1/resources/queues/bench"
