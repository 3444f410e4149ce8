#!/usr/bin/env bash
# The CUDA tracer on a GPU node, from the repository root, with bundle/ made by
# `ARCHBENCH_BUNDLE_CUDA=node ci/bundle.sh` (it carries libarchbench_trace_cuda.so, the planted
# program and archbench_trace_cuda_apis; libcupti and libcublas are the node's own, from CUDA_HOME
# or /usr/local/cuda):
#   1. the planted CUDA program untraced and traced (wall time of each, overhead);
#   2. the end-to-end checks (tests/analysis/trace/cuda_trace_e2e.py: the planted program's raw records,
#      then the report; cuda_apis traced by archbench_trace.py run, and its crash mode);
#   3. archbench on a quick CUDA filter untraced and traced (wall time, overhead, and the
#      device-timed results of both compared);
#   4. tools/archbench_trace.py report on each trace (summary JSON and text, Perfetto trace).
# Everything goes under OUT/trace/: raw traces (*.jsonl, gzipped above 20 MB after the report),
# logs, summaries, timings.txt (step, wall seconds, exit code) and errors.txt.
# Usage: ci/gpu-trace.sh [OUT]    (default: $OUT, else ./gpu-trace-out)
# ARCHBENCH_TRACE_FILTER overrides archbench's benchmark filter.
# Every step runs even when an earlier one failed; each failure is printed (and kept in
# errors.txt) with what failed, and the script exits 1 if any did.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root="$PWD"
out="${1:-${OUT:-gpu-trace-out}}/trace"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
: > "$out/errors.txt"
: > "$out/timings.txt"
cuda="${CUDA_HOME:-/usr/local/cuda}"
lib="$root/bundle/lib/libarchbench_trace_cuda.so"
planted="$root/bundle/bin/archbench_trace_cuda_planted"
apis="$root/bundle/bin/archbench_trace_cuda_apis"
tool="$root/tools/archbench_trace.py"
filter="${ARCHBENCH_TRACE_FILTER:-^(launch/cuda/empty/(dispatch|round_trip)/.*|memory/cuda/copy/.*)$}"
# libcupti (and NVRTC for a node-CUDA bundle) from the node's toolkit.
export LD_LIBRARY_PATH="$cuda/lib64:$cuda/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
failed=0

fail() {
  echo "gpu-trace.sh: FAILED: $*" | tee -a "$out/errors.txt" >&2
  failed=1
}

# timed NAME CMD...: runs CMD with its output in NAME.log and its wall time in timings.txt.
timed() {
  local name=$1 t0 t1 rc
  shift
  t0=$(date +%s.%N)
  "$@" > "$out/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  awk -v n="$name" -v a="$t0" -v b="$t1" -v r="$rc" 'BEGIN { printf "%s %.3f %d\n", n, b - a, r }' >> "$out/timings.txt"
  echo "gpu-trace.sh: $name: exit $rc, $(tail -n1 "$out/timings.txt" | cut -d' ' -f2) s (log: $out/$name.log)"
  return $rc
}

# The last lines of a step's log, on one line, for its failure message.
said() { tail -n3 "$out/$1.log" | tr '\n' ' '; }

# report RAW DIR: the analysis tool's summary (JSON, text) and Perfetto trace of one raw trace.
report() {
  local raw=$1 dir=$2
  python3 "$tool" report "$raw" --json "$dir/summary.json" --trace "$dir/trace.json" > "$dir/summary.txt" 2> "$dir/report.err" ||
    fail "report of $raw (exit $?): $(tail -n3 "$dir/report.err")"
}

# The one raw trace a traced run left in DIR.
raw_in() { find "$1" -maxdepth 1 -name '*.jsonl' | head -n1; }

# Preconditions, each said plainly.
{
  date -u
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv
  ls "$cuda"/lib64/libcupti.so* 2>&1
  git -C "$root" describe --always --dirty 2>&1
} > "$out/node.txt" 2>&1
[ -e "$lib" ] || fail "$lib is missing: make the bundle with ARCHBENCH_BUNDLE_CUDA=node ci/bundle.sh on a machine with the CUDA toolkit"
[ -x "$planted" ] || fail "$planted is missing (same)"
[ -x "$apis" ] || fail "$apis is missing (same): the end-to-end checks run without it"
ls "$cuda"/lib64/libcupti.so* >/dev/null 2>&1 || fail "no libcupti in $cuda/lib64: set CUDA_HOME to the node's CUDA toolkit"
[ -e "$tool" ] || fail "$tool is missing: the report steps will fail"

