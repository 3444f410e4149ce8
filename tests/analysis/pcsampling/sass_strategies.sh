#!/usr/bin/env bash
# Which of libarchbench_pcsampling.so's SASS metrics strategies (ARCHBENCH_PCSAMPLE_SASS_STRATEGY)
# counts every kernel, and PC sampling's fixed costs (issue 18). Not a ctest: a comparison on the
# GPU. SECTIONS (default "target timing", about 30 s): strategies (every strategy, as first run on
# the H100: each counted only the first function launched), target (the target strategy: is a
# kernel other than the first counted when the device is configured at its launch?), timing (CG
# and planted natively and under PC sampling, sync and async enable, a smaller hardware buffer and a
# shorter CUPTI worker sleep: wall time and the end record's enable, first launch, exit drain and
# disable seconds).
#   OUT=dir [SECTIONS="..."] bash tests/analysis/pcsampling/sass_strategies.sh LIB PLANTED CG
# LIB: libarchbench_pcsampling.so; PLANTED: archbench_pcsampling_planted (hot_chase, then lanes<1..32>:
# 7 functions of one module); CG: archbench_cg (a cudaMemset before its 4 kernels).
# Per run one line: the strategy, patching, module loading, functions counted of those launched
# (from the library's sass_summary record), each flush's functions with records, the missing
# ones, errors. Then the CG solver's wall time natively, under PC sampling with the enable in the
# context-created callback (sync) and on the library's thread (async), 3 runs each.
set -u
LIB=${1:?usage: OUT=dir bash sass_strategies.sh LIB PLANTED CG}
PLANTED=${2:?planted program}
CG=${3:?CG program}
: "${OUT:?set OUT}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

summary() {  # summary RAW: one line from the raw file's records
  python3 - "$1" <<'EOF'
import json, sys
flushes, summary, errors, enables, late = [], None, [], [], []
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        t = r.get("type")
        if t == "sass_flush":
            fs = r.get("functions") or {}
            flushes.append(f"{r.get('where')}:{len(fs)}f/{r.get('records')}r" + (f"!{r['error']}" if r.get("error") else ""))
        elif t == "sass_summary":
            summary = r
        elif t == "sass_enable":
            mf = r.get("module_functions")
            enables.append(("ok" if not r.get("error") else "ERR " + r["error"]) + (f" {mf}" if mf else ""))
        elif t == "sass_late":
            late.append(r.get("function"))
        elif t == "error":
            errors.append(r.get("reason"))
except OSError as e:
    print("no raw file:", e); sys.exit()
if summary:
    print(f"counted {summary['counted']}/{summary['launched']} {summary.get('counted_functions', [])}; enables {len(enables)} [{'; '.join(enables[:2])}]; "
          f"flushes [{' '.join(flushes)}]; missing {summary['missing_functions'][:4]}"
          + (f"; late {late}" if late else "") + (f"; errors {errors[:3]}" if errors else ""))
else:
    print("no sass_summary record (the run did not finish?)", errors[:3])
EOF
}

sass_run() {  # [TARGET=N|NAME] sass_run NAME PROGRAM STRATEGY LAZY LOADING [ARGS]
  local name=$1 prog=$2 st=$3 lazy=$4 loading=$5; shift 5
  local raw="$OUT/$name.jsonl"
  local t0=$(date +%s%N)
  env CUDA_INJECTION64_PATH="$LIB" ARCHBENCH_PCSAMPLE_MODE=sass ARCHBENCH_PCSAMPLE_OUT="$raw" \
      ARCHBENCH_PCSAMPLE_SASS_STRATEGY="$st" ${lazy:+ARCHBENCH_PCSAMPLE_SASS_LAZY=$lazy} \
      ${TARGET:+ARCHBENCH_PCSAMPLE_SASS_TARGET=$TARGET} \
      CUDA_MODULE_LOADING="$loading" ARCHBENCH_PCSAMPLE_WATCHDOG_S=8 ARCHBENCH_PCSAMPLING_DEBUG=1 \
      timeout -k 3 25 "$prog" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-30s rc=%-3s %6d ms  ' "$name" "$rc" $(( ($(date +%s%N) - t0) / 1000000 ))
  summary "$raw"
}

SECTIONS=${SECTIONS:-target timing}
has() { case " $SECTIONS " in *" $1 "*) return 0;; esac; return 1; }

