#!/usr/bin/env bash
# Runs one benchmark scenario against a fresh node (or a fresh 3-node cluster on loopback)
# and appends the result.
#   bench/run.sh [--cluster] SCENARIO [queen-bench options...]
# SCENARIO: push | inout | txn | partitions | queues | queues-shared | hot | fill-1m |
#           fill-10m | smoke (a 10 s push run for CI, then the memory per retained message
#           of 1M messages from queen-memory-bench).
# hot: the push scenario into one partition for 60 s, so its dedup window fills up.
# queues-shared: queues with the nodes' queue logs shared, QUEEN_QLOG_SHARDS=4 unless set.
# fill-1m / fill-10m push one message into each of 1M / 10M partitions of one queue and
# report the time it took and the node's peak RSS; on one node also what backlog-50m reports
# (RSS per partition held, peak Pss with checkpoint copies, restart time).
# backlog-50m: push 50M messages (BACKLOG_MESSAGES to change it) into one queue of 200
# partitions and consume none; then print the node's RSS per retained message (RSS after the
# push less RSS before it), the peak Pss of the node and its checkpoint copies sampled every
# 0.5 s, the time a restart takes until /health answers, beside the first start's, and how
# fast the first 200k messages after it are pushed (single node only). Its pushes name no
# transactionId, so no partition looks one up and none builds a dedup ring: the figure is of
# the append rows and the log's memory, without rings. backlog-1m: the same with 1M
# messages (the smoke run's memory figure). backlog-50m-txn, backlog-1m-txn: the same with
# a transactionId named in every item, so each partition holds a dedup ring of its window
# (the bytes the rings hold, queen_dedup_ring_bytes, are printed too). BACKLOG_RESTART_ENV:
# settings for the restart only, e.g. "QUEEN_RAFT_DEDUP_FRONT_MB=16" (a bound lowered across
# the restart).
# --cluster: three nodes; the load generator's connections go round-robin over all of them
# (followers forward to the leader), the label gets a "cluster-" prefix, the CPU time is the
# three nodes' sum and the RSS the largest.
# Needs a Release build in build/ (scripts/run.sh or scripts/test.sh makes one). Each node
# gets a fresh data folder under a temp dir and free ports; CPU time and peak RSS are added to
# the result line appended to bench/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
nodes=1
if [[ ${1:-} == --cluster ]]; then
  nodes=3
  shift
fi
scenario=${1:?usage: bench/run.sh [--cluster] SCENARIO [options]}
shift || true
bin=${QUEEN_BIN:-build/server/queen}  # QUEEN_BIN: another build to compare
unset QUEEN_BIN  # read; the broker would warn of it as a setting it does not know
bench=build/bench/queen-bench
[[ -x $bin && -x $bench ]] || { echo "build first: cmake --build build -j2"; exit 2; }
if [[ $scenario == queues-shared ]]; then export QUEEN_QLOG_SHARDS=${QUEEN_QLOG_SHARDS:-4}; fi
data=$(mktemp -d)
pids=()
http_ports=()
raft_ports=()
for i in $(seq 1 "$nodes"); do
  http_ports+=("$(free_port)")
  raft_ports+=("$(free_port)")
done
peers=""
if ((nodes > 1)); then
  for i in $(seq 1 "$nodes"); do
    peers+="${peers:+,}$i=127.0.0.1:${raft_ports[i - 1]}/127.0.0.1:${http_ports[i - 1]}"
  done
fi
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT
# launch_node I: starts node I (1-based) on its ports and folder; its pid goes into pids[I-1].
launch_node() {
  PORT=${http_ports[$1 - 1]} QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_DIR=$data/n$1 LOG_LEVEL=warn \
    QUEEN_RAFT_NODE_ID=$1 QUEEN_RAFT_PEERS=$peers "$bin" &
  pids[$1 - 1]=$!
}
launched_ns=$(date +%s%N)
for i in $(seq 1 "$nodes"); do launch_node "$i"; done
hosts=""
for i in $(seq 1 "$nodes"); do
  hosts+="${hosts:+,}127.0.0.1:${http_ports[i - 1]}"
  wait_healthy "${http_ports[i - 1]}"
