#!/usr/bin/env bash
# Runs one benchmark scenario against a fresh single node and appends the result.
#   bench/run.sh SCENARIO [queen-bench options...]
# SCENARIO: push | inout | txn | partitions | queues | smoke (a 10 s push run for CI).
# Needs a Release build in build/ (scripts/run.sh or scripts/test.sh makes one). The node
# gets a fresh data folder under a temp dir and a free port; its CPU time and peak RSS are
# added to the result line appended to bench/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:?usage: bench/run.sh SCENARIO [options]}
shift || true
bin=build/server/queen
bench=build/bench/queen-bench
[[ -x $bin && -x $bench ]] || { echo "build first: cmake --build build -j2"; exit 2; }
data=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT=$port QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_DIR=$data/raft LOG_LEVEL=warn "$bin" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
case $scenario in
  push) args=(--scenario push --producers 8 --batch 100 --duration-s 20) ;;
  inout) args=(--scenario inout --producers 4 --consumers 4 --batch 100 --duration-s 20) ;;
  txn) args=(--scenario txn --producers 2 --consumers 8 --batch 10 --duration-s 20) ;;
  partitions) args=(--scenario push --producers 8 --batch 100 --partitions 10000 --duration-s 20) ;;
  queues) args=(--scenario push --producers 8 --batch 100 --queues 100 --duration-s 20) ;;
  smoke) args=(--scenario push --producers 2 --batch 100 --duration-s 10) ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
line=$("$bench" --port "$port" --label "$scenario" "${args[@]}" "$@")
ticks=$(awk '{print $14+$15}' /proc/$pid/stat)
rss_kb=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
hz=$(getconf CLK_TCK)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
line=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(server_cpu_s=int(sys.argv[2])/int(sys.argv[3]), server_peak_rss_mb=int(sys.argv[4])/1024, commit=sys.argv[5]); print(json.dumps(r))' "$line" "$ticks" "$hz" "$rss_kb" "$commit")
echo "$line" >> bench/results.jsonl
echo "$line"
if [[ $scenario == smoke ]]; then
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["pushed_per_s"] > 0 and r["push_errors"] == 0 else 1)' "$line"
fi
