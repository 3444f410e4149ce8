#!/usr/bin/env bash
# On a machine with two GPUs or more, from a bundle (ARCHBENCH_BUNDLE_CUDA=node ci/bundle.sh):
# the GPUs' topology, the peer family's conformance test, the peer matrix (every ordered pair,
# measured by the first GPU's process) and a quick suite on every GPU at once, each merged into
# one JSON with its variability report. At most about 10 minutes (each step has its own
# timeout). ci/gpu-node.sh adds the collectives and the one-GPU-after-another comparison.
# Usage: ci/gpu-multi.sh [OUTDIR]   (default: $OUT, else results/local/gpu-multi); from the
# repository (bundle/ beside ci/) or from inside the bundle. ARCHBENCH_MULTI_FILTER replaces the
# per-GPU suite's filter.
set -uo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
bundle="$here"
[ -x "$bundle/bin/archbench" ] || bundle="$here/../bundle"
[ -x "$bundle/bin/archbench" ] || { echo "gpu-multi.sh: no bundle at $bundle (run ci/bundle.sh)" >&2; exit 2; }
out="${1:-${OUT:-results/local/gpu-multi}}"
mkdir -p "$out"
# NVLink multicast (NVLS) stays off on these machines: nothing here calls NCCL or
# cuMulticastCreate, and this says so to anything that might.
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0
# No TopDown counter passes here: they would only add time to a comparison of devices.
export ARCHBENCH_TOPDOWN=0
rc=0
{
  date -u
  nvidia-smi
  nvidia-smi topo -m
  for cap in r w n a; do nvidia-smi topo -p2p "$cap"; done  # peer read, write, NVLink, atomics
  nvidia-smi nvlink --status
} > "$out/topology.txt" 2>&1
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
"$bundle/run.sh" --list-devices > "$out/devices.txt" 2>&1
cat "$out/topology.txt"

# The peer workloads checked against their references at test size (every pair of cuda:0).
(
  export LD_LIBRARY_PATH="$bundle/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ARCHBENCH_CUDA_INCLUDE="${ARCHBENCH_CUDA_INCLUDE:-$( [ -d "$bundle/include" ] && echo "$bundle/include" || echo "${CUDA_HOME:-/usr/local/cuda}/include")}"
  ARCHBENCH_DEVICE=cuda:0 timeout 60 "$bundle/bin/archbench_conformance" --gtest_filter='peer.*'
) > "$out/peer-conformance.log" 2>&1
s=$?; echo "peer conformance: exit $s" | tee -a "$out/peer-conformance.log"; [ $s = 0 ] || rc=1
tail -3 "$out/peer-conformance.log"

# The peer matrix first, on a cool machine, 3 repetitions (the first GPU's process measures
# every pair; the others say so and skip).
ARCHBENCH_RESULTS_ROOT="$out" timeout 240 "$bundle/run.sh" --device=all --record=cuda-peer \
  --benchmark_repetitions=3 --benchmark_filter='^peer/' > "$out/peer.log" 2>&1
s=$?; echo "peer: exit $s" | tee -a "$out/peer.log"; [ $s = 0 ] || rc=1
peer_json="$(ls "$out"/*/*/cuda-peer-node.json 2>/dev/null | head -1)"
if [ -n "$peer_json" ]; then
  python3 "$bundle/tools/archbench_peer.py" "$peer_json" --all-sizes --json "${peer_json%.json}-matrix.json" \
    | tee "${peer_json%.json}-matrix.txt" || rc=1
fi

# A quick suite on every GPU at once, 3 repetitions: FMA peaks, memory, latency, launch and
# the bus from pinned memory (about 2 minutes).
filter="${ARCHBENCH_MULTI_FILTER:-^(compute/cuda/mad/(float|double)(4)?|memory/cuda/(copy|triad)/double|latency/cuda/chase/.*|launch/cuda/empty/dispatch/.*|bus/cuda/(to_device|to_host|both)_pinned/.*)$}"
ARCHBENCH_RESULTS_ROOT="$out" timeout 280 "$bundle/run.sh" --device=all --record=cuda-node-quick \
  --benchmark_repetitions=3 --benchmark_filter="$filter" > "$out/node.log" 2>&1
s=$?; echo "node suite: exit $s" | tee -a "$out/node.log"; [ $s = 0 ] || rc=1
grep -h "SLOW\|FAILED\|runs merged\|devices ran" "$out/peer.log" "$out/node.log"
exit $rc
