"""Where a CUDA program's kernels stall, line by line (seed 003 section V, on NVIDIA): any unmodified
program under CUPTI's PC sampling, each sample a warp's instruction and stall reason, attributed to
the kernel, its SASS instruction and its source line (-lineinfo), with seed 003's kernel metrics.

  archbench_pcsample.py [options] -- PROGRAM [ARGS...]   run PROGRAM under libarchbench_pcsampling.so
  archbench_pcsample.py [options] --report RAW.jsonl [--sass-report SASS.jsonl ...]   analyse earlier runs

The program runs natively (wall time), then with PC sampling in continuous mode (kernels run
concurrently, as without it; the overhead is the ratio of the two wall times), then, unless
--no-sass, with CUPTI's SASS metrics (instrumented: executed warp- and thread-instructions of
every instruction; not part of the overhead figure). On the H100 (CUPTI 13.0) CUPTI counted only
the first function launched in a process whatever the library's strategy (a CUPTI limitation: its
own record count was that function's instructions; the others ran patched and were never
reported). Hence the default --sass-strategy each: after the sampled run, one SASS metrics run of
the program per chosen kernel function (the library's strategy target, the function named by its
mangled name, the device configured at its first launch), so the cost is that many more runs of
the program. The chosen functions are the hottest by PC samples, those the report shows line by
line (--top, default 5), or --sass-kernels N (the N hottest) or all (every kernel launched). Each
run's raw file (RAW.sass.K.jsonl) keeps only its target's records (another function's would be
partial, or counted twice) and the runs are merged into one; a run that exits non-zero or writes
nothing is a Problem for its function, and the rest go on. --report with several --sass-report
files merges them the same way. The other strategies are one SASS run (RAW.sass.jsonl): deferred
(one enable at the context's first kernel launch, every loaded function patched then), and the
others --help names; target with --sass-target N|NAME counts one chosen kernel. The kernels
without per-instruction counts get per-kernel counts from the warp pass below, and the report
names which kernels have per-line counts and which only per-kernel ones. The raw files'
sass_flush records name the functions each flush had counts for, and their sass_summary the
launched functions without any.

Per kernel, line and instruction:
  stalls         each stall reason's share of the stalled samples (selected and not_selected are
                 not stalls; the same shares as TopDown level 3, tools/archbench_topdown.py)
  latency        seed 003's LAT = every sample (warp-time at the code), C = the samples that
                 issued (selected: about one cycle an instruction), U = LAT - C; warps a scheduler
                 needs to cover it, 1 + U/C, against the warps it holds (occupancy of the launches);
                 with W warps, min(U, (W-1) C) of each U is covered, the rest uncovered, and each
                 latency-bound reason's share of the samples and its uncovered part
  sass           executed instructions (warp-level), warp efficiency ACT/TOT (ACT: active
                 thread-instructions, TOT: 32 lanes per instruction, WAST = TOT - ACT), and scalar
                 loss (the lanes lost by instructions that ran with one active lane)
  warp           per kernel, where the SASS metrics have no records for a launched kernel (with
                 each: the kernels not chosen, or whose run failed): one more run under
                 libarchbench_topdown.so with its "warp" counter set (smsp__inst_executed,
                 smsp__thread_inst_executed, _pred_on; the first launch of each shape): ACT =
                 thread-instructions per warp-instruction, TOT = 32, WAST = 32 - ACT, executed
                 instructions; scalar loss needs per-instruction counts (null). Each kernel's
                 "efficiency" says which source its figure came from (sass_metrics or counters);
                 lines keep the SASS metrics' figures where there are any, else none (unavailable).

Output: the text report (hottest kernels, then their hottest lines with stall reasons and the source
text where the file is readable), --json (per kernel totals, lines and PCs), --html (a kernel's
source and SASS annotated with samples, self-contained). Exit status: the program's own under
sampling (2 for a bad option or a malformed file).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from . import cli
from . import topdown
from .cli import InputError

TOOL = "archbench_pcsample"
PREFIX = "smsp__pcsamp_warps_issue_stalled_"
NOT_STALLS = ("selected", "not_selected")
# A warp waits for something to finish (latency) or for a unit to take its instruction (throughput).
LATENCY_BOUND = ("long_scoreboard", "short_scoreboard", "wait", "barrier", "membar", "branch_resolving",
                 "no_instruction", "imc_miss", "drain", "sleeping", "gmma")
RENAMES = {"no_instructions": "no_instruction"}  # PC sampling's name -> the counter's (TopDown)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/


def reason(name):
    """TopDown's name of a PC sampling stall reason ("" for a variant not counted: *_not_issued)."""
    if name.endswith("_not_issued"):
        return ""
    r = name.split("warps_issue_stalled_", 1)[1] if "warps_issue_stalled_" in name else name  # any other: its own row
    return RENAMES.get(r, r)


def check_record(r):
    if r["type"] == "pc":
        r["name"], int(r["pc"]), int(r.get("line", 0))
        if not all(isinstance(v, int) and v >= 0 for v in dict(r["stalls"]).values()):
            raise ValueError("stall counts must be counts")
    elif r["type"] == "sass":
        r["name"], int(r["pc"]), int(r.get("smsp__sass_inst_executed", 0))
    elif r["type"] == "launch":
        r["name"], int(r["launches"]), float(r["warps_per_scheduler"])


def load(path):
    """The raw records by type; a malformed line is an error naming the file and line."""
    return topdown.read_records(path, ("process", "config", "module", "pc", "sass", "drain", "launch", "end", "error"),
                                check_record, "PC sampling", "libarchbench_pcsampling.so")


# ---------------------------------------------------------------- the arithmetic (host-only, tested)

def add(into, counts):
    for k, v in counts.items():
        into[k] = into.get(k, 0) + v


def stall_shares(counts):
    """Each stall reason's share of the stalled samples (selected, not_selected left out)."""
    stalled = {r: n for r, n in counts.items() if r not in NOT_STALLS}
    total = sum(stalled.values())
    return {r: n / total for r, n in sorted(stalled.items(), key=lambda x: -x[1])} if total else {}


def latency(counts, warps=None):
    """Seed 003's latency analysis from a bag of samples by reason: LAT, C, U, the warps needed
    1 + U/C, and with `warps` per scheduler available, covered and uncovered latency."""
    lat = sum(counts.values())
    c = counts.get("selected", 0)
    u = lat - c
    out = {"lat": lat, "covered_issue": c, "u": u, "warps_needed": (1 + u / c) if c else None}
    if warps is not None and lat:
        covered = min(u, max(0.0, warps - 1) * c)
        out.update({"warps_available": warps, "covered": covered, "uncovered": u - covered,
                    "uncovered_share": (u - covered) / u if u else 0.0,
                    "issue_utilization": min(1.0, warps / out["warps_needed"]) if c else 0.0})
        out["latency_bound"] = {r: {"share": counts[r] / lat, "uncovered_share": counts[r] / lat * out["uncovered_share"]}
                                for r in LATENCY_BOUND if counts.get(r)}
    return out


