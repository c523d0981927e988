# bench/lib.sh: the steps the bench scripts share. Source it; it defines functions only.

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# until_ok SECONDS CMD...: runs CMD every 20 ms until it succeeds; fails after SECONDS.
until_ok() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "${0##*/}: gave up after waiting for: $*" >&2
      return 1
    fi
    sleep 0.02
  done
}

# wait_healthy PORT [SECONDS]: waits until the node on PORT answers /health with 200 (once it
# knows a settled leader); 600 s by default, for a restart over a long backlog.
wait_healthy() {
  until_ok "${2:-600}" curl -sf "http://127.0.0.1:$1/health"
}

# single_node_setup: for a script that runs one node on a folder of its own: checks that
# queen-bench is built, makes a temp data folder ($data, removed at exit) and picks a port
# ($port). node_start BIN then starts BIN on them ($pid, killed at exit).
single_node_setup() {
  [[ -x build/bench/queen-bench ]] || { echo "build first: cmake --build build -j2"; exit 2; }
  data=$(mktemp -d)
  port=$(free_port)
  pid=""
  trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
}
node_start() {
  PORT=$port QUEEN_BIND_ADDR=127.0.0.1 QUEEN_RAFT_DIR=$data LOG_LEVEL=warn "$1" &
  pid=$!
}
