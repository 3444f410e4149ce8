#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build in Release what the default
# run needs (the archbench target), run the default suite on the default device, then build
# the rest (tests, tracers) quietly for ci/test.sh. Arguments go to archbench (e.g.
# --device=..., a filter). The console shows the table and the summary; the JSON goes to
# results/local/. The exit status is archbench's.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/deps.sh
ARCHBENCH_TARGETS=archbench ci/build.sh
status=0
build/archbench "$@" || status=$?
echo "bootstrap: building the rest (tests, tracers) for ci/test.sh; log: build/rest.log" >&2
if ci/build.sh > build/rest.log 2>&1; then
  echo "bootstrap: built the rest" >&2
else
  echo "bootstrap: building the rest failed (see build/rest.log); archbench itself ran" >&2
fi
exit "$status"
