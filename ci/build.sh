#!/usr/bin/env bash
# Configures and builds archbench in Release under build/ (BUILD_DIR overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && gen=()
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
