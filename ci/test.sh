#!/usr/bin/env bash
# One command: install what is missing, build, and run the tests with ctest, in two stages:
#   1. Release (build/): every test, the regression check first and verbosely;
#   2. ASan+UBSan (the CMake preset `debug`, build-debug/; OpenCL only, ARCHBENCH_CUDA=OFF): the
#      unit, conformance (PoCL) and smoke tests and the tracers' C++ (analysis/trace/test_trace_common, trace_e2e),
#      where any sanitizer report fails the test (ci/sanitizers.sh says how).
# Tests that need an OpenCL device skip with their reason where there is none (each test is labelled
# host, device or gpu: `ctest -L host` runs only those that need no device). Every stage runs
# whatever the one before it said; the exit status says whether anything failed.
# ARCHBENCH_SANITIZERS=0 leaves stage 2 out.
set -uo pipefail
cd "$(dirname "$0")/.."
ci/deps.sh || exit 1
rc=0
stage() { echo; echo "=== archbench ci: $* ($(date -u +%H:%M:%S))"; }

stage "1/2 release build and tests"
if ci/build.sh; then
  # The regression check first, verbosely, so that its comparison shows in the log; then the rest,
  # whatever the first said.
  ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -V -R '^e2e/regression$' "$@" || rc=1
  ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -E '^e2e/regression$' "$@" || rc=1
else
  echo "archbench ci: the release build failed"; rc=1
fi

if [ "${ARCHBENCH_SANITIZERS:-1}" = 1 ]; then
  stage "2/2 ASan+UBSan build and tests"
  ci/sanitizers.sh "$@" || rc=1
fi
stage "done: $([ $rc = 0 ] && echo all passed || echo FAILED)"
exit $rc
