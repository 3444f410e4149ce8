#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build in Release, and run the
# default suite on the default device. Arguments go to archbench (e.g. --device=..., a filter).
# The console shows the table; the JSON goes to results/local/.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/deps.sh
ci/build.sh
exec build/archbench "$@"
