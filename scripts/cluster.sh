#!/usr/bin/env bash
# Starts a 3-node cluster on loopback for trying replication out: builds like scripts/run.sh
# (installing what is missing), then runs three nodes, each with its own data folder under
# ./data/cluster/n<id> and its log in ./data/cluster/n<id>.log:
#   node 1: HTTP 127.0.0.1:6632, raft 127.0.0.1:7401
#   node 2: HTTP 127.0.0.1:6642, raft 127.0.0.1:7402
#   node 3: HTTP 127.0.0.1:6652, raft 127.0.0.1:7403
# Every node serves clients (a follower forwards prepared commands to the leader). Ctrl-C
# stops all three.
#   scripts/cluster.sh            build, start, wait
#   QUEEN_RAFT_TOKEN=secret scripts/cluster.sh   peers must present the token
# Other QUEEN_* variables pass through to every node (README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/run.sh --no-start

peers="1=127.0.0.1:7401/127.0.0.1:6632,2=127.0.0.1:7402/127.0.0.1:6642"
peers+=",3=127.0.0.1:7403/127.0.0.1:6652"
pids=()
stop_all() {
  trap - INT TERM EXIT
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop_all INT TERM EXIT

for id in 1 2 3; do
  dir=data/cluster/n$id
  mkdir -p "$dir"
  QUEEN_RAFT_NODE_ID=$id QUEEN_RAFT_PEERS=$peers QUEEN_RAFT_DIR=$dir \
    QUEEN_BIND_ADDR=127.0.0.1 PORT=$((6622 + 10 * id)) \
    build/server/queen >"data/cluster/n$id.log" 2>&1 &
  pids+=($!)
done
echo "cluster.sh: nodes on http://127.0.0.1:6632, :6642, :6652 (logs in data/cluster/)"
for port in 6632 6642 6652; do
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
done
curl -s http://127.0.0.1:6632/health; echo
wait "${pids[@]}"
