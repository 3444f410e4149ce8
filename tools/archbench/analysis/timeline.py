"""TopDown level 1 over a program's run from PM sampling's records (libarchbench_pmsampling.so
and archbench_pmsampler; seed 004 section 5.3, the evolution view): the run's, each kernel's and
each launch's level 1 from the counters summed over the samples in question, every sample's
fractions, the library's own costs, and the stall shared out by a kernel-replay TopDown."""

import bisect

IPC_MAX = 4.0
FRONTEND_CLASSES, BACKEND_CLASSES = ("fetch", "decode"), ("memory", "core")
SHARED = ("process", "injection", "clock", "end", "error", "wait")  # written by the program's library and the sampler's
CLOCK_TOLERANCE_NS = 1e9  # a sample clock within this of a known clock at the start is that clock


def by_role(recs):
    """(the program's records, the sampler's). Where archbench_pmsampler sampled the device (--start
    before), the records both libraries write (SHARED) are told apart by the sampler's "role"; the
    others are one side's only. Else both are the same records."""
    if not any(r.get("role") == "sampler" for r in recs["process"]):
        return recs, recs
    prog, samp = dict(recs), dict(recs)
    for t in SHARED:
        prog[t] = [r for r in recs[t] if r.get("role") != "sampler"]
        samp[t] = [r for r in recs[t] if r.get("role") == "sampler"]
    return prog, samp


def counters_of(values, metrics, roles):
    """A sample's values as {role: value}: cycles, executed, issued, thread, stall_<reason> (the
    library's roles of its metrics; a role collected twice is summed; other counters are left)."""
    c = {}
    for m, v in zip(metrics, values):
        role = roles.get(m, "other")
        if role != "other" and v is not None:
            c[role] = c.get(role, 0.0) + float(v)
    return c


def add_into(into, counters, scale=1.0):
    for k, v in counters.items():
        into[k] = into.get(k, 0.0) + v * scale


def level1(c, quantities, stall_class):
    """TopDown level 1 (design.md, seed 004 eqs. 4.2-4.7, fixtures/meters/topdown.cpp) from summed
    counters {role: value}, as fractions of IPC_MAX: the quantities the sampled set allows, and
    ipc; None where the SMs executed nothing. A counter not collected counts as nothing lost to it
    (no replay, every lane active). The stall (what retire and divergence leave of IPC_MAX) is
      - with every stall reason (frontend and backend): shared out as the reasons' counts are;
      - with some (stall_other among the quantities): each counted reason takes its share of the
        warps' cycles without an issue (active warp-cycles minus instructions issued), frontend
        and backend hold those, stall_other the rest (the library's level1, inject.cpp);
      - else one quantity, stall."""
    cycles, executed = c.get("cycles", 0.0), c.get("executed", 0.0)
    if cycles <= 0 or executed <= 0:
        return None
    ipc = executed / cycles
    issued = c.get("issued", executed)
    ipc_issued = issued / cycles
    efficiency = min(1.0, c.get("thread", executed * 32) / (executed * 32))
    retire, branch = ipc * efficiency, ipc * (1 - efficiency)
    replay = max(0.0, ipc_issued - ipc)
    stall = max(0.0, IPC_MAX - retire - branch - replay) / IPC_MAX
    front = sum(v for k, v in c.items() if k.startswith("stall_") and stall_class.get(k[6:]) in FRONTEND_CLASSES)
    back = sum(v for k, v in c.items() if k.startswith("stall_") and stall_class.get(k[6:]) in BACKEND_CLASSES)
    out = {"retire": retire / IPC_MAX}
    if "divergence" in quantities:
        out["divergence"] = (branch + replay) / IPC_MAX
    if "stall_other" in quantities:
        idle = c.get("warps", 0.0) - issued
        fs = front / idle if idle > 0 else 0.0
        bs = back / idle if idle > 0 else 0.0
        if fs + bs > 1:
            total = fs + bs
            fs, bs = fs / total, bs / total
        if "frontend" in quantities:
            out["frontend"] = stall * fs
        if "backend" in quantities:
            out["backend"] = stall * bs
        out["stall_other"] = stall - stall * fs - stall * bs
    elif "frontend" in quantities:
        out["frontend"] = stall * front / (front + back) if front + back > 0 else 0.0
        out["backend"] = stall * back / (front + back) if front + back > 0 else stall  # as topdown.cpp
    else:
        out["stall"] = stall
    out["ipc"] = ipc
    return out


