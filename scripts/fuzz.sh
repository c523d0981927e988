#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) in build-fuzz/ and runs each one over
# its seed corpus from fuzz/corpus/. Usage: scripts/fuzz.sh [seconds per target, default 20]
# A long run: scripts/fuzz.sh 3600. Targets: the qlog record and entry decoders, the Raft
# message decoder, the recovery scan, HTTP parsing and routing (http_fuzz) and every JSON
# command parser of the edge (json_fuzz).
# The same tree holds the core tests and the simulator under ASan+UBSan (scripts/sanitize.sh
# asan-core runs them); `scripts/fuzz.sh --build-only` builds the tree and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
need=()
command -v clang++ >/dev/null || need+=(clang)
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
# -O1 with line tables only: the reports' stacks keep their lines, and the tree builds about a
# fifth faster than -O2 with full debug info (this build is a large part of CI).
cmake -S . -B build-fuzz -G Ninja -DQUEEN_FUZZ=ON -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"${QUEEN_JOBS:-2}"
[[ "$seconds" == "--build-only" ]] && exit 0
for target in record_fuzz raft_message_fuzz recovery_fuzz http_fuzz json_fuzz; do
  work=$(mktemp -d)
  cp fuzz/corpus/$target/* "$work"/
  echo "fuzz: $target for ${seconds}s"
  build-fuzz/fuzz/$target -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 \
    "$work" 2>&1 | grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' || true
  # Any one kind of artifact is a failure (ls of several patterns fails when one has none).
  if compgen -G 'crash-*' >/dev/null || compgen -G 'leak-*' >/dev/null ||
    compgen -G 'timeout-*' >/dev/null || compgen -G 'oom-*' >/dev/null; then
    echo "fuzz: $target found a failure (inputs left in $(pwd))"
    exit 1
  fi
  rm -rf "$work"
done
echo "fuzz: all targets clean"
