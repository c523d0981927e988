#!/usr/bin/env bash
# Installs the build dependencies (Debian packages, only the missing ones), builds everything
# in build/ (Release) and starts one node on port 6632 with its data under ./data.
#   scripts/run.sh             install, build, start
#   scripts/run.sh --no-start  install and build only (used by scripts/test.sh)
# Environment variables of the node (README.md) pass through, e.g. PORT=7000 scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libboost-dev nlohmann-json3-dev libxxhash-dev librapidcheck-dev
          libgtest-dev libssl-dev libmimalloc-dev libhiredis-dev openssl)

install_missing() {
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "run.sh: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}

install_missing
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j2

[[ "${1:-}" == "--no-start" ]] && exit 0
exec build/server/queen