def sample_clock(recs, first_ns):
    """(offset, how): the PM samples' timestamps + offset = the host's CLOCK_MONOTONIC. first_ns is
    the END of the first sample: CUPTI's first sample reaches back before the start, by 1.1 s after
    an uncached search on the H100, and ends as sampling starts. The GPU's clock is whichever known
    clock (CUPTI's timestamp, the host's real time) read at the start is within a second of it; else
    the first sample is taken to end as sampling starts."""
    start = next((c for c in recs["clock"] if c.get("when") == "start"), recs["clock"][0] if recs["clock"] else None)
    if start is None:
        return 0, "none (no clock record)"
    near = [(abs(first_ns - start[k]), k) for k in ("cupti_ns", "realtime_ns")
            if abs(first_ns - start[k]) < CLOCK_TOLERANCE_NS]
    if near:
        key = min(near)[1]
        return start["mono_ns"] - start[key], {"cupti_ns": "CUPTI timestamps", "realtime_ns": "host real time"}[key]
    return start["mono_ns"] - first_ns, "aligned at the start (the first sample ends as sampling starts)"


def overlaps(samples, ends, t0, t1):
    """(index, fraction of the sample) for each sample overlapping [t0, t1) (samples sorted by time)."""
    i = bisect.bisect_right(ends, t0)
    out = []
    while i < len(samples) and samples[i]["start_s"] < t1:
        s = samples[i]
        ov = min(t1, s["end_s"]) - max(t0, s["start_s"])
        if ov > 0 and s["end_s"] > s["start_s"]:
            out.append((i, ov / (s["end_s"] - s["start_s"])))
        i += 1
    return out