if has strategies; then
  echo "== SASS metrics strategies (planted: 7 functions; CG: 4)"
  sass_run planted-deferred "$PLANTED" deferred "" EAGER 1
  sass_run planted-deferred-lazyload "$PLANTED" deferred "" LAZY 1
  sass_run planted-deferred-lazypatch "$PLANTED" deferred 1 EAGER 1
  sass_run planted-deferred-module "$PLANTED" deferred-module "" EAGER 1
  sass_run planted-once "$PLANTED" once "" EAGER 1
  sass_run planted-function "$PLANTED" function "" EAGER 1
  sass_run planted-reconfig "$PLANTED" reconfig "" EAGER 1
  sass_run planted-reconfig-eager "$PLANTED" reconfig 0 EAGER 1
  sass_run cg-deferred "$CG" deferred "" EAGER
  sass_run cg-reconfig "$CG" reconfig "" EAGER
fi

if has target; then
  # planted launches hot_chase, lanes<1>, <2>, <4>, <8>, <16>, <32>; CG dot_partial, stencil_spmv,
  # update_xr, update_p (a cudaMemset and a device-to-device copy before them).
  echo "== SASS metrics, strategy target (the device configured at the counted function's first launch)"
  sass_run planted-deferred "$PLANTED" deferred "" EAGER 1
  TARGET=1 sass_run planted-target-1 "$PLANTED" target "" EAGER 1
  TARGET='lanes<8>' sass_run planted-target-lanes8 "$PLANTED" target "" EAGER 1
  TARGET=3 sass_run planted-target-3-lazy "$PLANTED" target 1 EAGER 1
  sass_run cg-deferred "$CG" deferred "" EAGER
  TARGET=1 sass_run cg-target-1 "$CG" target "" EAGER
  TARGET=stencil_spmv sass_run cg-target-stencil "$CG" target "" EAGER
fi

costs() {  # costs RAW: the end record's fixed costs and samples
  python3 - "$1" <<'EOF'
import json, sys
end, wait = {}, None
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r.get("type") == "end":
            end = r
        if r.get("type") == "pc_enable_wait":
            wait = r.get("waited_s")
except OSError as e:
    print("no raw file:", e)
    sys.exit()
f = lambda k: f"{end[k]:.3f}" if isinstance(end.get(k), (int, float)) and end[k] >= 0 else "-"
print(f"enable {f('enable_s')} waited {wait if wait is not None else '-'} first-launch {f('first_launch_s')} "
      f"exit-drain {f('exit_drain_s')} disable {f('disable_s')} samples {end.get('total_samples', '-')}"
      + (f" ERROR {end['error']}" if end.get("error") else ""))
EOF
}

pc_run() {  # pc_run NAME PROGRAM HOW [VAR=VALUE...] [-- ARGS]: HOW native, sync or async
  local name=$1 prog=$2 how=$3; shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  local t0 rc
  t0=$(date +%s%N)
  if [ "$how" = native ]; then
    timeout 30 "$prog" "$@" > /dev/null 2>&1; rc=$?
    printf '%-22s rc=%-3s %5d ms\n' "$name" "$rc" $(( ($(date +%s%N) - t0) / 1000000 ))
  else
    env CUDA_INJECTION64_PATH="$LIB" ARCHBENCH_PCSAMPLE_MODE=pc ARCHBENCH_PCSAMPLE_PC_ENABLE="$how" \
        ARCHBENCH_PCSAMPLE_OUT="$OUT/$name.jsonl" ARCHBENCH_PCSAMPLE_WATCHDOG_S=8 ${envs[@]+"${envs[@]}"} \
        timeout 30 "$prog" "$@" > "$OUT/$name.log" 2>&1; rc=$?
    printf '%-22s rc=%-3s %5d ms  %s\n' "$name" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(costs "$OUT/$name.jsonl")"
  fi
}

if has timing; then
  echo "== PC sampling's fixed costs: CG, then planted (seconds from the end record)"
  for i in 1 2 3; do
    pc_run cg-native-$i "$CG" native
    pc_run cg-sync-$i "$CG" sync
    pc_run cg-async-$i "$CG" async
    pc_run cg-async-hw8-$i "$CG" async ARCHBENCH_PCSAMPLE_HW_BUFFER_MB=8
    pc_run cg-async-sleep5-$i "$CG" async ARCHBENCH_PCSAMPLE_WORKER_SLEEP_MS=5
  done
  for i in 1 2; do
    pc_run planted-native-$i "$PLANTED" native -- 1
    pc_run planted-sync-$i "$PLANTED" sync -- 1
    pc_run planted-async-$i "$PLANTED" async -- 1
    pc_run planted-async-hw8-$i "$PLANTED" async ARCHBENCH_PCSAMPLE_HW_BUFFER_MB=8 -- 1
  done
fi
