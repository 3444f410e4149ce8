#!/usr/bin/env bash
# A whole node from a bundle (ARCHBENCH_BUNDLE_CUDA=node ci/bundle.sh), in about 5 minutes on 4
# GPUs: the peer and collective workloads checked at test size, the peer matrix with its
# patterns and latencies (one process), NCCL's collectives (one process driving every GPU),
# then a short suite on every GPU at once (--device=all) and one GPU after another (--serial),
# with their wall times. Every step has its own time limit.
# Usage: ci/gpu-node.sh [OUTDIR]   (default: $OUT, else results/local/gpu-node); from the
# repository (bundle/ beside ci/) or from inside the bundle. OUTDIR gets at most 7 files:
#   summary.txt            wall times, the peer matrix and patterns, the collectives' busbw
#   peer.json              the peer family (every ordered pair, both engines, both ways; patterns; latency)
#   collective.json        the collective family (all_reduce ... broadcast, 8 B to 1 GiB)
#   node-concurrent.json   --device=all, every GPU at once (context.node: mode, wall time, topology, NVML health)
#   node-serial.json       --device=all --serial, the same suite one GPU after another
#   health.json            the verdict: each GPU and link passed or failed (archbench-health; exit 4 names it)
#   gpu-node-logs.tar.gz   every log, nvidia-smi's facts and the variability reports
# NCCL: ARCHBENCH_NCCL, else libnccl.so.2 of the nvidia-nccl wheel of python3, else the loader's
# search. NVLink SHARP multicast stays off (NCCL_NVLS_ENABLE=0: the collectives refuse to run
# otherwise). ARCHBENCH_NODE_FILTER replaces the per-GPU suite's filter. NVBANDWIDTH=<binary>
# adds nvbandwidth's matrices to the summary (about 30 s more).
set -uo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
bundle="$here"
[ -x "$bundle/bin/archbench" ] || bundle="$here/../bundle"
[ -x "$bundle/bin/archbench" ] || { echo "gpu-node.sh: no bundle at $bundle (run ci/bundle.sh)" >&2; exit 2; }
out="${1:-${OUT:-results/local/gpu-node}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0
export ARCHBENCH_TOPDOWN=0  # no counter passes: they would only add time to a node's figures
if [ -z "${ARCHBENCH_NCCL:-}" ]; then
  find_nccl='import glob, os, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    for f in glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so.2")):
        print(f)
        sys.exit(0)'
  ARCHBENCH_NCCL="$(python3 -c "$find_nccl" 2>/dev/null)"
  [ -n "$ARCHBENCH_NCCL" ] && export ARCHBENCH_NCCL || unset ARCHBENCH_NCCL
fi
echo "NCCL: ${ARCHBENCH_NCCL:-libnccl.so.2, by the search of the dynamic loader}"
rc=0
step() {  # step NAME SECONDS command...: its output in $work/NAME.log, its exit status and time in summary
  local name="$1" limit="$2" t0 s
  shift 2
  t0=$(date +%s%N)
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  s=$?
  printf '%-12s exit %3d  %5d s\n' "$name" "$s" $(( ($(date +%s%N) - t0) / 1000000000 )) | tee -a "$work/steps.txt"
  [ $s = 0 ] || rc=1
}
{
  date -u
  nvidia-smi
  nvidia-smi topo -m
  nvidia-smi nvlink --status
} > "$work/topology.txt" 2>&1
nvidia-smi -q > "$work/nvidia-smi-q.txt" 2>&1
"$bundle/run.sh" --list-devices > "$work/devices.txt" 2>&1

# The new workloads against their references at test size (every pair, every collective).
step conformance 80 env LD_LIBRARY_PATH="$bundle/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  ARCHBENCH_CUDA_INCLUDE="${ARCHBENCH_CUDA_INCLUDE:-$( [ -d "$bundle/include" ] && echo "$bundle/include" || echo "${CUDA_HOME:-/usr/local/cuda}/include")}" \
  ARCHBENCH_DEVICE=cuda:0 "$bundle/bin/archbench_conformance" --gtest_filter='peer.*:collective.*'

# The peer matrix and the collectives, each one process on a quiet node.
step peer 110 "$bundle/run.sh" --device=cuda:0 --benchmark_filter='^peer/' --benchmark_min_time=0.05 \
  --benchmark_repetitions=3 --benchmark_out="$out/peer.json"
# nvbandwidth beside the peer matrix, where NVBANDWIDTH names its binary (built outside the
# repository): the same pairs, engines and directions, at its own buffer size.
if [ -x "${NVBANDWIDTH:-}" ]; then
  step nvbandwidth 120 "$NVBANDWIDTH" -t device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce \
    device_to_device_bidirectional_memcpy_read_ce device_to_device_bidirectional_memcpy_write_ce \
    device_to_device_memcpy_read_sm device_to_device_memcpy_write_sm device_to_device_bidirectional_memcpy_read_sm \
    device_to_device_bidirectional_memcpy_write_sm all_to_one_write_ce one_to_all_write_ce
fi
step collective 90 "$bundle/run.sh" --device=cuda:0 --benchmark_filter='^collective/' --benchmark_min_time=0.05 \
  --benchmark_repetitions=3 --benchmark_out="$out/collective.json"

# A short suite on every GPU at once, then one after another: FMA peaks, memory, latency,
# launch and the bus from pinned memory (10 benchmarks: 41 s at once, 134 s one after another on 4 H200s).
filter="${ARCHBENCH_NODE_FILTER:-^(compute/cuda/mad/(float4|double4)|memory/cuda/(copy|triad)/double|latency/cuda/chase/bytes:(16384|268435456)|launch/cuda/empty/dispatch/items:1|bus/cuda/(to_device|to_host)_pinned/bytes:268435456)\$}"
step concurrent 90 "$bundle/run.sh" --device=all --benchmark_repetitions=3 --benchmark_filter="$filter" \
  --benchmark_out="$work/node-concurrent.json"