def analyse(recs):
    """The run's level 1, each kernel's and each launch's, every sample's fractions, the kernels'
    GPU times and the launches, all on one time axis (seconds since the process started)."""
    cfg = (recs["config"] or [None])[0]
    prog, samp = by_role(recs)
    ext = (recs["exit"] or [{}])[0]  # the command's: the program's span and exit status (--start before)
    proc = (prog["process"] or [{"start_ns": ext.get("start_ns", 0), "command": ext.get("command", "")}])[0]
    t_base = int(proc.get("start_ns", 0))
    context = {"command": proc.get("command", ""), "date": proc.get("date", "") or samp["process"][0].get("date", "")}
    if samp is not prog:
        context["sampler"] = "archbench_pmsampler (a process of its own, started before the program)"
    errors = [e.get("reason", "") for e in recs["error"]]
    if cfg is None:  # never started: whatever kernels the program ran went unsampled
        ran = [int(k["end"]) - int(k["start"]) for k in recs["kernel"] if int(k["end"]) > int(k["start"]) > 0]
        context["before_sampling"] = {"launches": len(ran), "gpu_time_s": sum(ran) * 1e-9, "gpu_share": 1.0}
        return {"context": context, "errors": errors, "quantities": [], "stall_class": {}, "samples": [], "kernels": [],
                "invocations": [], "launches": [], "total": None, "kernel_source": "none"}
    metrics, roles, quantities = cfg["metrics"], cfg["roles"], cfg["level1"]
    stall_class = cfg.get("stall_class", {})
    context.update({k: cfg.get(k) for k in ("chip", "device_name", "pci_bus_id", "interval_ns", "trigger", "decode_ms",
                                            "hw_buffer_bytes", "max_samples", "counter_data_bytes", "selection",
                                            "selection_trials", "setup_ns", "activity", "start", "split")})
    context.update(metrics=metrics, roles=roles, notes=cfg.get("notes", []),
                   approximations=cfg.get("approximations", []), not_collected=cfg.get("not_collected", {}))
    raw = sorted(recs["sample"], key=lambda s: int(s["start"]))
    offset, clock = sample_clock(samp, int(raw[0]["end"])) if raw else (0, "none (no sample)")
    context["sample_clock"] = clock
    # The sampler's samples from before the program started or after it ended are not its run's.
    p_end = next((int(e["end_ns"]) for e in prog["end"] if "end_ns" in e), int(ext.get("end_ns", 0)) or None)
    lo, hi = (t_base, p_end or float("inf")) if samp is not prog else (-float("inf"), float("inf"))
    samples, total, outside = [], {}, 0
    for r in raw:
        if int(r["end"]) + offset <= lo or int(r["start"]) + offset >= hi:
            outside += 1
            continue
        c = counters_of(r["values"], metrics, roles)
        add_into(total, c)
        samples.append({"start_s": (int(r["start"]) + offset - t_base) * 1e-9,
                        "end_s": (int(r["end"]) + offset - t_base) * 1e-9,
                        "counters": c, "level1": level1(c, quantities, stall_class), "recorded": r.get("level1")})
    if samp is not prog:
        context["samples_outside_program"] = outside
    context["interval_changes"] = [{"at_s": (int(r["host_ns"]) - t_base) * 1e-9, "interval_ns": int(r["interval_ns"]),
                                    "gap_s": int(r["gap_ns"]) * 1e-9, "why": r.get("why", ""),
                                    "error": r.get("error", "")} for r in recs["interval"]]
    ends = [s["end_s"] for s in samples]
    # Kernels: CUPTI's records (GPU time, CUPTI's clock) where delivered, else launches only.
    clocks = prog["clock"] or samp["clock"]
    k_off = (clocks[0]["mono_ns"] - clocks[0]["cupti_ns"]) if clocks else 0
    names = {n["id"]: n["name"] for n in recs["name"]}
    launches = [{"t_s": (int(l["host_ns"]) - t_base) * 1e-9,
                 "kernel": names.get(l.get("name"), "graph launch" if "graph" in l else "?")}
                for l in sorted(recs["launch"], key=lambda l: int(l["host_ns"]))]
    records = sorted((k for k in recs["kernel"] if int(k["end"]) > int(k["start"]) > 0), key=lambda k: int(k["start"]))
    by_name, invocations, seen = {}, [], {}
    for k in records:
        t0, t1 = (int(k["start"]) + k_off - t_base) * 1e-9, (int(k["end"]) + k_off - t_base) * 1e-9
        c, n = {}, 0.0
        for i, frac in overlaps(samples, ends, t0, t1):
            add_into(c, samples[i]["counters"], frac)
            n += frac
            on = samples[i].setdefault("kernels", {})
            on[k["name"]] = on.get(k["name"], 0.0) + frac
        agg = by_name.setdefault(k["name"], {"kernel": k["name"], "launches": 0, "gpu_time_s": 0.0, "samples": 0.0,
                                             "counters": {}})
        agg["launches"] += 1
        agg["gpu_time_s"] += t1 - t0
        agg["samples"] += n
        add_into(agg["counters"], c)
        inv = seen[k["name"]] = seen.get(k["name"], -1) + 1
        invocations.append({"kernel": k["name"], "invocation": inv, "start_s": t0, "end_s": t1, "samples": n,
                            **(level1(c, quantities, stall_class) or {})})
    gpu_total = sum(a["gpu_time_s"] for a in by_name.values())
    # Launches that ended before the sampling started (the library's start did not hold them back):
    # its start clock record, else the first sample (none: every kernel ran before it). Not the
    # first sample's own start: CUPTI's first sample reaches back before the start, counters 0.
    start = next((k for k in samp["clock"] if k.get("when") == "start"), None)
    first = ((int(start["mono_ns"]) - t_base) * 1e-9 if start and "mono_ns" in start
             else samples[0]["start_s"] if samples else float("inf"))
    before = [i["end_s"] - i["start_s"] for i in invocations if i["end_s"] <= first]
    context["before_sampling"] = {"launches": len(before), "gpu_time_s": sum(before),
                                  "gpu_share": sum(before) / gpu_total if gpu_total else 0.0}
    # How much of the time from the first sample (the program's start, where the sampler was there
    # first) to the program's end the samples cover: less where the sampling stopped early (another
    # tool took the performance monitors) or CUPTI's records lost their time (`empty`).
    w0 = samples[0]["start_s"] if samples else 0.0
    w0 = max(w0, 0.0) if samp is not prog else w0
    w1 = (p_end - t_base) * 1e-9 if p_end else (samples[-1]["end_s"] if samples else w0)
    if samples and w1 > w0:
        covered, reach = 0.0, w0  # the samples' union: a restart's first sample may overlap earlier ones
        for x in samples:
            a, b = max(x["start_s"], reach), min(x["end_s"], w1)
            if b > a:
                covered += b - a
                reach = b
        context["coverage"] = {"covered_s": covered, "window_s": w1 - w0, "share": covered / (w1 - w0),
                               "last_sample_s": samples[-1]["end_s"]}
    kernels = []
    for a in sorted(by_name.values(), key=lambda a: -a["gpu_time_s"]):
        row = dict(a)
        row["time_share"] = a["gpu_time_s"] / gpu_total if gpu_total else 0.0
        row.update(level1(a["counters"], quantities, stall_class) or {})
        kernels.append(row)
    if not records and launches:
        for name in sorted({l["kernel"] for l in launches}):
            kernels.append({"kernel": name, "launches": sum(1 for l in launches if l["kernel"] == name)})
    run_s = sum(s["end_s"] - s["start_s"] for s in samples)
    whole = {"kernel": "RUN (every sample)", "launches": len(records) or len(launches), "samples": float(len(samples)),
             "gpu_time_s": gpu_total, "sampled_s": run_s, **(level1(total, quantities, stall_class) or {})}
    end, p_end_rec = (samp["end"] or [{}])[0], (prog["end"] or [{}])[0]
    context["costs"] = library_costs(prog, samp)
    if samp is not prog:
        context["start"] = "before (" + context["sampler"] + ")"
        if "status" in ext:
            context["program_exit"] = ext["status"]
    context.update(samples=len(samples), active_samples=sum(1 for s in samples if s["level1"]),
                   lost=end.get("lost", 0), overflow=end.get("overflow", False), ended=end.get("why", ""),
                   empty=end.get("empty", 0),
                   trouble="; ".join(x for x in dict.fromkeys((end.get("trouble", ""), p_end_rec.get("trouble", ""))) if x),
                   kernel_records=len(records), launches=len(launches),
                   first_s=samples[0]["start_s"] if samples else None, last_s=samples[-1]["end_s"] if samples else None)
    return {"context": context, "errors": errors, "quantities": quantities, "stall_class": stall_class,
            "samples": samples, "total": whole,
            "kernels": kernels, "invocations": invocations, "launches": launches,
            "kernel_source": "CUPTI kernel records (GPU time)" if records else
            ("launches only (host time)" if launches else "none")}


