#!/usr/bin/env bash
# Configures and builds archbench under build/ (BUILD_DIR overrides): in Release, or with the
# configure arguments given (ci/sanitizers.sh: --preset debug).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && gen=()
cmake -S . -B "$build" "${gen[@]}" "${@:--DCMAKE_BUILD_TYPE=Release}"
# ARCHBENCH_TARGETS: build only these (ci/bootstrap.sh: archbench first); default every target.
cmake --build "$build" -j "$(nproc)" ${ARCHBENCH_TARGETS:+--target $ARCHBENCH_TARGETS}