step serial 200 "$bundle/run.sh" --device=all --serial --benchmark_repetitions=3 --benchmark_filter="$filter" \
  --benchmark_out="$work/node-serial.json"
for f in node-concurrent node-serial; do [ -e "$work/$f.json" ] && cp "$work/$f.json" "$out/"; done

# The summary: the steps, the two ways' wall times and figures, the peer matrix, the collectives.
{
  cat "$work/steps.txt"
  echo
  python3 - "$out" "$work/topology.txt" <<'PY'
import json, os, re, sys
out, topo = sys.argv[1], sys.argv[2]

def medians(path):
    try:
        doc = json.load(open(path))
    except Exception as e:
        print("%s: %s" % (os.path.basename(path), e))
        return None, []
    rows = [b for b in doc.get("benchmarks", []) if b.get("aggregate_name") == "median"]
    return doc.get("context", {}), rows

def base(name):
    return re.sub(r"/manual_time(_median)?$", "", name.replace("_median", ""))

# NVLink per GPU and direction, from nvidia-smi nvlink --status (the links of GPU 0).
text = open(topo).read()
gpu0 = text.split("GPU 1:")[0]
speeds = [float(x) for x in re.findall(r"Link \d+: ([0-9.]+) GB/s", gpu0)]
limit = sum(speeds)
print("NVLink limit of GPU 0: %d links, %.1f GB/s a direction (nvidia-smi nvlink --status)" % (len(speeds), limit)
      if speeds else "NVLink limit: not known (no NVLink in nvidia-smi nvlink --status)")

for mode in ("concurrent", "serial"):
    ctx, _ = medians(os.path.join(out, "node-%s.json" % mode))
    if ctx:
        node = ctx.get("node", {})
        print("--device=all %-10s %d devices, wall %.1f s, failed runs %s; each GPU's own: %s" % (
            node.get("mode", "?"), node.get("device_count", 0), node.get("wall_seconds", 0), ctx.get("failed_runs"),
            ", ".join("%s %.1f s" % (r.get("device_selector"), r.get("seconds", 0)) for r in ctx.get("runs", []))))
c_ctx, c_rows = medians(os.path.join(out, "node-concurrent.json"))
s_ctx, s_rows = medians(os.path.join(out, "node-serial.json"))
if c_rows and s_rows:
    def key(r):
        v = r.get("byte_per_s") or r.get("flop_per_s") or r.get("ns_per_access") or r.get("real_time")
        return (base(r["name"]), r.get("device_selector")), v
    serial = dict(key(r) for r in s_rows)
    print("\nconcurrent / serial, per benchmark and GPU (median; a rate, or ns/access, or time):")
    for r in c_rows:
        k, v = key(r)
        if k in serial and serial[k]:
            print("  %-60s %-8s %12.4g %12.4g  x%.3f" % (k[0][:60], k[1], v, serial[k], v / serial[k]))

_, rows = medians(os.path.join(out, "peer.json"))
if rows:
    print("\npeer (GB/s; latency ns/access):")
    for r in rows:
        n = base(r["name"])
        if "ns_per_access" in r:
            print("  %-64s %10.1f ns" % (n, r["ns_per_access"]))
        elif "byte_per_s" in r:
            print("  %-64s %10.1f GB/s" % (n, r["byte_per_s"] / 1e9))
_, rows = medians(os.path.join(out, "collective.json"))
if rows:
    print("\ncollectives (nccl-tests' algbw and busbw; busbw against the NVLink limit above):")
    print("  %-16s %12s %12s %12s %12s %8s" % ("op", "bytes", "time us", "algbw GB/s", "busbw GB/s", "of limit"))
    for r in rows:
        m = re.match(r"collective/\w+/(\w+)/gpus:(\d+)/bytes:(\d+)", base(r["name"]))
        if not m or "byte_per_s" not in r:
            continue
        bus = r.get("bus_byte_per_s", 0) / 1e9
        print("  %-16s %12s %12.1f %12.2f %12.2f %8s" % (m.group(1), m.group(3), r["real_time"], r["byte_per_s"] / 1e9, bus,
                                                     "%.0f%%" % (100 * bus / limit) if limit else "-"))
for f in ("peer", "collective"):  # what did not run, and why (the first few)
    try:
        doc = json.load(open(os.path.join(out, f + ".json")))
        skipped = [b for b in doc["benchmarks"] if b.get("error_occurred")]
        for b in skipped[:5]:
            print("%s: %s: %s" % (f, b["name"], b.get("error_message", "")[:200]))
    except Exception:
        pass
PY
  [ -e "$work/nvbandwidth.log" ] && { echo; echo "nvbandwidth (its own run, same call):"; cat "$work/nvbandwidth.log"; }
} > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
# The verdict: each GPU and link passed or failed (tools/archbench/health.json's thresholds; exit 4
# where one falls short, named with its figure).
health=0
if [ -e "$out/node-concurrent.json" ]; then
  python3 "$bundle/tools/archbench_health.py" "$out/node-concurrent.json" \
    $( [ -e "$out/peer.json" ] && echo --peer "$out/peer.json" ) $( [ -e "$out/node-serial.json" ] && echo --serial "$out/node-serial.json" ) \
    --json "$out/health.json" | tee -a "$out/summary.txt"
  health=${PIPESTATUS[0]}
fi
(cd "$work" && tar czf "$out/gpu-node-logs.tar.gz" --exclude='node-concurrent.json' --exclude='node-serial.json' .)
[ "$health" = 4 ] && exit 4
exit $rc
