#!/usr/bin/env bash
# Queen beside its durable peer on this machine: Redis 7 Streams with appendonly yes and
# appendfsync always. Each round starts a fresh redis-server and a fresh node (each on its own
# temp folder and free port), runs the same queen-bench scenario against each (the order
# alternates by round, so drift hits both), and stops them. Prints every round, the medians
# and the ratio Queen / Redis; appends each run to bench/results.jsonl.
#   bench/compare.sh SCENARIO [ROUNDS]      (ROUNDS: 5; COMPARE_SECONDS: 10 per run)
# SCENARIO: push        16 connections, 100 messages a round trip, closed loop
#           hot         push, all into one partition (one stream)
#           inout       4 producers and 4 consumers (pop/XREADGROUP, async ack/XACK)
#           inout-16x8  16 producers and 8 consumers
#           open        in+out at a fixed offered rate (COMPARE_RATE, 40000 msg/s)
# Payloads are the same 256-byte JSON for both. Needs a Release build (scripts/run.sh) and
# Debian's redis-server, installed here when missing.
# COMPARE_BASE_BIN=path: the peer is that build of queen instead (an alternated A/B of a
# change; its runs are labelled "base").
# COMPARE_TXN_IDS=1: the pushes to Queen name a transactionId per item, a UUIDv7 as the Queen
# SDKs send (each is looked up in its partition's dedup window); Redis's XADD has no such field.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
scenario=${1:?usage: bench/compare.sh push|hot|inout|inout-16x8|open [ROUNDS]}
rounds=${2:-5}
seconds=${COMPARE_SECONDS:-10}
bin=${QUEEN_BIN:-build/server/queen}
unset QUEEN_BIN  # read; the broker would warn of it as a setting it does not know
bench=build/bench/queen-bench
[[ -x $bin && -x $bench ]] || { echo "build first: scripts/run.sh --no-start"; exit 2; }
if ! command -v redis-server >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi
case $scenario in
  push) args=(--scenario push --producers 16 --batch 100) ;;
  hot) args=(--scenario push --producers 16 --batch 100 --partitions 1) ;;
  inout) args=(--scenario inout --producers 4 --consumers 4 --batch 100 --pop-partitions 8) ;;
  inout-16x8) args=(--scenario inout --producers 16 --consumers 8 --batch 100
    --pop-partitions 8) ;;
  open) args=(--scenario inout --producers 8 --consumers 4 --batch 100 --pop-partitions 8
    --rate "${COMPARE_RATE:-40000}") ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
args+=(--duration-s "$seconds" --payload-bytes 256)

data=$(mktemp -d)
pid=""
stop_server() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
}
trap 'stop_server; rm -rf "$data"' EXIT

run_redis() {  # prints queen-bench's result line
  local port dir
  port=$(free_port)
  dir=$(mktemp -d "$data/redis.XXXX")
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes \
    --appendfsync always --save '' --daemonize no --logfile "$dir/redis.log" &
  pid=$!
  until_ok 15 redis-cli -p "$port" ping
  "$bench" --target redis --port "$port" --label "compare-$scenario-redis" "${args[@]}"
  stop_server
}

run_queen() {  # [BIN] [LABEL]
  local port dir
  port=$(free_port)
  dir=$(mktemp -d "$data/queen.XXXX")
  PORT=$port QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_DIR=$dir LOG_LEVEL=warn "${1:-$bin}" &
  pid=$!
  wait_healthy "$port" 15
  "$bench" --target queen --port "$port" --label "compare-$scenario-${2:-queen}" "${args[@]}" \
    --txn-ids "${COMPARE_TXN_IDS:-0}"
  stop_server
}

run_base() { run_queen "$COMPARE_BASE_BIN" base; }

peer=redis
if [[ -n ${COMPARE_BASE_BIN:-} ]]; then
  [[ -x $COMPARE_BASE_BIN ]] || { echo "COMPARE_BASE_BIN is not an executable"; exit 2; }
  peer=base
fi

results=()
for round in $(seq 1 "$rounds"); do
  if ((round % 2)); then order=(queen "$peer"); else order=("$peer" queen); fi
  for target in "${order[@]}"; do
    line=$("run_$target")
    line=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["round"]=int(sys.argv[2]); r["target"]=sys.argv[3]; print(json.dumps(r))' "$line" "$round" "$target")
    echo "$line" >> bench/results.jsonl
    results+=("$line")
  done
done
printf '%s\n' "${results[@]}" | python3 bench/compare_summary.py