def sass_metrics(pcs):
    """Executed instructions and warp efficiency (seed 003's ACT, WAST, TOT, scalar loss) from
    per-instruction (warp-instructions, thread-instructions) pairs."""
    inst = sum(i for i, _ in pcs)
    act = sum(t for _, t in pcs)
    tot = 32 * inst
    scalar = sum(32 * i - t for i, t in pcs if i and t <= i)
    return {"inst_executed": inst, "act": act, "tot": tot, "wast": tot - act,
            "warp_efficiency": act / tot if tot else None, "scalar_loss": scalar}


def warp_counters(launches):
    """A kernel's warp efficiency from the injection's per-launch "warp" objects (counter sums
    over the profiled launches): ACT and WAST per warp-instruction, TOT = 32, executed
    warp-instructions; scalar loss needs per-instruction counts (None)."""
    inst = sum(float(w.get("smsp__inst_executed.sum", 0)) for w in launches)
    thread = sum(float(w.get("smsp__thread_inst_executed.sum", 0)) for w in launches)
    pred = [float(w["smsp__thread_inst_executed_pred_on.sum"]) for w in launches
            if "smsp__thread_inst_executed_pred_on.sum" in w]
    act = thread / inst if inst else None
    out = {"source": "counters", "launches_profiled": len(launches), "inst_executed": inst,
           "thread_inst_executed": thread, "act": act, "tot": 32, "wast": 32 - act if act is not None else None,
           "warp_efficiency": act / 32 if act is not None else None, "scalar_loss": None}
    if len(pred) == len(launches) and inst:
        out["act_pred_on"] = sum(pred) / inst
        out["warp_efficiency_pred_on"] = out["act_pred_on"] / 32
    return out


def load_warp(path):
    """The warp pass's per-kernel launches {mangled or name: (name, [warp objects])} from the
    TopDown injection's raw file (its kernel records' "warp" objects)."""
    recs = topdown.load(path)
    out = {}
    for r in recs["kernel"]:
        if isinstance(r.get("warp"), dict) and r["warp"]:
            out.setdefault(r.get("mangled") or r["name"], (r["name"], []))[1].append(r["warp"])
    return out, recs


def analyse(recs, sass_recs=None, warp=None):
    """Per kernel: samples, stall shares, latency, SASS metrics, and the same per line and PC;
    `warp` ({mangled: (name, [warp objects])}, load_warp) adds the per-kernel counters."""
    kernels = {}

    def kernel(name):
        return kernels.setdefault(name, {"kernel": name, "function": "", "samples": 0, "counts": {}, "pcs": {},
                                         "launches": 0, "warps": []})

    for r in recs["pc"]:
        counts = {}
        for k, v in r["stalls"].items():
            n = reason(k)
            if n:
                counts[n] = counts.get(n, 0) + v
        k = kernel(r["name"])
        k["function"] = r.get("function", "")
        pc = k["pcs"].setdefault(int(r["pc"]), {"pc": int(r["pc"]), "file": r.get("file", ""), "dir": r.get("dir", ""),
                                                "line": int(r.get("line", 0)), "counts": {}})
        add(pc["counts"], counts)
        add(k["counts"], counts)
    for r in (sass_recs or {}).get("sass", []):
        k = kernel(r["name"])
        k["function"] = k["function"] or r.get("function", "")
        pc = k["pcs"].setdefault(int(r["pc"]), {"pc": int(r["pc"]), "file": r.get("file", ""), "dir": r.get("dir", ""),
                                                "line": int(r.get("line", 0)), "counts": {}})
        pc["inst"] = pc.get("inst", 0) + int(r.get("smsp__sass_inst_executed", 0))
        pc["thread_inst"] = pc.get("thread_inst", 0) + int(r.get("smsp__sass_thread_inst_executed", 0))
    by_function = {k["function"]: k for k in kernels.values() if k["function"]}
    for mangled, (name, launches) in (warp or {}).items():
        k = by_function.get(mangled) or kernels.get(name) or kernel(name)
        k["function"] = k["function"] or mangled
        k["warp"] = warp_counters(launches)
    for r in recs["launch"]:
        if r["name"] in kernels:
            k = kernels[r["name"]]
            k["launches"] += int(r["launches"])
            if float(r["warps_per_scheduler"]) >= 0:  # -1: the library could not ask for the occupancy
                k["warps"].append((int(r["launches"]), float(r["warps_per_scheduler"])))
    total = sum(sum(k["counts"].values()) for k in kernels.values())
    out = []
    for k in kernels.values():
        n = sum(k["counts"].values())
        w = sum(l * x for l, x in k["warps"]) / sum(l for l, _ in k["warps"]) if k["warps"] and sum(
            l for l, _ in k["warps"]) else None
        lines = {}
        for pc in k["pcs"].values():
            ln = lines.setdefault((pc["file"], pc["line"]), {"file": pc["file"], "dir": pc["dir"], "line": pc["line"],
                                                             "counts": {}, "sass": []})
            add(ln["counts"], pc["counts"])
            if "inst" in pc:
                ln["sass"].append((pc["inst"], pc["thread_inst"]))
        has_sass = any("inst" in pc for pc in k["pcs"].values())

        def view(x, sass):
            s = sum(x["counts"].values())
            v = {"samples": s, "share": s / n if n else 0.0, "stalls": stall_shares(x["counts"]),
                 "reasons": dict(sorted(x["counts"].items(), key=lambda c: -c[1])), "latency": latency(x["counts"], w)}
            if has_sass:
                v["sass"] = sass_metrics(sass)
            return v

        pcs = [dict({"pc": pc["pc"], "file": pc["file"], "line": pc["line"]},
                    **view(pc, [(pc["inst"], pc["thread_inst"])] if "inst" in pc else []))
               for pc in sorted(k["pcs"].values(), key=lambda p: p["pc"])]
        line_views = [dict({"file": l["file"], "dir": l["dir"], "line": l["line"]}, **view(l, l["sass"]))
                      for l in lines.values()]
        line_views.sort(key=lambda l: (-l["samples"], -(l.get("sass", {}).get("inst_executed") or 0)))
        all_sass = [(p["inst"], p["thread_inst"]) for p in k["pcs"].values() if "inst" in p]
        kv = dict({"kernel": k["kernel"], "function": k["function"], "launches": k["launches"],
                   "time_share": n / total if total else 0.0},
                  **view(k, all_sass), lines=line_views, pcs=pcs)
        if has_sass:
            kv["sass"]["source"] = "sass_metrics"
        if "warp" in k:
            kv["warp"] = k["warp"]
        # The kernel's one warp-efficiency figure and where it came from: the SASS metrics
        # (instruction-exact) where they counted the kernel, else the per-kernel counters.
        src = kv.get("sass") if has_sass else kv.get("warp")
        kv["efficiency"] = {"source": src["source"] if src else "unavailable",
                            "warp_efficiency": src.get("warp_efficiency") if src else None,
                            "inst_executed": src.get("inst_executed") if src else None,
                            "lines": "sass_metrics" if has_sass else "unavailable"}
        out.append(kv)
    out.sort(key=lambda k: (-k["samples"], -(k["efficiency"]["inst_executed"] or 0)))
    return out