def library_costs(recs, sampler=None):
    """What the library's records say of its own time, in seconds: the setup's parts (on the
    library's thread unless it started at the first launch; in archbench_pmsampler's process where
    `sampler` holds its records), what the first launch waited, the library's load, the exit's
    parts and the decoding (the sampler's, with its exit, where it sampled)."""
    ns = 1e-9
    if sampler is not None and sampler is not recs:
        out, theirs = library_costs(recs), library_costs(sampler)
        for k in ("decode_s", "decode_max_s", "decodes", "set_aside"):
            if k in theirs:
                out[k] = theirs[k]
        if "exit_s" in theirs:
            out["sampler_exit_s"], out["sampler_exit_parts_s"] = theirs["exit_s"], theirs["exit_parts_s"]
        return out
    cfg, end = (recs["config"] or [{}])[0], (recs["end"] or [{}])[0]
    inj, wait = (recs["injection"] or [{}])[0], (recs["wait"] or [{}])[0]
    out = {}
    if "init_ns" in inj:
        out["injection_init_s"] = inj["init_ns"] * ns
    if "setup_ns" in cfg:
        out["setup_s"] = cfg["setup_ns"] * ns
    if isinstance(cfg.get("setup"), dict):
        out["setup_parts_s"] = {k[:-3] if k.endswith("_ns") else k: v * ns for k, v in cfg["setup"].items()}
    if "waited_ns" in wait or "first_launch_wait_ns" in end:
        out["first_launch_wait_s"] = wait.get("waited_ns", end.get("first_launch_wait_ns", 0)) * ns
        out["first_launch_trigger"] = wait.get("trigger", "")
    host = (recs["host"] or [{}])[0]
    if "since_start_ns" in host:
        out["host_object_s"] = host["since_start_ns"] * ns
        out["host_object_error"] = host.get("error", "")
    if isinstance(end.get("exit"), dict):
        parts = {k[:-3] if k.endswith("_ns") else k: v * ns for k, v in end["exit"].items()}
        out["exit_s"] = parts.pop("total", sum(parts.values()))
        out["exit_parts_s"] = parts
    if isinstance(end.get("decode"), dict):
        d = end["decode"]
        out["decode_s"] = d.get("total_ns", 0) * ns
        out["decode_max_s"] = d.get("max_ns", 0) * ns
        out["decodes"] = end.get("decodes", 0)
        out["set_aside"] = d.get("set_aside", 0)
    proc = (recs["process"] or [{}])[0]
    if "end_ns" in end and "start_ns" in proc:
        out["library_span_s"] = (int(end["end_ns"]) - int(proc["start_ns"])) * ns
    return out