done
fresh_start_ns=$(($(date +%s%N) - launched_ns))
case $scenario in
  push) args=(--scenario push --producers 8 --batch 100 --duration-s 20) ;;
  inout) args=(--scenario inout --producers 4 --consumers 4 --batch 100 --pop-partitions 8
    --duration-s 20) ;;
  txn) args=(--scenario txn --producers 4 --consumers 32 --batch 10 --duration-s 20) ;;
  partitions) args=(--scenario push --producers 8 --batch 100 --partitions 10000 --duration-s 20) ;;
  queues | queues-shared) args=(--scenario push --producers 8 --batch 100 --queues 100
    --duration-s 20) ;;
  fill-1m) args=(--scenario push --producers 8 --batch 100 --fill 1 --partitions 1000000
    --duration-s 600) ;;
  fill-10m) args=(--scenario push --producers 8 --batch 100 --fill 1 --partitions 10000000
    --duration-s 3600) ;;
  hot) args=(--scenario push --producers 8 --batch 100 --partitions 1 --duration-s 60) ;;
  smoke) args=(--scenario push --producers 2 --batch 100 --duration-s 10) ;;
  backlog-50m | backlog-1m | backlog-50m-txn | backlog-1m-txn)
    count=${BACKLOG_MESSAGES:-$([[ $scenario == backlog-1m* ]] && echo 1000000 || echo 50000000)}
    txn_ids=$([[ $scenario == *-txn ]] && echo 1 || echo 0)
    args=(--scenario push --producers 16 --batch 100 --messages "$count" --duration-s 7200
      --txn-ids "$txn_ids") ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
label=$scenario
if ((nodes > 1)); then label=cluster-$scenario; fi
# On one node, fill-* reports its memory and restart as backlog-* does.
retained=false
if [[ $scenario == backlog-* ]]; then
  ((nodes == 1)) || { echo "$scenario runs on one node"; exit 2; }
  retained=true
fi
if [[ $scenario == fill-* ]] && ((nodes == 1)); then retained=true; fi
if $retained; then
  rss_before_kb=$(awk '/VmRSS/ {print $2}' "/proc/${pids[0]}/status")
  python3 bench/pss_peak.py "${pids[0]}" > "$data/pss_peak" &
  sampler=$!
fi
line=$("$bench" --hosts "$hosts" --label "$label" "${args[@]}" "$@")
ticks=0
rss_kb=0
for pid in "${pids[@]}"; do
  ticks=$((ticks + $(awk '{print $14+$15}' "/proc/$pid/stat")))
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  if ((rss > rss_kb)); then rss_kb=$rss; fi
done
hz=$(getconf CLK_TCK)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
line=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(server_cpu_s=int(sys.argv[2])/int(sys.argv[3]), server_peak_rss_mb=int(sys.argv[4])/1024, commit=sys.argv[5]); print(json.dumps(r))' "$line" "$ticks" "$hz" "$rss_kb" "$commit")
if ! $retained; then
  echo "$line" >> bench/results.jsonl
  echo "$line"
else  # the line is written with the backlog's figures
  kill -INT "$sampler"
  wait "$sampler" || true
  rss_after_kb=$(awk '/VmRSS/ {print $2}' "/proc/${pids[0]}/status")
  ring_bytes=$(curl -sf "http://127.0.0.1:${http_ports[0]}/metrics/prometheus" |
    awk '$1 == "queen_dedup_ring_bytes" {print $2}')
  stop_begin_ns=$(date +%s%N)  # SIGTERM: the node writes a full checkpoint before it exits
  kill "${pids[0]}"
  wait "${pids[0]}" 2>/dev/null || true
  start_ns=$(date +%s%N)
  stop_ns=$((start_ns - stop_begin_ns))
  # shellcheck disable=SC2086  # a list of NAME=value words
  [[ -n ${BACKLOG_RESTART_ENV:-} ]] && export ${BACKLOG_RESTART_ENV}
  launch_node 1
  wait_healthy "${http_ports[0]}"
  restart_ns=$(($(date +%s%N) - start_ns))
  rss_restarted_kb=$(awk '/VmRSS/ {print $2}' "/proc/${pids[0]}/status")
  restart_peak_kb=$(awk '/VmHWM/ {print $2}' "/proc/${pids[0]}/status")
  # The first pushes after the restart build each partition's dedup ring from the records.
  first=$("$bench" --hosts "$hosts" --label "$label-after-restart" --scenario push \
    --producers 16 --batch 100 --messages 200000 --duration-s 600 --txn-ids "${txn_ids:-0}")
  python3 bench/backlog_summary.py "$line" "$rss_before_kb" "$rss_after_kb" \
    "$(cat "$data/pss_peak")" "$restart_ns" "$rss_restarted_kb" "$fresh_start_ns" "$first" \
    "$stop_ns" "$restart_peak_kb" "${ring_bytes:-0}" |
    tee -a bench/results.jsonl
fi
if [[ $scenario == smoke ]]; then
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["pushed_per_s"] > 0 and r["push_errors"] == 0 else 1)' "$line"
  # What a retained message costs in memory (heap per dedup row, 1M messages), so a regression
  # shows in the smoke run's output.
  build/bench/queen-memory-bench 1000000 100000
fi
