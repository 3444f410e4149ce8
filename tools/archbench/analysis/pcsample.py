"""Where a program's kernels stall, from PC sampling's records (seed 003 section V): per kernel,
line and instruction, each stall reason's share, seed 003's latency analysis and warp efficiency
(CUPTI's SASS metrics, else the warp pass's per-kernel counters); which functions the SASS metrics
runs counted, and merging those runs."""

from ..records.raw import load_pc

NOT_STALLS = ("selected", "not_selected")
# A warp waits for something to finish (latency) or for a unit to take its instruction (throughput).
LATENCY_BOUND = ("long_scoreboard", "short_scoreboard", "wait", "barrier", "membar", "branch_resolving",
                 "no_instruction", "imc_miss", "drain", "sleeping", "gmma")
RENAMES = {"no_instructions": "no_instruction"}  # PC sampling's name -> the counter's (TopDown)


def reason(name):
    """TopDown's name of a PC sampling stall reason ("" for a variant not counted: *_not_issued)."""
    if name.endswith("_not_issued"):
        return ""
    r = name.split("warps_issue_stalled_", 1)[1] if "warps_issue_stalled_" in name else name  # any other: its own row
    return RENAMES.get(r, r)


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


def annotate(kernels, code, sources):
    """Adds the source text to every line (sources: records.sources.Sources) and the SASS text
    ({function: {pc offset: instruction}}) to every PC, with the instructions never sampled."""
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


def count_coverage(kernels):
    """Which kernels have instruction counts where: per line and instruction (CUPTI's SASS metrics),
    per kernel only (the warp pass's counters), none; each a list of kernel names."""
    out = {"per_line": [], "per_kernel_only": [], "none": []}
    for k in kernels:
        src = k.get("efficiency", {}).get("source")
        out["per_line" if src == "sass_metrics" else "per_kernel_only" if src == "counters" else "none"].append(k["kernel"])
    return out


def context_of(recs, context, say=lambda text: None):
    """The sampled run's context from its records: the device and period, the end record's counts
    and costs, and the Problems (each error and watchdog record also said)."""
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
        say(e.get("reason"))
        context.setdefault("problems", []).append(e.get("reason", ""))
    for w in recs.get("watchdog", []):
        text = (f"watchdog: the program waited in {w.get('call')} for {float(w.get('seconds', 0)):.0f} s under sampling"
                if w.get("stuck") == "program" else
                f"watchdog: the library was stuck in {w.get('call')} for {float(w.get('seconds', 0)):.0f} s"
                + (" at exit" if w.get("at_exit") else ""))
        say(text)
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
    """The kernel functions the SASS strategy each counts, a run each, [(function, name)]: the `n`
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
    loaded = [(fn or sass_target_of(r), r) for fn, path in files for r in [load_pc(path)]]
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
