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