# 1. The planted program, untraced then traced.
mkdir -p "$out/planted"
timed planted_untraced "$planted" all 200 || fail "planted program untraced: $(said planted_untraced)"
timed planted_traced env CUDA_INJECTION64_PATH="$lib" ARCHBENCH_TRACE_DIR="$out/planted" "$planted" all 200 ||
  fail "planted program traced: $(said planted_traced)"
grep -q "archbench trace (cuda):.*->" "$out/planted_traced.log" || fail "the tracer did not say it wrote a trace (see planted_traced.log)"

# 2. The end-to-end checks (a second traced run of the planted program, and cuda_apis; kept in e2e/).
apis_arg=()
[ -x "$apis" ] && apis_arg=(--apis "$apis")
timed e2e python3 "$root/tests/analysis/trace/cuda_trace_e2e.py" --planted "$planted" --lib "$lib" --tool "$tool" ${apis_arg[@]+"${apis_arg[@]}"} --out "$out/e2e" ||
  fail "end-to-end checks: $(grep -c '^FAIL' "$out/e2e.log") failed: $(grep '^FAIL' "$out/e2e.log" | head -n5 | tr '\n' ';') $(said e2e)"

# 3. archbench, untraced then traced, on the same quick filter.
mkdir -p "$out/archbench" "$out/archbench-results-untraced" "$out/archbench-results-traced"
args=(--device=cuda "--benchmark_filter=$filter" --benchmark_repetitions=1)
timed archbench_untraced env ARCHBENCH_RESULTS_DIR="$out/archbench-results-untraced" "$root/bundle/run.sh" "${args[@]}" ||
  fail "archbench untraced: $(said archbench_untraced)"
timed archbench_traced env CUDA_INJECTION64_PATH="$lib" ARCHBENCH_TRACE_DIR="$out/archbench" \
  ARCHBENCH_RESULTS_DIR="$out/archbench-results-traced" "$root/bundle/run.sh" "${args[@]}" || fail "archbench traced: $(said archbench_traced)"
# Device-timed results traced against untraced (informational: exit 1 there means "slower").
python3 "$root/tools/archbench_compare.py" "$out/archbench-results-untraced" "$out/archbench-results-traced" \
  > "$out/archbench-compare.txt" 2>&1
echo "archbench_compare exit $? (1: some result changed beyond the noise)" >> "$out/archbench-compare.txt"

# 4. Reports.
raw="$(raw_in "$out/planted")"
if [ -n "$raw" ]; then report "$raw" "$out/planted"; else fail "no raw trace from the traced planted run in $out/planted"; fi
raw="$(raw_in "$out/archbench")"
if [ -n "$raw" ]; then report "$raw" "$out/archbench"; else fail "no raw trace from the traced archbench run in $out/archbench"; fi

# Overheads: traced wall time over untraced.
awk '{ t[$1] = $2 } END {
  if (t["planted_untraced"] > 0) printf "overhead planted %.3f (traced %.3f s / untraced %.3f s)\n", t["planted_traced"] / t["planted_untraced"], t["planted_traced"], t["planted_untraced"]
  if (t["archbench_untraced"] > 0) printf "overhead archbench %.3f (traced %.3f s / untraced %.3f s)\n", t["archbench_traced"] / t["archbench_untraced"], t["archbench_traced"], t["archbench_untraced"]
}' "$out/timings.txt" | tee -a "$out/timings.txt"

# Large raw traces are compressed (the reports above read them uncompressed).
find "$out" \( -name '*.jsonl' -o -name 'trace.json' \) -size +20M -exec gzip -f {} \;
echo "gpu-trace.sh: files in $out; $( [ $failed = 0 ] && echo 'every step passed' || echo "failures: see $out/errors.txt")"
exit $failed
