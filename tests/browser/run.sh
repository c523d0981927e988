#!/usr/bin/env bash
# The web console's real-browser test: starts a fresh Queen node on a free port and a temporary
# data folder, seeds it over the HTTP API, runs console_test.mjs in headless Chromium against it,
# and stops the node on exit.
#
#   bash tests/browser/run.sh [path-to-queen-binary]     (default: build/server/queen)
#
# Environment:
#   SCREENSHOTS=<dir>       save a 1280x800 PNG of each page into <dir>
#   CHROMIUM=<path>         the browser (default /usr/bin/chromium; apt-get install -y chromium)
#   CONSOLE_FROM_DISK=1     test server/console/ as it is on disk (QUEEN_CONSOLE_DIR) instead of
#                           the copy compiled into the binary (what users get; the default)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:-$repo/build/server/queen}"
if [[ "$bin" != /* ]]; then
  if [[ $# -ge 1 ]]; then bin="$PWD/$bin"; else bin="$repo/$bin"; fi
fi

fail() {
  echo "run.sh: $*" >&2
  exit 1
}

[[ -x "$bin" ]] || fail "no Queen binary at $bin (build it, or pass its path)"
command -v node >/dev/null || fail "node is required"
command -v curl >/dev/null || fail "curl is required"
export CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$CHROMIUM" && "$CHROMIUM" == /usr/bin/chromium && $(id -u) -eq 0 ]]; then
  echo "run.sh: installing chromium"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
[[ -x "$CHROMIUM" ]] || fail "no Chromium at $CHROMIUM (apt-get install -y chromium)"
if [[ ! -d "$here/node_modules/playwright-core" ]]; then
  (cd "$here" && npm ci --no-audit --no-fund >/dev/null) || fail "npm ci failed in $here"
fi

port="$(node -e 'const s=require("net").createServer();
s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();});')"
data="$(mktemp -d "${TMPDIR:-/tmp}/queen-console-test.XXXXXX")"
log="$data/queen.log"
pid=""

cleanup() {
  local rc=$?
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -f "$log" ]]; then
    echo "--- last lines of the node's log ---" >&2
    tail -n 20 "$log" >&2 || true
  fi
  rm -rf "$data"
  exit "$rc"
}
trap cleanup EXIT

console_env=()
[[ "${CONSOLE_FROM_DISK:-0}" == 1 ]] && console_env=(QUEEN_CONSOLE_DIR="$repo/server/console")
env PORT="$port" QUEEN_RAFT_DIR="$data/raft" QUEEN_STATUS_SAMPLE_MS=200 "${console_env[@]}" \
  "$bin" >"$log" 2>&1 &
pid=$!

base="http://127.0.0.1:$port"
deadline=$((SECONDS + 30))
until [[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health" || true)" == 200 ]]; do
  kill -0 "$pid" 2>/dev/null || fail "the node exited while starting"
  ((SECONDS < deadline)) || fail "no healthy node at $base within 30 s"
  sleep 0.1
done
echo "node up at $base (pid $pid, data $data)"

# ---------------------------------------------------------------- seeding

# call METHOD PATH [BODY] [EXPECTED_STATUS...]: the body of the answer on stdout.
call() {
  local method="$1" path="$2" body="${3:-}"
  shift 3 || shift $#
  local want=("${@:-200}") out status
  out="$(curl -s -X "$method" -H 'Content-Type: application/json' ${body:+--data-binary "$body"} \
    -w '\n%{http_code}' "$base$path")"
  status="${out##*$'\n'}"
  out="${out%$'\n'*}"
  local ok=0 w
  for w in "${want[@]}"; do [[ "$status" == "$w" ]] && ok=1; done
  ((ok)) || fail "$method $path answered $status, expected ${want[*]}: $out"
  printf '%s' "$out"
}

# json EXPR: evaluates EXPR over the JSON on stdin (as `d`) and prints the result.
json() {
  node -e 'let t="";process.stdin.on("data",c=>t+=c).on("end",()=>{const d=JSON.parse(t);
    const v=('"$1"');process.stdout.write(typeof v==="string"?v:JSON.stringify(v));});'
}

# acks POP_JSON STATUS FIRST COUNT: acks messages [FIRST, FIRST+COUNT) of a pop answer.
acks() {
  local popped="$1" status="$2" first="$3" count="$4" i body
  for ((i = first; i < first + count; i++)); do
    body="$(printf '%s' "$popped" | json "JSON.stringify({
      transactionId:d.messages[$i].transactionId, partitionId:d.messages[$i].partitionId,
      leaseId:d.leaseId, consumerGroup:d.consumerGroup,
      status:'$status', error:'$status' === 'dlq' ? 'card declined' : undefined})")"
    call POST /api/v1/ack "$body" 200 >/dev/null
  done
}

call POST /api/v1/configure '{"queue":"orders","namespace":"shop","task":"billing",
  "options":{"leaseTime":30,"retryLimit":3}}' >/dev/null
call POST /api/v1/configure '{"queue":"fanout","namespace":"shop","task":"events"}' >/dev/null

items="$(node -e 'const out=[];for(let i=0;i<30;i++)out.push({queue:"orders",partition:"p"+(i%3),
  payload:{orderId:1000+i,amount:(i+1)*5,currency:"EUR",lines:[{sku:"sku-"+i,qty:1+(i%4)}]}});
  process.stdout.write(JSON.stringify({items:out}));')"
call POST /api/v1/push "$items" 201 >/dev/null

items="$(node -e 'const out=[];for(let i=0;i<300;i++)out.push({queue:"fanout",
  partition:"tenant-"+String(i).padStart(3,"0"),payload:{tenant:i,event:"signup"}});
  process.stdout.write(JSON.stringify({items:out}));')"
call POST /api/v1/push "$items" 201 >/dev/null

# A name that is markup: the console must show it as text.
call POST /api/v1/push '{"items":[{"queue":"xss<b>bold<b>","payload":{"html":"<i>x</i>"}}]}' \
  201 >/dev/null

call POST /api/v1/push '{"items":[{"queue":"payments","payload":{"amount":10}},
  {"queue":"payments","payload":{"amount":20}},{"queue":"payments","payload":{"amount":30}},
  {"queue":"payments","payload":{"amount":40}}]}' 201 >/dev/null

# The group reads orders from the start and acks 12; queue mode dead-letters three payments.
popped="$(call GET \
  '/api/v1/pop/queue/orders?batch=12&wait=false&consumerGroup=analytics&subscriptionMode=all')"
acks "$popped" completed 0 "$(printf '%s' "$popped" | json 'd.messages.length')"
# A group that read (auto-acked) over a hundred of fanout's partitions: its detail pages.
for _ in 1 2 3; do
  call GET "/api/v1/pop/queue/fanout?batch=1000&partitions=64&wait=false&autoAck=true\
&consumerGroup=scan&subscriptionMode=all" '' 200 204 >/dev/null
done
popped="$(call GET '/api/v1/pop/queue/payments?batch=4&wait=false')"
[[ "$(printf '%s' "$popped" | json 'd.messages.length')" == 4 ]] || fail "payments pop: $popped"
acks "$popped" dlq 0 3
acks "$popped" completed 3 1

call PUT /api/v1/kv/app/greeting '{"value":{"hello":"world","count":3},"forever":true}' >/dev/null
for i in $(seq 1 60); do
  call PUT "/api/v1/kv/app/user.$(printf %02d "$i")" "{\"value\":$i,\"forever\":true}" >/dev/null
done
call POST /api/v1/timers '{"operations":[{"op":"schedule","queue":"orders","timerKey":"reminder-1",
  "delayMs":3600000},{"op":"schedule","queue":"orders","timerKey":"reminder-2",
  "delayMs":7200000}]}' >/dev/null
echo "seeded: orders (30), fanout (300 partitions), payments (3 dead letters), KV, timers"

# ---------------------------------------------------------------- the browser test

node "$here/console_test.mjs" "$base"