# ---------------------------------------------------------------- source and SASS text

class Sources:
    """Source lines by (file, dir), looked for where the line table says, then in --source-dir
    folders, the current folder and archbench's own kernels/cuda (NVRTC names its files bare)."""

    def __init__(self, dirs=()):
        self.dirs = list(dirs) + [os.getcwd(), os.path.join(HERE, "..", "kernels", "cuda")]
        self.cache = {}

    def line(self, file, folder, no):
        key = (file, folder)
        if key not in self.cache:
            self.cache[key] = None
            cands = [os.path.join(folder, file) if folder else file, file] + [
                os.path.join(d, os.path.basename(file)) for d in self.dirs]
            for c in cands:
                try:
                    with open(c, encoding="utf-8", errors="replace") as f:
                        self.cache[key] = f.read().splitlines()
                    break
                except OSError:
                    continue
        lines = self.cache[key]
        return lines[no - 1].strip() if lines and 0 < no <= len(lines) else None


def disassemble(cubin):
    """{function: {pc offset: instruction}} from nvdisasm, or {} where it is not found or fails."""
    tool = shutil.which("nvdisasm") or ("/usr/local/cuda/bin/nvdisasm" if os.path.exists("/usr/local/cuda/bin/nvdisasm")
                                         else None)
    if not tool or not cubin or not os.path.exists(cubin):
        return {}
    try:
        p = subprocess.run([tool, "-c", cubin], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_disassembly(p.stdout) if p.returncode == 0 else {}


def parse_disassembly(text):
    out, fn = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.text\.([^:\s]+):", line)
        if m:
            fn = out.setdefault(m.group(1), {})
            continue
        m = re.search(r"/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;", line)
        if m and fn is not None:
            fn[int(m.group(1), 16)] = m.group(2).strip()
    return out


def annotate(kernels, recs, sources, sass=True):
    """Adds the source text to every line and PC, and the SASS text to every PC (nvdisasm)."""
    code = {}
    if sass:
        for m in recs["module"]:
            for fn, ins in disassemble(m.get("cubin")).items():
                code.setdefault(fn, {}).update(ins)
    for k in kernels:
        for l in k["lines"]:
            l["source"] = sources.line(l["file"], l.get("dir", ""), l["line"]) if l["file"] else None
        ins = code.get(k["function"], {})
        for p in k["pcs"]:
            p["sass_text"] = ins.get(p["pc"])
        for pc, text in ins.items():  # instructions never sampled still belong in the listing
            if not any(p["pc"] == pc for p in k["pcs"]):
                k["pcs"].append({"pc": pc, "file": "", "line": 0, "samples": 0, "share": 0.0, "stalls": {},
                                 "reasons": {}, "sass_text": text})
        k["pcs"].sort(key=lambda p: p["pc"])


# ---------------------------------------------------------------- views

SOURCE_TAGS = {"sass_metrics": "sass", "counters": "ctr", "unavailable": "-"}


def short(name, width=60):
    return name if len(name) <= width else name[:width - 3] + "..."


def top_reasons(stalls, n=3):
    return ", ".join(f"{r} {100 * s:.0f}%" for r, s in list(stalls.items())[:n]) or "-"


def count_coverage(kernels):
    """Which kernels have instruction counts where: per line and instruction (CUPTI's SASS metrics),
    per kernel only (the warp pass's counters), none; each a list of kernel names."""
    out = {"per_line": [], "per_kernel_only": [], "none": []}
    for k in kernels:
        src = k.get("efficiency", {}).get("source")
        out["per_line" if src == "sass_metrics" else "per_kernel_only" if src == "counters" else "none"].append(k["kernel"])
    return out


def coverage_lines(kernels, width=100):
    """The report's plain statement of which kernels have per-line counts ([] where no kernel has
    counts of either kind: no SASS metrics run, no warp pass)."""
    cov = count_coverage(kernels)
    if not cov["per_line"] and not cov["per_kernel_only"]:
        return []

    def names(ks):
        text = ", ".join(short(k, 40) for k in ks[:12]) + (f", ... ({len(ks)} in all)" if len(ks) > 12 else "")
        return text or "none"

    out = ["", f"Per-line instruction counts and warp efficiency (SASS metrics): {len(cov['per_line'])} of "
               f"{len(kernels)} kernels: {names(cov['per_line'])}"]
    if cov["per_kernel_only"]:
        out.append(f"Per-kernel counts only, no per-line figures (warp pass counters): {names(cov['per_kernel_only'])}")
    if cov["none"]:
        out.append(f"No instruction counts: {names(cov['none'])}")
    return out


def fixed_costs_line(context):
    """The sampled run's fixed costs (the library's end record), or "" for an older raw file."""
    parts = []
    if context.get("enable_s") is not None:
        wait = context.get("enable_wait_s")
        parts.append(f"enable {context['enable_s']:.3f} s" + (
            f" ({context.get('pc_enable')}: the first launch waited {wait:.3f} s)" if wait is not None else
            f" ({context['pc_enable']})" if context.get("pc_enable") else ""))
    for key, what in (("first_launch_s", "first launch"), ("exit_drain_s", "drain at exit"), ("disable_s", "disable")):
        if context.get(key) is not None:
            parts.append(f"{what} {context[key]:.3f} s")
    return "PC sampling's fixed costs: " + ", ".join(parts) if parts else ""


def text_report(kernels, context, top=5, lines=8):
    out = []
    if "period_log2" in context:
        out.append(f"PC sampling: {context.get('total_samples', 0)} samples, {context.get('dropped_samples', 0)} dropped; "
                   f"period 2^{context['period_log2']} cycles, continuous collection; {context.get('device', '')}")
    head = (f"{'kernel':<60} {'samples':>9} {'share':>6} {'warps need/have':>15} {'warp eff':>8} {'src':>4} {'inst':>10}"
            "  top stalls")
    out += ["", "Kernels, hottest first:", head, "-" * len(head)]
    for k in kernels:
        lat, ke = k["latency"], k.get("efficiency", {})
        need = f"{lat['warps_needed']:.1f}" if lat.get("warps_needed") else "-"
        have = f"{lat['warps_available']:.1f}" if lat.get("warps_available") is not None else "-"
        eff = f"{ke['warp_efficiency']:.3f}" if ke.get("warp_efficiency") is not None else "-"
        inst = f"{ke['inst_executed']:.3g}" if ke.get("inst_executed") is not None else "-"
        src = SOURCE_TAGS.get(ke.get("source"), "-")
        out.append(f"{short(k['kernel']):<60} {k['samples']:>9} {100 * k['time_share']:>5.1f}% {need + '/' + have:>15} "
                   f"{eff:>8} {src:>4} {inst:>10}  {top_reasons(k['stalls'])}")
    if any(k.get("efficiency", {}).get("source") == "counters" for k in kernels):
        out.append("(warp eff src: sass = CUPTI's SASS metrics, per instruction; ctr = per-kernel counters "
                   "(libarchbench_topdown.so, warp set) where the SASS metrics have no records; line figures "
                   "only from SASS metrics)")
    for k in kernels[:top]:
        if not k["samples"] and not k.get("sass"):
            continue
        out += ["", f"{k['kernel']}: hottest lines"]
        for l in k["lines"][:lines]:
            where = f"{os.path.basename(l['file']) or '?'}:{l['line']}"
            eff = l.get("sass", {}).get("warp_efficiency")
            src = l.get("source")
            out.append(f"  {where:<24} {100 * l['share']:>5.1f}%  {top_reasons(l['stalls']):<48} "
                       f"{'eff ' + format(eff, '.2f') if eff is not None else '':<9} {('| ' + src) if src else ''}")
    if context.get("sass_strategy"):
        n_missing = len(context.get("sass_missing", []))
        target = f", target {context['sass_target']}" if context.get("sass_target") else ""
        n = context.get("sass_runs")
        runs = (f", {n} run{'s' if n != 1 else ''}" + (f" in {context['sass_s']:.3f} s" if "sass_s" in context else "")
                if n else "")
        out += ["", f"SASS metrics (strategy {context['sass_strategy']}{target}{runs}): counts for "
                    f"{context.get('sass_counted', 0)} of {context.get('sass_counted', 0) + n_missing} "
                    f"{'launched' if context.get('sass_functions') is None else 'chosen'} functions, "
                    f"{len(context.get('sass_flush_log', []))} flushes"]
    out += coverage_lines(kernels)
    if context.get("problems"):
        out += ["", "Problems:"] + [f"  {p}" for p in context["problems"]]
    if "overhead" in context:
        out += ["", f"wall time: native {context['native_s']:.3f} s, sampled {context['sampled_s']:.3f} s, "
                    f"overhead {context['overhead']:.2f}x" +
                (f"; SASS metrics {'runs' if context.get('sass_runs', 1) > 1 else 'run'} {context['sass_s']:.3f} s"
                 if "sass_s" in context else "")]
    if fixed_costs_line(context):
        out.append(fixed_costs_line(context))
    return "\n".join(out)


def html_report(kernels, context, top=5):
    """A self-contained page: per kernel its summary, annotated source lines and SASS."""
    try:
        from .report import CSS
    except Exception:  # noqa: BLE001  (the page keeps its tables without the report's style)
        CSS = "body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
    e = cli.html
    css = CSS + "\n.bar{display:inline-block;height:9px;background:#c33;vertical-align:middle}pre{margin:0}" \
                "td.src{font-family:monospace;white-space:pre}"
    body = [f"<h1>Where kernels stall: {e(context.get('command', ''))}</h1>",
            f"<p class=note>{e(context.get('device', ''))}; {context.get('total_samples', 0)} samples, period "
            f"2^{e(context.get('period_log2', '?'))} cycles; overhead {e(format(context['overhead'], '.2f') + 'x' if 'overhead' in context else 'not measured')}</p>",
            "<table><tr><th>kernel</th><th>samples</th><th>share</th><th>top stalls</th><th>warps needed</th>"
            "<th>warps held</th><th>warp efficiency</th><th>instructions</th></tr>"]
    for k in kernels:
        lat, ke = k["latency"], k.get("efficiency", {})
        body.append(f"<tr><td>{e(short(k['kernel'], 90))}</td><td class=n>{k['samples']}</td>"
                    f"<td class=n>{100 * k['time_share']:.1f}%</td><td>{e(top_reasons(k['stalls']))}</td>"
                    f"<td class=n>{e(format(lat['warps_needed'], '.1f') if lat.get('warps_needed') else '-')}</td>"
                    f"<td class=n>{e(format(lat['warps_available'], '.1f') if lat.get('warps_available') is not None else '-')}</td>"
                    f"<td class=n>{e(format(ke['warp_efficiency'], '.3f') + ' (' + ke['source'] + ')' if ke.get('warp_efficiency') is not None else '-')}</td>"
                    f"<td class=n>{e(format(ke['inst_executed'], '.3g') if ke.get('inst_executed') is not None else '-')}</td></tr>")
    body.append("</table>")
    for i, k in enumerate(kernels[:top]):
        body.append(f"<section class=chart><h2 id=k{i}>{e(short(k['kernel'], 120))}</h2>")
        lat = k["latency"]
        if lat.get("latency_bound"):
            body.append("<p class=note>latency-bound reasons (share of samples / uncovered): " + e(", ".join(
                f"{r} {100 * v['share']:.1f}%/{100 * v['uncovered_share']:.1f}%" for r, v in lat["latency_bound"].items())) + "</p>")
        body.append("<h3>Source lines</h3><table><tr><th>file:line</th><th>samples</th><th>stalls</th>"
                    "<th>warp eff.</th><th>source</th></tr>")
        for l in sorted(k["lines"], key=lambda l: (l["file"], l["line"])):
            eff = l.get("sass", {}).get("warp_efficiency")
            body.append(f"<tr><td>{e(os.path.basename(l['file']) or '?')}:{l['line']}</td>"
                        f"<td class=n><span class=bar style='width:{int(60 * l['share'])}px'></span> {100 * l['share']:.1f}%</td>"
                        f"<td>{e(top_reasons(l['stalls']))}</td><td class=n>{e(format(eff, '.2f') if eff is not None else '')}</td>"
                        f"<td class=src>{e(l.get('source') or '')}</td></tr>")
        body.append("</table><h3>SASS</h3><table><tr><th>offset</th><th>line</th><th>samples</th><th>stalls</th>"
                    "<th>executed</th><th>warp eff.</th><th>instruction</th></tr>")
        for p in k["pcs"]:
            s = p.get("sass", {})
            body.append(f"<tr><td class=n>{p['pc']:#06x}</td><td class=n>{p['line'] or ''}</td>"
                        f"<td class=n><span class=bar style='width:{int(60 * p['share'])}px'></span> {p['samples']}</td>"
                        f"<td>{e(top_reasons(p['stalls']))}</td><td class=n>{e(s.get('inst_executed', ''))}</td>"
                        f"<td class=n>{e(format(s['warp_efficiency'], '.2f') if s.get('warp_efficiency') is not None else '')}</td>"
                        f"<td class=src>{e(p.get('sass_text') or '')}</td></tr>")
        body.append("</table></section>")
    return ("<!DOCTYPE html><html><head><meta charset=utf-8><title>archbench PC sampling</title>"
            f"<style>{css}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# ---------------------------------------------------------------- running a program

def beside(raw, part):
    """The file RAW.PART.jsonl beside RAW.jsonl (RAW.PART where RAW does not end in .jsonl)."""
    return raw[:-len(".jsonl")] + f".{part}.jsonl" if raw.endswith(".jsonl") else f"{raw}.{part}"


def sass_runs(a, cmd, env, runs, context):
    """Runs the program in SASS metrics mode once per (function counted, strategy target; or None,
    the options' strategy), raw file, label); returns [(function or None, file)] for the runs that
    wrote records. A run that exits non-zero or writes nothing is a Problem; the rest go on."""
    written, context["sass_s"] = [], 0.0
    for fn, out, label in runs:
        env.update({"ARCHBENCH_PCSAMPLE_OUT": out, "ARCHBENCH_PCSAMPLE_SASS_STRATEGY": "target" if fn else sass_strategy(a)})
        if fn or a.sass_target:
            env["ARCHBENCH_PCSAMPLE_SASS_TARGET"] = fn or a.sass_target
        else:
            env.pop("ARCHBENCH_PCSAMPLE_SASS_TARGET", None)
        if os.path.exists(out):
            os.remove(out)
        print(f"{TOOL}: {label}", file=sys.stderr)
        rc, seconds = timed(cmd, env, a.timeout or None, label)
        context["sass_s"] += seconds
        wrote = os.path.exists(out) and os.path.getsize(out) > 0
        why = ([f"the program exited with {rc}"] if rc else []) + ([] if wrote else ["no records written"])
        if why:
            print(f"{TOOL}: {label}: {', '.join(why)}", file=sys.stderr)
            context.setdefault("problems", []).append(f"{label}: {', '.join(why)}")
        if wrote:
            written.append((fn, out))
    return written


def find_lib(given):
    return topdown.find_lib(given, "libarchbench_pcsampling.so", "ARCHBENCH_PCSAMPLE_LIB")


def timed(cmd, env, timeout=None, what="run"):
    """The program's exit status and wall time; past `timeout` seconds its process group is
    killed (TERM, then KILL) and the status is 124, as timeout(1) says."""
    start = time.monotonic()
    try:
        p = subprocess.Popen(cmd, env=env, start_new_session=bool(timeout))
    except FileNotFoundError:
        raise InputError(f"no such program: {cmd[0]}")
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"{TOOL}: the {what} ran past {timeout:g} s: stopped (its records so far are kept)", file=sys.stderr)
        for sig in (15, 9):
            try:
                os.killpg(p.pid, sig)
            except OSError:
                pass
            try:
                p.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        rc = 124
    return rc, time.monotonic() - start


def context_of(recs, context):
    for p in recs["config"][:1]:
        context.update({"device": p.get("device_name", ""), "period_log2": p.get("period_log2"),
                        "max_warps_per_scheduler": p.get("max_warps_per_scheduler")})
    for e in recs["end"][:1]:
        context.update({k: e.get(k) for k in ("total_samples", "dropped_samples", "non_user_samples",
                                               "hardware_buffer_full", "drains", "disabled_by_watchdog", "forced_exit",
                                               "overflow_drains", "overflow_s", "lost_samples_estimate")})
        if e.get("overflow_drains"):
            context.setdefault("problems", []).append(
                f"CUPTI's hardware buffer overflowed: {e['overflow_drains']} drains failed over "
                f"{float(e.get('overflow_s', 0)):.2f} s; about {int(e.get('lost_samples_estimate', 0))} samples lost "
                f"(estimated at the rate of the rest; a larger --period or --hw-buffer-mb avoids it)")
        if e.get("error"):
            context.setdefault("problems", []).append(e["error"])
        if e.get("pc_enable"):
            context["pc_enable"] = e["pc_enable"]
        for k in ("enable_s", "first_launch_s", "exit_drain_s", "disable_s"):  # -1: not measured
            if isinstance(e.get(k), (int, float)) and e[k] >= 0:
                context[k] = float(e[k])
    for w in recs.get("pc_enable_wait", [])[:1]:
        if isinstance(w.get("waited_s"), (int, float)):
            context["enable_wait_s"] = float(w["waited_s"])
    if not recs["end"]:
        # Killed or hung: no end record. The samples drained before that still count.
        context["incomplete"] = True
        context["total_samples"] = sum(int(d.get("total_samples", 0)) for d in recs.get("drain", []))
        context["dropped_samples"] = sum(int(d.get("dropped_samples", 0)) for d in recs.get("drain", []))
        context.setdefault("problems", []).append(
            "no end record: the sampled run did not finish (hung or killed); only the samples drained before are here")
    for e in recs["error"]:
        print(f"{TOOL}: {e.get('reason')}", file=sys.stderr)
        context.setdefault("problems", []).append(e.get("reason", ""))
    for w in recs.get("watchdog", []):
        text = (f"watchdog: the program waited in {w.get('call')} for {float(w.get('seconds', 0)):.0f} s under sampling"
                if w.get("stuck") == "program" else
                f"watchdog: the library was stuck in {w.get('call')} for {float(w.get('seconds', 0)):.0f} s"
                + (" at exit" if w.get("at_exit") else ""))
        print(f"{TOOL}: {text}", file=sys.stderr)
        context.setdefault("problems", []).append(text)
    if context.get("disabled_by_watchdog"):
        context.setdefault("problems", []).append("PC sampling was disabled by the watchdog: samples cover the run "
                                                  "only until then")
    if context.get("forced_exit"):
        context.setdefault("problems", []).append("the library ended the process at exit (stuck in CUPTI)")
    if "problems" in context:
        context["problems"] = list(dict.fromkeys(p for p in context["problems"] if p))
    return context


def sass_flushes(recs):
    """The SASS metrics run's flushes, in order: where each happened, its records, the functions
    it had counts for ({function: records}) and CUPTI's error; and every function counted by any."""
    flushes, counted = [], set()
    for f in recs.get("sass_flush", []):
        functions = {fn: int(v.get("records", 0)) for fn, v in dict(f.get("functions") or {}).items()}
        flushes.append({"where": f.get("where", ""), "records": int(f.get("records", 0)), "functions": functions,
                        "error": f.get("error", "")})
        counted.update(fn for fn, n in functions.items() if n)
    return flushes, counted


def sass_context(recs, context):
    """The SASS metrics run's strategy, ranges and flushes, and the launched functions it has no
    counts for (a Problem); for merged runs (merge_sass) the chosen functions it has no counts for,
    the functions counted and the launched ones without counts (per-kernel counts only)."""
    end = recs["end"][0] if recs["end"] else {}
    context.update({k: end.get(k) for k in ("sass_ranges", "sass_deferred_ranges", "sass_dropped_records",
                                             "sass_strategy", "sass_enables", "sass_flushes") if k in end})
    if end.get("sass_target"):
        context["sass_target"] = end["sass_target"]
    flushes, _ = sass_flushes(recs)
    if flushes:
        context["sass_flush_log"] = flushes
        errors = sorted({f["error"] for f in flushes if f["error"]})
        if errors:
            context.setdefault("problems", []).append("SASS metrics: flush failed: " + "; ".join(errors))
    late = sorted({r.get("function") for r in recs.get("sass_late", [])} - {None})
    if late:
        context["sass_late"] = late
    if end.get("sass_dropped_records"):
        context.setdefault("problems", []).append(
            f"SASS metrics: CUPTI dropped {end['sass_dropped_records']} instruction records at a range's end")
    counted = {r.get("function") for r in recs["sass"]} - {None}
    launched = {r.get("function") for r in recs["launch"]} - {None}
    chosen = recs.get("sass_chosen")
    expected = launched if chosen is None else set(chosen)
    missing = sorted(expected - counted)
    context["sass_counted"] = len(counted & expected) if expected else len(counted)
    if "sass_runs" in recs:
        context.setdefault("sass_runs", recs["sass_runs"])
    if chosen is not None:
        context.update({"sass_functions": chosen, "sass_counted_functions": [f for f in chosen if f in counted],
                        "sass_uncounted": sorted(launched - counted)})
    if missing:
        context["sass_missing"] = missing
        strategy = f" (strategy {context['sass_strategy']})" if context.get("sass_strategy") else ""
        context.setdefault("problems", []).append(
            f"SASS metrics{strategy}: no counts for {len(missing)} of the {len(missing) + context['sass_counted']} "
            f"{'launched' if chosen is None else 'chosen'} functions: " + ", ".join(missing[:8])
            + (" ..." if len(missing) > 8 else ""))


def sass_plan(recs, n=None):
    """The kernel functions --sass-strategy each counts, a run each, [(function, name)]: the `n`
    hottest by PC samples (the report shows the --top hottest line by line), or with n None every
    function launched, the sampled ones first, hottest first."""
    plan = {k["function"]: k["kernel"] for k in analyse(recs) if k["function"] and k["samples"]}
    for r in recs["launch"] if n is None else []:
        if r.get("function"):
            plan.setdefault(r["function"], r.get("name") or r["function"])
    return list(plan.items())[:n]


def sass_target_of(recs):
    """The function a run of strategy target counted (its sass_range record, else the target asked
    for where it was a name), or None for a run of another strategy."""
    head = (recs["end"] or recs["process"] or [{}])[0]
    if head.get("sass_strategy") != "target":
        return None
    ranges = [r["function"] for r in recs.get("sass_range", []) if r.get("function")]
    target = head.get("sass_target") or ""
    return ranges[0] if ranges else target if target and not target.isdigit() else None


def merge_sass(runs, chosen=None):
    """One set of SASS records from several runs, [(the function a run was for or None, its
    records)]: a run for one function (strategy target) gives only that function's records (another
    function's would be partial, or counted twice), a run of another strategy the functions that no
    run before it gave; no function counted twice. `chosen`: the functions asked for (default: the
    runs' targets, where every run had one), against which sass_context names the missing ones."""
    runs = sorted(runs, key=lambda r: r[0] is None)  # the runs for one function first
    taken, sass = set(), []
    for target, recs in runs:
        fns = ({target} if target else {r.get("function") for r in recs["sass"]}) - taken
        sass += [r for r in recs["sass"] if r.get("function") in fns]
        taken |= fns
    ends = [recs["end"][0] for _, recs in runs if recs["end"]]
    end = {k: sum(int(e.get(k) or 0) for e in ends) for k in (
        "sass_ranges", "sass_deferred_ranges", "sass_dropped_records", "sass_enables", "sass_flushes")
           if any(k in e for e in ends)}
    strategies = list(dict.fromkeys(e["sass_strategy"] for e in ends if e.get("sass_strategy")))
    if strategies:
        end["sass_strategy"] = "each" if strategies == ["target"] else "+".join(strategies)
    if chosen is None and runs and all(t for t, _ in runs):
        chosen = [t for t, _ in runs]
    merged = {t: [r for _, recs in runs for r in recs.get(t, [])] for t in ("process", "error", "launch", "sass_flush")}
    merged.update({"end": [end], "sass": sass, "sass_chosen": chosen, "sass_runs": len(runs)})
    return merged


def sass_records(files, chosen=None):
    """The SASS records of the raw files [(the function a run was for or None, path)]: one run of
    another strategy as it is, else merged (merge_sass); None where there are none."""
    loaded = [(fn or sass_target_of(r), r) for fn, path in files for r in [load(path)]]
    if chosen is None and len(loaded) == 1:
        return loaded[0][1]
    return merge_sass(loaded, chosen) if loaded or chosen else None


def warp_pass_needed(a, recs):
    """The functions the warp pass should count: [] for all, None for no pass (--warp-pass, and in
    auto mode whether the SASS metrics records, sass_records, leave a launched function without
    records)."""
    if a.warp_pass == "never" or (a.warp_pass == "auto" and a.no_sass):
        return None
    if a.warp_pass == "always" or not recs:
        return []
    counted = {r.get("function") for r in recs["sass"]}
    missing = sorted({r.get("function") for r in recs["launch"]} - counted - {None})
    if not recs["launch"] and not recs["sass"]:
        return []  # no launch seen: count whatever runs
    return missing or None


def warp_pass(a, cmd, raw, functions, context):
    """Runs the program under libarchbench_topdown.so with ARCHBENCH_TOPDOWN_METRICS=warp (the
    first launch of each kernel and shape, at most 2 a kernel; only `functions` where given);
    returns its exit status."""
    try:
        lib = topdown.find_lib(a.topdown_lib)
    except InputError as e:
        context.setdefault("problems", []).append(f"warp pass skipped: {e}")
        return 0
    env = topdown.cupti_env(dict(os.environ))
    names = [f for f in functions if re.fullmatch(r"[A-Za-z0-9_$.]+", f)]
    kernel = "^(" + "|".join(re.escape(f) for f in names) + ")$" if names and len(names) == len(functions) \
        and len(names) <= 256 else ""
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_TOPDOWN_OUT": raw, "ARCHBENCH_TOPDOWN_METRICS": "warp",
                "ARCHBENCH_TOPDOWN_KERNEL": kernel, "ARCHBENCH_TOPDOWN_SAMPLE": "1", "ARCHBENCH_TOPDOWN_MAX": "2"})
    if os.path.exists(raw):
        os.remove(raw)
    print(f"{TOOL}: warp pass (per-kernel counters, libarchbench_topdown.so) for "
          f"{len(functions) if functions else 'all'} kernel functions", file=sys.stderr)
    rc, context["warp_s"] = timed(cmd, env, a.timeout or None, "warp pass")
    context["warp_functions"] = functions or "all"
    return rc


