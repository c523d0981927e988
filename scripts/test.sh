#!/usr/bin/env bash
# Installs what is missing, builds everything in build/, runs every test (ctest), then the
# simulator's bounded CI run (scripts/sim-ci.sh) when it is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/run.sh --no-start
ctest --test-dir build --output-on-failure
if [[ -f scripts/sim-ci.sh ]]; then
  bash scripts/sim-ci.sh build/sim/queen-sim
fi
