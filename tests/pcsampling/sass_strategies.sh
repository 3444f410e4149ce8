#!/usr/bin/env bash
# Which of libarchbench_pcsampling.so's SASS metrics strategies (ARCHBENCH_PCSAMPLE_SASS_STRATEGY)
# counts every kernel, and what the async PC sampling enable saves (issue 18). Not a ctest: a
# comparison on the GPU, about a minute.
#   OUT=dir bash tests/pcsampling/sass_strategies.sh LIB PLANTED CG
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
    print(f"counted {summary['counted']}/{summary['launched']}; enables {len(enables)} [{'; '.join(enables[:2])}]; "
          f"flushes [{' '.join(flushes)}]; missing {summary['missing_functions'][:4]}"
          + (f"; late {late}" if late else "") + (f"; errors {errors[:3]}" if errors else ""))
else:
    print("no sass_summary record (the run did not finish?)", errors[:3])
EOF
}

sass_run() {  # sass_run NAME PROGRAM STRATEGY LAZY LOADING [ARGS]
  local name=$1 prog=$2 st=$3 lazy=$4 loading=$5; shift 5
  local raw="$OUT/$name.jsonl"
  local t0=$(date +%s%N)
  env CUDA_INJECTION64_PATH="$LIB" ARCHBENCH_PCSAMPLE_MODE=sass ARCHBENCH_PCSAMPLE_OUT="$raw" \
      ARCHBENCH_PCSAMPLE_SASS_STRATEGY="$st" ${lazy:+ARCHBENCH_PCSAMPLE_SASS_LAZY=$lazy} \
      CUDA_MODULE_LOADING="$loading" ARCHBENCH_PCSAMPLE_WATCHDOG_S=8 ARCHBENCH_PCSAMPLING_DEBUG=1 \
      timeout -k 3 25 "$prog" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-30s rc=%-3s %6d ms  ' "$name" "$rc" $(( ($(date +%s%N) - t0) / 1000000 ))
  summary "$raw"
}

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

echo "== CG wall time: native, PC sampling with sync and async enable"
for how in native sync async native sync async native sync async; do
  t0=$(date +%s%N)
  if [ "$how" = native ]; then
    timeout 30 "$CG" > /dev/null 2>&1
  else
    env CUDA_INJECTION64_PATH="$LIB" ARCHBENCH_PCSAMPLE_MODE=pc ARCHBENCH_PCSAMPLE_PC_ENABLE=$how \
        ARCHBENCH_PCSAMPLE_OUT="$OUT/cg-pc-$how.jsonl" ARCHBENCH_PCSAMPLE_WATCHDOG_S=8 timeout 30 "$CG" > "$OUT/cg-pc-$how.log" 2>&1
  fi
  rc=$?
  extra=""
  [ "$how" = async ] && extra=$(grep -h -E '"type":"pc_enable(_wait)?"' "$OUT/cg-pc-async.jsonl" 2>/dev/null | tr '\n' ' ' | cut -c1-300)
  [ "$how" != native ] && extra="$extra $(grep -o 'pc mode, [0-9]* samples' "$OUT/cg-pc-$how.log" 2>/dev/null)"
  printf '%-7s rc=%s %5d ms %s\n' "$how" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$extra"
done
