#!/usr/bin/env bash
# Builds and runs the tests under the sanitizers:
#   asan: build-asan/ (gcc, -DQUEEN_SANITIZE=address,undefined): the core tests, the server
#     tests (their `queen` child processes are sanitized too) and 50 simulator seeds. Long:
#     about 45 minutes on 2 cores.
#   asan-core: build-fuzz/ (clang, ASan+UBSan, the tree scripts/fuzz.sh also uses): the core
#     unit and property tests and a bounded simulator run of 1, 3 and 5 nodes. CI runs this.
#   tsan: build-tsan/ (gcc, -DQUEEN_SANITIZE=thread): the broker, run by the server
#     integration tests, and the in-process threaded tests (transport, JWKS refresh).
# Every sanitized process, children included, writes its reports under a reports folder;
# any report, or any failing run, fails the script. Prints the wall time it took.
#
# usage: scripts/sanitize.sh [asan|asan-core|tsan|ci|all]
#   (ci = asan-core, its runs beside the tsan build, then the tsan runs)
#   QUEEN_SANITIZE_ROOT  where build-asan/ and build-tsan/ go (default: the repository)
#   QUEEN_JOBS           parallel compile jobs (default 2)
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
root=${QUEEN_SANITIZE_ROOT:-$(pwd)}
jobs=${QUEEN_JOBS:-2}
start=$(date +%s)
failures=0

fail() { echo "sanitize: FAIL: $*"; failures=$((failures + 1)); }

configure_and_build() {  # folder, sanitizers, targets...
  local dir=$1 sanitizers=$2
  shift 2
  # -g1: line tables for the reports' stacks, without full debug info, which made the build
  # the longest part of CI; -O1 builds about a fifth faster than -O2 and is what the
  # sanitizers' documentation suggests.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
    -DCMAKE_CXX_COMPILER=g++ -DQUEEN_SANITIZE="$sanitizers" >/dev/null || return 1
  local log
  log=$reports/build-$(basename "$dir").log
  cmake --build "$dir" -j"$jobs" --target "$@" >"$log" 2>&1 && return 0
  grep -E 'error|FAILED' "$log" | head -n 20
  return 1
}

run() {  # name, command...
  local name=$1
  shift
  echo "sanitize: $name"
  if ! "$@" >"$reports/$name.out" 2>&1; then
    fail "$name (its test failures, then the tail of its output, follow)"
    grep -A8 -E ': Failure$' "$reports/$name.out" | cut -c1-300 | head -n 80
    tail -n 40 "$reports/$name.out"
  fi
}

check_reports() {  # prefix
  local found
  found=$(find "$reports" -name "$1.*" -size +0 2>/dev/null)
  [[ -z "$found" ]] && return 0
  fail "sanitizer reports: $found"
  for f in $found; do head -n 60 "$f"; done
}

asan() {
  local dir=$root/build-asan
  configure_and_build "$dir" address,undefined queen_core_tests queen_edge_tests \
    queen_threaded_tests queen_server_tests queen-sim ||
    { fail "asan build"; return; }
  export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
  run asan-core "$dir/tests/queen_core_tests"
  run asan-edge "$dir/tests/server/queen_edge_tests"
  run asan-threaded "$dir/tests/server/queen_threaded_tests"
  run asan-server "$dir/tests/server/queen_server_tests"
  run asan-sim "$dir/sim/queen-sim" --seeds 1-50 --quiet
  unset ASAN_OPTIONS UBSAN_OPTIONS
  check_reports asan
  check_reports ubsan
}

asan_core_build() {
  QUEEN_JOBS=$jobs bash scripts/fuzz.sh --build-only >"$reports/build-fuzz.log" 2>&1 && return 0
  grep -E 'error|FAILED' "$reports/build-fuzz.log" | head -n 20
  return 1
}

asan_core_run() {
  local dir=build-fuzz
  export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1"
  run asan-core "$dir/tests/queen_core_tests"
  run asan-sim1 "$dir/sim/queen-sim" --seeds 1-50 --quiet
  run asan-sim3 "$dir/sim/queen-sim" --nodes 3 --seeds 1-20 --quiet
  run asan-sim5 "$dir/sim/queen-sim" --nodes 5 --seeds 1-5 --quiet
  unset ASAN_OPTIONS UBSAN_OPTIONS
  check_reports asan
  check_reports ubsan
}

asan_core() {
  asan_core_build || { fail "asan-core build"; return; }
  asan_core_run
}

tsan_build() {
  local dir=$root/build-tsan
  # Sanitized: the broker and the in-process threaded tests. The integration tests come from
  # the main tree (built here if need be) and start the sanitized broker: ThreadSanitizer
  # watches the broker's threads, not the test clients'. The edge's single-threaded unit
  # tests (queen_edge_tests) are left out: it would find nothing there.
  configure_and_build "$dir" thread queen queen_threaded_tests || { fail "tsan build"; return 1; }
  if [[ -f build/CMakeCache.txt ]]; then
    cmake --build build -j"$jobs" --target queen_server_tests >"$reports/build-main.log" 2>&1
  else
    bash scripts/run.sh --no-start >"$reports/build-main.log" 2>&1
  fi || { fail "build of build/tests/server/queen_server_tests"; return 1; }
}

tsan_run() {
  local dir=$root/build-tsan
  export TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=1:second_deadlock_stack=1"
  run tsan-threaded "$dir/tests/server/queen_threaded_tests"
  QUEEN_TEST_BINARY=$dir/server/queen run tsan-server build/tests/server/queen_server_tests
  unset TSAN_OPTIONS
  check_reports tsan
}

tsan() { tsan_build && tsan_run; }

# CI: the ASan runs are single-threaded and timing-free, so they run beside the TSan build;
# the TSan runs (timed integration tests) start once both are done.
ci() {
  asan_core_build || { fail "asan-core build"; tsan; return; }
  local log=$reports/asan-core-runs.log pid asan_failures=0
  (failures=0; asan_core_run; exit "$failures") >"$log" 2>&1 &
  pid=$!
  tsan_build
  local built=$?
  wait "$pid" || asan_failures=$?
  cat "$log"
  failures=$((failures + asan_failures))
  ((built == 0)) && tsan_run
}

reports=$(mktemp -d /tmp/queen-sanitize-XXXXXX)
case "$mode" in
  asan) asan ;;
  asan-core) asan_core ;;
  tsan) tsan ;;
  ci) ci ;;
  all) asan; tsan ;;
  *) echo "usage: scripts/sanitize.sh [asan|asan-core|tsan|ci|all]"; exit 2 ;;
esac
elapsed=$(($(date +%s) - start))
echo "sanitize: $mode took ${elapsed}s wall time (reports and outputs in $reports)"
if ((failures)); then
  echo "sanitize: $failures failure(s)"
  exit 1
fi
echo "sanitize: clean"