SASS_STRATEGIES = ("each", "deferred", "deferred-module", "once", "function", "reconfig", "target")


def sass_strategy(a):
    """The library's ARCHBENCH_PCSAMPLE_SASS_STRATEGY for the options: --sass-strategy, unless only
    the older --sass-range was given (one: once, function: function)."""
    if a.sass_range and a.sass_strategy == "each":
        return {"one": "once", "function": "function"}[a.sass_range]
    return a.sass_strategy


def kernels_option(v):
    """--sass-kernels: all, or a count N >= 1."""
    if v == "all":
        return v
    if not v.isdigit() or int(v) < 1:
        raise argparse.ArgumentTypeError("takes all or a count N >= 1")
    return int(v)


def main(argv=None):
    return cli.run(TOOL, run, argv)


def run(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--period", type=int, default=None, metavar="LOG2",
                    help="sampling period, 2^LOG2 cycles (5..31); default: the smallest at which the GPU asks for "
                         "at most 4 M samples/s, what CUPTI's decoding keeps up with (2^16 on the H100; at 2^13 "
                         "its hardware buffer overflowed under a full GPU); 0: CUPTI's own (2^11 on the H100)")
    ap.add_argument("--hw-buffer-mb", type=int, default=32, metavar="MB",
                    help="CUPTI's hardware buffer for the samples (default 32; 0: CUPTI's own, 512)")
    ap.add_argument("--worker-sleep-ms", type=int, default=20, metavar="MS",
                    help="how long CUPTI's decoding thread sleeps between passes over the hardware buffer "
                         "(default 20; 0: CUPTI's own, 100)")
    ap.add_argument("--no-sass", action="store_true", help="skip the SASS metrics runs (instructions, warp efficiency)")
    ap.add_argument("--sass-strategy", choices=SASS_STRATEGIES, default="each",
                    help="SASS metrics: each (default: one run of the program per chosen kernel function, "
                         "--sass-kernels, each counting that function alone (the library's target strategy, the "
                         "function's mangled name) and keeping only its records, merged; costs that many more runs "
                         "of the program); the others are one run: deferred (one enable at the context's first kernel "
                         "launch, the launched function's module loaded whole, every loaded function patched at once, "
                         "flushed at the end), deferred-module (and a new range for a module loaded later), once (one lazy "
                         "range from the context's creation), function (a range per function from its first "
                         "launch), reconfig (as function, the device's SASS configuration renewed between), target "
                         "(one function, --sass-target, the device configured at its first launch); on the H100 every "
                         "one-run strategy counted only the first function launched")
    ap.add_argument("--sass-kernels", type=kernels_option, metavar="N|all",
                    help="with --sass-strategy each: the kernel functions counted, a run each: the N hottest by PC "
                         "samples (default: --top, those the report shows line by line), or all (every kernel "
                         "launched in the sampled run)")
    ap.add_argument("--sass-target", metavar="N|NAME",
                    help="with --sass-strategy target: the Nth distinct function launched (default 1) or its name "
                         "(mangled, or demangled with or without parameters: hot_chase, lanes<8>)")
    ap.add_argument("--sass-range", choices=("function", "one"), help=argparse.SUPPRESS)  # older name: function, once
    ap.add_argument("--sass-loading", choices=("eager", "lazy", "inherit"), default="eager",
                    help="CUDA_MODULE_LOADING for the SASS metrics runs (default eager: every function loaded "
                         "before its first launch, so CUPTI can patch it then; inherit: the environment's)")
    ap.add_argument("--sass-lazy-patching", type=int, choices=(0, 1), default=None,
                    help="cuptiSassMetricsEnable's enableLazyPatching (default: 0 for each, target and the deferred "
                         "strategies, every loaded function patched at the enable; 1 for the others, each function at its first launch)")
    ap.add_argument("--pc-enable", choices=("sync", "async"), default="async",
                    help="when CUPTI's PC sampling is enabled (about 0.08 s on the H100): async (default) on a thread "
                         "of the library while the program does its host work, the context's first kernel or graph "
                         "launch waiting for it (no kernel unsampled; CG 18-56 ms faster on the H100); sync in the "
                         "context-created callback")
    ap.add_argument("--warp-pass", choices=("auto", "always", "never"), default="auto",
                    help="per-kernel warp efficiency from counters (a run under libarchbench_topdown.so, its 'warp' "
                         "set): auto (default) where the SASS metrics run has no records for a launched kernel (or "
                         "none at all), always, never")
    ap.add_argument("--topdown-lib", help="path of libarchbench_topdown.so (the warp pass)")
    ap.add_argument("--warp-report", help="with --report: the warp pass's raw file (TopDown injection records)")
    ap.add_argument("--no-native", action="store_true", help="skip the native run (no overhead figure)")
    ap.add_argument("--top", type=int, default=5, help="kernels shown line by line (default 5)")
    ap.add_argument("--lines", type=int, default=8, help="lines shown per kernel (default 8)")
    ap.add_argument("--source-dir", action="append", default=[], help="a folder to look for source files in")
    ap.add_argument("--json", help="write the analysis as JSON here")
    ap.add_argument("--html", help="write the annotated source and SASS page here")
    ap.add_argument("--raw", help="keep the sampling run's raw records here (SASS runs: RAW.sass.K.jsonl, K = 1, 2, "
                                  "... a kernel, with each; RAW.sass.jsonl with another strategy)")
    ap.add_argument("--lib", help="path of libarchbench_pcsampling.so")
    ap.add_argument("--timeout", type=float, default=0, metavar="S",
                    help="stop each run of the program after S seconds (0: never); the records so far are reported")
    ap.add_argument("--drain", choices=("thread", "sync", "exit"), default="thread",
                    help="when the library takes samples from CUPTI: its own thread (default), the program's "
                         "synchronisations, or only at the end")
    ap.add_argument("--watchdog", type=float, default=10, metavar="S",
                    help="seconds a synchronisation, launch or CUPTI call may last before the library says so "
                         "and disables sampling (default 10; 0: off)")
    ap.add_argument("--debug", action="store_true", help="the library logs every step on stderr "
                                                         "(ARCHBENCH_PCSAMPLING_DEBUG=1)")
    ap.add_argument("--report", help="analyse this raw file instead of running a program")
    ap.add_argument("--sass-report", action="append", metavar="SASS.jsonl",
                    help="with --report: a SASS metrics run's raw file; again for more (each's RAW.sass.K.jsonl): "
                         "merged, a run for one function giving only that function's records")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    a = ap.parse_args(argv)
    cmd = topdown.program_or_report(ap, a)
    if a.period is not None and a.period and not 5 <= a.period <= 31:
        ap.error("--period takes 5..31 (log2 of cycles)")
    if a.sass_target and a.sass_strategy != "target":
        ap.error("--sass-target goes with --sass-strategy target")
    if a.sass_kernels and a.sass_strategy != "each":
        ap.error("--sass-kernels goes with --sass-strategy each")
    context = {"period_asked": a.period}
    rc = 0
    raw, sass_files, chosen = a.report, [(None, p) for p in a.sass_report or []], None
    if cmd:
        lib = find_lib(a.lib)
        if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
            raise InputError(f"no such program: {cmd[0]}")
        raw = a.raw or os.path.join(tempfile.mkdtemp(prefix="archbench-pcsample-"), "raw.jsonl")
        context["command"] = " ".join(cmd)
        if not a.no_native:
            native_rc, context["native_s"] = timed(cmd, dict(os.environ), a.timeout or None, "native run")
            if native_rc != 0:
                print(f"{TOOL}: the program exited with {native_rc} natively", file=sys.stderr)
        env = topdown.cupti_env(dict(os.environ))
        env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_PCSAMPLE_OUT": raw, "ARCHBENCH_PCSAMPLE_MODE": "pc",
                    "ARCHBENCH_PCSAMPLE_PERIOD": "auto" if a.period is None else str(a.period),
                    "ARCHBENCH_PCSAMPLE_DRAIN": a.drain,
                    "ARCHBENCH_PCSAMPLE_WATCHDOG_S": str(a.watchdog),
                    "ARCHBENCH_PCSAMPLE_HW_BUFFER_MB": str(a.hw_buffer_mb),
                    "ARCHBENCH_PCSAMPLE_PC_ENABLE": a.pc_enable,
                    "ARCHBENCH_PCSAMPLE_WORKER_SLEEP_MS": str(a.worker_sleep_ms)})
        if a.debug:
            env["ARCHBENCH_PCSAMPLING_DEBUG"] = "1"
        print(f"{TOOL}: sampled run (drain {a.drain}, watchdog {a.watchdog:g} s)", file=sys.stderr)
        rc, context["sampled_s"] = timed(cmd, env, a.timeout or None, "sampled run")
        if context.get("native_s") and rc != 124:
            context["overhead"] = context["sampled_s"] / context["native_s"]
        if rc != 0:
            print(f"{TOOL}: the program exited with {rc} under sampling", file=sys.stderr)
        if not a.no_sass:
            env.update({"ARCHBENCH_PCSAMPLE_MODE": "sass"})
            env.pop("ARCHBENCH_PCSAMPLE_SASS_RANGE", None)
            if a.sass_lazy_patching is None:
                env.pop("ARCHBENCH_PCSAMPLE_SASS_LAZY", None)
            else:
                env["ARCHBENCH_PCSAMPLE_SASS_LAZY"] = str(a.sass_lazy_patching)
            if a.sass_loading != "inherit":
                env["CUDA_MODULE_LOADING"] = a.sass_loading.upper()
            if sass_strategy(a) == "each":
                plan = sass_plan(load(raw), None if a.sass_kernels == "all" else a.sass_kernels or a.top) \
                    if os.path.exists(raw) else []
                chosen, context["sass_runs"] = [fn for fn, _ in plan], len(plan)
                runs = [(fn, beside(raw, f"sass.{k}"), f"SASS metrics run {k}/{len(plan)}: {short(name)}")
                        for k, (fn, name) in enumerate(plan, 1)]
                if not plan:
                    print(f"{TOOL}: no kernel functions to count in SASS metrics runs", file=sys.stderr)
            else:
                runs = [(None, beside(raw, "sass"), "SASS metrics run")]
            sass_files = sass_runs(a, cmd, env, runs, context)
            context["sass_raw"] = [f for _, f in sass_files]
        context["raw"] = raw
    missing_files = [p for _, p in sass_files if not os.path.exists(p)]
    if missing_files:
        context.setdefault("problems", []).append("SASS metrics: no such file: " + ", ".join(missing_files))
    sass_recs = sass_records([(fn, p) for fn, p in sass_files if os.path.exists(p)], chosen)
    if cmd:
        sass_missing = warp_pass_needed(a, sass_recs)
        if sass_missing is not None:
            warp_raw = beside(raw, "warp")
            warp_rc = warp_pass(a, cmd, warp_raw, sass_missing, context)
            if warp_rc != 0:
                print(f"{TOOL}: the program exited with {warp_rc} in the warp pass", file=sys.stderr)
            a.warp_report = warp_raw
        if not os.path.exists(raw):  # the injection never started: no CUDA, or no driver
            print(f"{TOOL}: no records: the program started no CUDA context under sampling", file=sys.stderr)
            return rc or cli.EXIT_BAD_INPUT
    recs = load(raw)
    for p in recs["process"][:1]:
        context["date"] = p.get("date", "")
        context.setdefault("command", p.get("command", ""))
    context_of(recs, context)
    if sass_recs:
        sass_context(sass_recs, context)
    warp = None
    if a.warp_report and os.path.exists(a.warp_report):
        warp, warp_recs = load_warp(a.warp_report)
        context["warp_raw"] = a.warp_report
        for e in warp_recs["error"]:
            context.setdefault("problems", []).append(f"warp pass: {e.get('reason', '')}")
        if not warp:
            context.setdefault("problems", []).append("warp pass: no kernel records with warp counters")
    elif a.warp_report:
        context.setdefault("problems", []).append(f"warp pass: no records ({a.warp_report} missing)")
    kernels = analyse(recs, sass_recs, warp)
    context["counts"] = count_coverage(kernels)
    annotate(kernels, recs, Sources(a.source_dir), sass=bool(a.html))
    print(text_report(kernels, context, a.top, a.lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"context": context, "kernels": kernels}, f, indent=1)
    if a.html:
        with open(a.html, "w", encoding="utf-8") as f:
            f.write(html_report(kernels, context, a.top))
    return rc
