#!/usr/bin/env bash
# One command: install what is missing, build, and run the tests with ctest.
# Tests that need an OpenCL device skip with their reason where there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/deps.sh
ci/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure "$@"
