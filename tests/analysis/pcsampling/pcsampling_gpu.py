#!/usr/bin/env python3
"""PC sampling on a real GPU (ctest analysis/pcsampling/pcsampling_gpu, label gpu): the planted kernels of planted.cu
under tools/archbench_pcsample.py.

  - hot_chase: the hottest source line is the planted pointer chase, its first stall reason
    long_scoreboard;
  - lanes<P>, P = 1..32 paths: the kernel's warp efficiency 1/P within 10%, from CUPTI's SASS
    metrics where they counted the kernel, else (the H100 counted only the first function
    launched) from the per-kernel counters of the warp pass (libarchbench_topdown.so's warp set,
    with --topdown-lib; the tool runs it for every kernel here, so where both sources counted a
    kernel they must agree within 10%);
  - per kernel, the PC sampling stall shares match TopDown level 3 (tools/archbench_topdown.py,
    each td_stall_<reason> over their sum) within 0.05, for kernels with at least 2000 stalled
    samples. Skipped, with the reason, without the TopDown library.

Exit 77 (skip) where there is no CUDA device. --out DIR keeps every file written.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import gpu  # noqa: E402


def planted_line(marker):
    with open(os.path.join(HERE, "planted.cu")) as f:
        for no, line in enumerate(f, 1):
            if marker in line:
                return no
    raise SystemExit(f"FAIL: no line marked {marker} in planted.cu")


def base(name):
    return name.split("(")[0].replace("void ", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prog", required=True)
    ap.add_argument("--lib")
    ap.add_argument("--tool", default=os.path.join(gpu.TOOLS, "archbench_pcsample.py"))
    ap.add_argument("--topdown-lib")
    ap.add_argument("--topdown-tool", default=os.path.join(gpu.TOOLS, "archbench_topdown.py"))
    ap.add_argument("--period", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=float, default=0, help="stop each run of the program after this many seconds")
    ap.add_argument("--drain", choices=("thread", "sync", "exit"), help="the library's drain mode")
    ap.add_argument("--watchdog", type=float, help="the library's watchdog, seconds")
    ap.add_argument("--debug", action="store_true", help="the library logs every step (ARCHBENCH_PCSAMPLING_DEBUG=1)")
    ap.add_argument("--sass-strategy", help="the tool's ARCHBENCH_PC_SASS_STRATEGY (how CUPTI's SASS metrics ranges are opened)")
    ap.add_argument("--pc-enable", choices=("sync", "async"), help="the tool's ARCHBENCH_PC_ENABLE")
    ap.add_argument("--require-sass", action="store_true",
                    help="fail unless CUPTI's SASS metrics counted every planted kernel (per line, not only the "
                         "warp pass's per-kernel counters)")
    a = ap.parse_args()
    out = gpu.out_dir(a.out, "pcsampling-gpu-")
    j = os.path.join(out, "planted-pcsample.json")
    cmd = [sys.executable, a.tool, "--json", j, "--html", os.path.join(out, "planted-pcsample.html"),
           "--raw", os.path.join(out, "planted-pcsample.raw.jsonl"), "--source-dir", HERE, "--top", "8",
           "--sass", "--overhead"]  # the per-line counts and the overhead figure: both opt-in
    cmd += ["--lib", a.lib] if a.lib else []
    cmd += ["--period", str(a.period)] if a.period else []
    cmd += ["--timeout", str(a.timeout)] if a.timeout else []
    cmd += ["--debug"] if a.debug else []
    # The tool's debugging knobs are environment variables (ARCHBENCH_PC_*, tools/README.md).
    os.environ.update({var: str(v) for var, v in (("ARCHBENCH_PC_DRAIN", a.drain), ("ARCHBENCH_PC_WATCHDOG", a.watchdog),
                                                  ("ARCHBENCH_PC_SASS_STRATEGY", a.sass_strategy),
                                                  ("ARCHBENCH_PC_ENABLE", a.pc_enable)) if v is not None})
    cmd += ["--topdown-lib", a.topdown_lib, "--warp-pass", "always"] if a.topdown_lib else []
    gpu.run(cmd + ["--", a.prog], os.path.join(out, "planted-pcsample.txt"))
    with open(j) as f:
        kernels = {base(k["kernel"]): k for k in json.load(f)["kernels"]}
    failures = []

    chase = kernels.get("hot_chase")
    want = planted_line("PLANTED: the chase")
    if not chase or not chase["lines"]:
        failures.append("hot_chase: no samples")
    else:
        top = chase["lines"][0]
        first = next(iter(top["stalls"]), None)
        print(f"hot_chase: hottest line {top['line']} ({100 * top['share']:.0f}% of its samples), first stall {first}; "
              f"planted line {want}")
        if top["line"] != want:
            failures.append(f"hot_chase: hottest line {top['line']}, planted {want}")
        if first != "long_scoreboard":
            failures.append(f"hot_chase: the chase line's first stall is {first}, not long_scoreboard")

    for p in (1, 2, 4, 8, 16, 32):
        k = kernels.get(f"lanes<{p}>") or {}
        e = k.get("efficiency", {})
        eff = e.get("warp_efficiency")
        print(f"lanes<{p}>: warp efficiency {eff} from {e.get('source', 'nothing')} (1/P = {1 / p:.4f}); "
              f"SASS metrics {k.get('sass', {}).get('warp_efficiency')}, counters {k.get('warp', {}).get('warp_efficiency')}")
        if a.require_sass and k.get("sass", {}).get("warp_efficiency") is None:
            failures.append(f"lanes<{p}>: no SASS metrics (--require-sass)")
        if eff is None:
            failures.append(f"lanes<{p}>: no warp efficiency (neither SASS metrics nor the warp pass's counters)")
        elif abs(eff - 1 / p) > 0.1 / p:
            failures.append(f"lanes<{p}>: warp efficiency {eff:.4f}, not 1/{p} within 10%")

    if a.require_sass and not (kernels.get("hot_chase") or {}).get("sass"):
        failures.append("hot_chase: no SASS metrics (--require-sass)")
    for name, k in kernels.items():  # both sources on one kernel: they must agree
        s_eff, c_eff = k.get("sass", {}).get("warp_efficiency"), k.get("warp", {}).get("warp_efficiency")
        if s_eff and c_eff:
            print(f"{name}: warp efficiency SASS metrics {s_eff:.4f}, counters {c_eff:.4f}")
            if abs(s_eff - c_eff) > 0.1 * s_eff:
                failures.append(f"{name}: warp efficiency {s_eff:.4f} by SASS metrics, {c_eff:.4f} by counters")

    if not a.topdown_lib:
        print("SKIP (TopDown comparison): no --topdown-lib")
    else:
        tj = os.path.join(out, "planted-topdown.json")
        gpu.run([sys.executable, a.topdown_tool, "--level", "3", "--json", tj, "--lib", a.topdown_lib, "--no-native",
             "--", a.prog, "1"], os.path.join(out, "planted-topdown.txt"))
        with open(tj) as f:
            td = {base(k["kernel"]): k for k in json.load(f)["kernels"]}
        for name, k in kernels.items():
            stalled = sum(n for r, n in k["reasons"].items() if r not in ("selected", "not_selected"))
            if name not in td or stalled < 2000:
                continue
            t = {c[len("stall_"):]: v for c, v in td[name].items() if c.startswith("stall_") and isinstance(v, float)}
            total = sum(t.values())
            if total <= 0:
                continue
            worst = max(((abs(k["stalls"].get(r, 0.0) - t.get(r, 0.0) / total), r) for r in set(t) | set(k["stalls"])),
                        default=(0.0, "-"))
            print(f"{name}: stall shares vs TopDown level 3: largest difference {worst[0]:.3f} ({worst[1]}); "
                  f"{stalled} stalled samples")
            if worst[0] > 0.05:
                failures.append(f"{name}: {worst[1]} share {k['stalls'].get(worst[1], 0):.3f} by PC sampling, "
                                f"{t.get(worst[1], 0) / total:.3f} by TopDown")
    print("files in", out)
    return gpu.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
