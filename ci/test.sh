#!/usr/bin/env bash
# One command: install what is missing, build, and run the tests with ctest.
# Tests that need an OpenCL device skip with their reason where there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/deps.sh
ci/build.sh
# The regression check first, verbosely, so that its comparison shows in the log; then the rest,
# whatever the first said: every test runs, and the exit status says whether any failed.
rc=0
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -V -R '^regression$' "$@" || rc=1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -E '^regression$' "$@" || rc=1
exit $rc
