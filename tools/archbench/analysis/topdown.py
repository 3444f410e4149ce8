"""TopDown of a program's kernels from libarchbench_topdown.so's records: each profiled launch
weighted by the GPU time it stands for, per kernel, in total and launch by launch.

Levels: 1 retire, divergence, frontend, backend; 2 adds branch, replay, fetch, decode,
memory_bound, core_bound; 3 adds every stall reason (stall_<reason>) and issue_selected /
issue_not_selected. The fractions (of IPC_MAX = 4 warp-instructions a cycle per SM) are the
library's, computed with the arithmetic of archbench's td_* counters (fixtures/meters/topdown.cpp)."""

import math

LEVEL1 = ["retire", "divergence", "frontend", "backend"]
LEVEL2 = ["branch", "replay", "fetch", "decode", "memory_bound", "core_bound"]


def level3_columns(kernels):
    names = set()
    for k in kernels:
        names.update(n[3:] for n in k["topdown"] if n.startswith("td_stall_") or n.startswith("td_issue_"))
    return sorted(names)


def shape_key(r):
    return (r.get("mangled", r["name"]), tuple(r.get("grid", [])), tuple(r.get("block", [])))


def launch_weights(recs, key="topdown"):
    """Each profiled launch's weight: the GPU time it stands for (launches with `key` values:
    topdown, or traffic from archbench_roofline.py --program). Without shape records (every
    launch profiled, or an older file) its own duration; with them, its shape's whole GPU time
    (profiled durations plus the unprofiled launches' activity time, or where those records are
    missing the shape's profiled mean for each) shared among the shape's profiled launches. A
    shape of a profiled kernel with no profiled launch (over the budget or --max-launches: the
    sizes or block sizes of a sweep, say) stands with the kernel's profiled shape nearest to it
    (grid and block sizes, on a log scale), whose launches behave most like it, rather than with
    none.
    Returns (weights by seq, per-kernel totals {name: (launches, gpu_ns)})."""
    launches = [k for k in recs["kernel"] if k.get(key)]
    if not recs.get("shape"):
        totals = {}
        for k in launches:
            n, t = totals.get(k["name"], (0, 0.0))
            totals[k["name"]] = (n + 1, t + float(k["duration_ns"]))
        return {k["seq"]: float(k["duration_ns"]) for k in launches}, totals
    by_shape = {}
    for k in launches:
        by_shape.setdefault(shape_key(k), []).append(k)
    weights, totals, shape_ns = {}, {}, {}
    for sh in recs["shape"]:
        ks = by_shape.get(shape_key(sh), [])
        profiled_ns = sum(float(k["duration_ns"]) for k in ks)
        others = int(sh["launches"]) - len(ks)
        if "unprofiled_ns" in sh and int(sh.get("unprofiled_records", 0)) >= others:
            rest = float(sh["unprofiled_ns"])
        else:  # no activity records: the profiled mean for each launch not profiled
            rest = others * (profiled_ns / len(ks)) if ks else float(sh.get("unprofiled_ns", 0.0))
        shape_ns[shape_key(sh)] = profiled_ns + rest
        n, t = totals.get(sh["name"], (0, 0.0))
        totals[sh["name"]] = (n + int(sh["launches"]), t + profiled_ns + rest)
    stands_for = {shape: ns for shape, ns in shape_ns.items() if shape in by_shape}
    for shape, ns in shape_ns.items():
        near = [p for p in stands_for if p[0] == shape[0]]
        if shape not in by_shape and near:
            stands_for[min(near, key=lambda p: distance(p, shape))] += ns
    for shape, ns in stands_for.items():
        for k in by_shape[shape]:
            weights[k["seq"]] = ns / len(by_shape[shape])
    return weights, totals


def distance(a, b):
    """How far apart two launch shapes (shape_key) are: the log ratios of their grid sizes and of
    their block sizes, added."""
    def size(dims):
        return math.prod(max(int(v), 1) for v in dims)
    return abs(math.log(size(a[1]) / size(b[1]))) + abs(math.log(size(a[2]) / size(b[2])))


def weighted(launches, cols, weights):
    """Each column's mean over launches weighted by the GPU time each stands for (plain mean if
    no time)."""
    total = sum(weights.get(k["seq"], 0.0) for k in launches)
    out = {}
    for c in cols:
        vals = [(weights.get(k["seq"], 0.0), k["topdown"].get("td_" + c)) for k in launches]
        vals = [(w, v) for w, v in vals if v is not None]
        if not vals:
            continue
        if total > 0:
            out[c] = sum(w * v for w, v in vals) / sum(w for w, _ in vals)
        else:
            out[c] = sum(v for _, v in vals) / len(vals)
    return out


def analyse(recs, level):
    launches = [k for k in recs["kernel"] if k["topdown"]]
    cols = LEVEL1 + (LEVEL2 if level >= 2 else []) + (level3_columns(launches) if level >= 3 else [])
    weights, totals = launch_weights(recs)
    total_ns = sum(t for _, t in totals.values())
    by_name = {}
    for k in launches:
        by_name.setdefault(k["name"], []).append(k)
    kernels = []
    for name, (n, t) in totals.items():
        ks = by_name.get(name, [])
        kernels.append({"kernel": name, "launches": n, "profiled": len(ks), "gpu_time_s": t * 1e-9,
                        "time_share": t / total_ns if total_ns else 0.0, **weighted(ks, cols, weights)})
    kernels.sort(key=lambda r: -r["gpu_time_s"])
    total = {"kernel": "TOTAL (time-weighted)", "launches": sum(n for n, _ in totals.values()),
             "profiled": len(launches), "gpu_time_s": total_ns * 1e-9,
             "time_share": 1.0 if launches else 0.0, **weighted(launches, cols, weights)}
    invocations = [{"seq": k["seq"], "kernel": k["name"], "invocation": k["invocation"],
                    "gpu_time_s": float(k["duration_ns"]) * 1e-9, "grid": k.get("grid", []),
                    "block": k.get("block", []), **{c: k["topdown"].get("td_" + c) for c in cols}}
                   for k in sorted(launches, key=lambda k: k["seq"])]
    failed = [k for k in recs["kernel"] if not k["topdown"]]
    return cols, kernels, total, invocations, failed


def end_summary(recs, sample):
    """The injection's end record as context entries (none if the program did not end normally)."""
    for e in recs["end"][:1]:
        return {"launches_profiled": e["profiled"], "launches_unprofiled": e["unprofiled"],
                "launches_unreplayable": e.get("unreplayable", 0),
                "unprofiled_time": e.get("unprofiled_time", ""), "sample": e.get("sample", sample),
                "budget": e.get("budget", 0), "over_budget": e.get("over_budget", 0),
                "varied": e.get("varied", 0), "memory_refused": e.get("memory_refused", 0),
                "cost_s": {k: e[k + "_s"] for k in ("setup", "replay", "decode") if k + "_s" in e},
                "prepare_s": e.get("prepare_s", -1), "prepare_wait_s": e.get("prepare_wait_s", 0),
                "enable_ahead_s": e.get("enable_ahead_s", -1), "enable_ahead": e.get("enable_ahead", "")}
    return {}
