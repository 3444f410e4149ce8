#!/usr/bin/env bash
# On a compute node, from a bundle (ci/bundle.sh): records the node's facts, runs the tests
# and the suite on the chosen device, and leaves everything in OUTDIR.
# Usage: node-run.sh OUTDIR [archbench args...]   (ARCHBENCH_DEVICE picks the device; default gpu;
# ARCHBENCH_SKIP_TESTS=1 runs the suite only; ARCHBENCH_MEMCHECK=0 leaves out compute-sanitizer; with --record the JSON goes under OUTDIR/<device>/<driver>/)
set -uo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
out="${1:?usage: node-run.sh OUTDIR [archbench args]}"
shift
mkdir -p "$out"
chosen="${ARCHBENCH_DEVICE:-}"  # tests: every backend unless a device was chosen; the suite: the GPU
export ARCHBENCH_DEVICE="$chosen"
{
  date -u
  uname -a
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,ecc.mode.current,power.limit --format=csv
} > "$out/node.txt" 2>&1
"$here/run.sh" --list-devices > "$out/devices.txt" 2>&1
if [ "${ARCHBENCH_SKIP_TESTS:-0}" != 1 ]; then
  "$here/run.sh" --test > "$out/tests.log" 2>&1
  echo "tests: exit $?" | tee -a "$out/tests.log"
  if [ -x "$here/bin/archbench_cuda_compile" ] && [ "${ARCHBENCH_MEMCHECK:-1}" = 1 ]; then
    "$here/run.sh" --memcheck > "$out/memcheck.log" 2>&1
    echo "memcheck: exit $?" | tee -a "$out/memcheck.log"
  fi
fi
ARCHBENCH_DEVICE="${chosen:-gpu}" ARCHBENCH_RESULTS_DIR="$out" ARCHBENCH_RESULTS_ROOT="${ARCHBENCH_RESULTS_ROOT:-$out}" \
  "$here/run.sh" "$@" > "$out/run.log" 2>&1
echo "suite: exit $?" | tee -a "$out/run.log"
