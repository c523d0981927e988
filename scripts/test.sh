#!/usr/bin/env bash
# Installs what is missing, builds everything in build/, and runs every check:
#   1. ctest: core unit and property tests, the core purity check, the edge's integration
#      tests against the real binary (crash, stress and hardening included, queenctl's
#      too), the wire conformance suite, the simulator's own unit tests (its seed runs are
#      step 2's); then the web console in headless Chromium (tests/browser/run.sh);
#   2. scripts/sim-ci.sh: 300 simulator seeds twice (determinism), every mutant, the
#      regression seeds, its one-node and cluster halves side by side; beside them
#   3. proofs/check.sh: the SPIN models and their mutants;
#   4. scripts/fuzz.sh: each libFuzzer target briefly (its own clang ASan+UBSan build in
#      build-fuzz/);
#   5. scripts/sanitize.sh ci: from that same build, the core unit and property tests and a
#      bounded simulator run (1, 3 and 5 nodes) under ASan+UBSan, beside the ThreadSanitizer
#      build (build-tsan/); then, under TSan, the broker the server tests start and the
#      in-process threaded tests.
#      Any sanitizer report fails the run;
#   6. bench/run.sh smoke: a 10-second push run, so the load generator keeps working; then
#      backlog-1m: the node's RSS per retained message and its restart time, at 1M messages,
#      and backlog-1m-txn: the same with a transactionId in every item (the dedup rings).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo "== test.sh: $* ($(( $(date +%s) - start )) s)"; }

step "install and build"
bash scripts/run.sh --no-start
step "ctest"
# The simulator runs that ctest also registers (determinism, mutants, regressions) are left to
# step 2, which runs the same checks over wider seed ranges.
ctest --test-dir build --output-on-failure -E '^sim_(determinism|cluster|mutant|regressions)'
step "web console in a real browser"
bash tests/browser/run.sh build/server/queen
step "simulator and proofs, side by side"
# Each is one single-threaded process at a time: the simulator's one-node and cluster halves
# and the proofs (about 60, 80 and 95 s of one core) share the two cores; their output follows
# in that order. None depends on timing.
single_log=$(mktemp)
cluster_log=$(mktemp)
bash scripts/sim-ci.sh build/sim/queen-sim single >"$single_log" 2>&1 &
single_pid=$!
bash scripts/sim-ci.sh build/sim/queen-sim cluster >"$cluster_log" 2>&1 &
cluster_pid=$!
if ! command -v spin >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin gcc
fi
proofs_rc=0
bash proofs/check.sh || proofs_rc=$?
sim_rc=0
wait "$single_pid" || sim_rc=$?
wait "$cluster_pid" || sim_rc=$?
cat "$single_log" "$cluster_log"
rm -f "$single_log" "$cluster_log"
((proofs_rc == 0)) || { echo "test.sh: proofs failed"; exit 1; }
((sim_rc == 0)) || { echo "test.sh: simulator failed"; exit 1; }
step "fuzz"
bash scripts/fuzz.sh "${QUEEN_FUZZ_SECONDS:-6}"
step "sanitizers: core tests and simulator under ASan+UBSan, the broker under TSan"
bash scripts/sanitize.sh ci
step "bench smoke"
bash bench/run.sh smoke
bash bench/run.sh backlog-1m  # RSS per retained message and the restart, at 1M messages
bash bench/run.sh backlog-1m-txn  # the same with the rings of named transactionIds
step "done"