def share_for(name, split):
    """The frontend share for kernel `name`: its own, else that of the one kernel of its base name."""
    if name in split:
        return split[name]
    base = name.split("(")[0]
    same = [v for k, v in split.items() if k.split("(")[0] == base]
    return same[0] if len(same) == 1 else None


def apply_stall_split(res, split, source):
    """Shares each stall out between frontend and backend as the kernel-replay TopDown `split`
    found for its kernel: a kernel's (and a launch's) stall at its kernel's share; a sample's at
    its kernels' shares weighted by their overlap; the run's at the samples' (weighted by their
    active cycles). What no kernel of the file accounts for stays stall."""
    q = res["quantities"]
    if "stall" not in q or not split:
        return False
    used = {}

    def split_row(row, name):
        if not isinstance(row.get("stall"), float):
            return
        r = share_for(name, split)
        if r is None:
            return
        used[name] = r
        st = row["stall"]
        row.update(frontend=st * r, backend=st * (1 - r), stall=0.0)

    for row in res["kernels"]:
        split_row(row, row["kernel"])
    for row in res["invocations"]:
        split_row(row, row["kernel"])
    weights = {"frontend": 0.0, "backend": 0.0, "stall": 0.0}
    for smp in res["samples"]:
        l1 = smp["level1"]
        if not l1:
            continue
        st, on = l1["stall"], smp.get("kernels", {})
        total = sum(on.values())
        fe = be = 0.0
        for name, w in on.items():
            r = share_for(name, split)
            if r is not None and total > 0:
                used[name] = r
                fe += st * r * w / total
                be += st * (1 - r) * w / total
        l1.update(frontend=fe, backend=be, stall=st - fe - be)
        cyc = smp["counters"].get("cycles", 0.0)
        for key in weights:
            weights[key] += cyc * l1[key]
    t = res["total"]
    if isinstance(t.get("stall"), float):
        sw = sum(weights.values())
        st = t["stall"]
        for key in ("frontend", "backend"):
            t[key] = st * weights[key] / sw if sw > 0 else 0.0
        t["stall"] = st - t["frontend"] - t["backend"]
    rest = max([abs(r.get("stall", 0.0)) for r in res["kernels"] + res["invocations"] + [t]
                if isinstance(r.get("stall"), float)] +
               [abs(smp["level1"]["stall"]) for smp in res["samples"] if smp["level1"]] + [0.0])
    keep_stall = rest > 1e-9
    if not keep_stall:
        for r in res["kernels"] + res["invocations"] + [t] + [smp["level1"] for smp in res["samples"] if smp["level1"]]:
            r.pop("stall", None)
    res["measured_quantities"] = list(q)
    res["quantities"] = [x for x in q if x != "stall"] + ["frontend", "backend"] + (["stall"] if keep_stall else [])
    res["context"]["stall_split"] = {
        "source": source, "kernels": used,
        "approximation": "frontend and backend: the stall this run measured, shared out kernel by kernel as the "
                         f"kernel-replay TopDown in {source} found (its frontend / (frontend + backend)); not measured "
                         "in this run" + ("; stall: what no kernel of that file accounts for" if keep_stall else "")}
    return True
