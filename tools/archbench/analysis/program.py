"""Any CUDA program's kernels on the roofline: each kernel's counters (libarchbench_topdown.so's
traffic set) over the GPU time its launches stand for, the device's roof (an empirical model, else
the textbook peaks), and where each kernel sits below its bound."""

from .roofline import TEXTBOOK_KEY, models, textbook_peaks
from .topdown import launch_weights
from .traffic import bound, placement


def kernel_rows(recs):
    """Per kernel: {name, launches, profiled, seconds, share, counters} with counters summed over
    the GPU time the kernel's launches stand for (each profiled launch's values scaled by its
    weight over its own duration); plus the program's total in the same form."""
    weights, totals = launch_weights(recs, key="traffic")
    by_name = {}
    for k in recs["kernel"]:
        if k.get("traffic") and float(k["duration_ns"]) > 0:
            by_name.setdefault(k["name"], []).append(k)
    total_ns = sum(t for _, t in totals.values())
    rows, whole = [], {"name": "TOTAL (all kernels)", "launches": 0, "profiled": 0, "counters": {}, "seconds": 0.0}
    for name, (n, ns) in totals.items():
        counters = {}
        for k in by_name.get(name, []):
            scale = weights.get(k["seq"], 0.0) / float(k["duration_ns"])
            for key, v in k["traffic"].items():
                counters[key] = counters.get(key, 0.0) + v * scale
        rows.append({"name": name, "launches": n, "profiled": len(by_name.get(name, [])), "counters": counters,
                     "seconds": ns * 1e-9, "share": ns / total_ns if total_ns else 0.0})
        whole["launches"] += n
        whole["profiled"] += len(by_name.get(name, []))
        if counters:  # the total's rates over the kernels measured (the others have no counters)
            whole["seconds"] += ns * 1e-9
        for key, v in counters.items():
            whole["counters"][key] = whole["counters"].get(key, 0.0) + v
    whole["share"] = 1.0
    return sorted(rows, key=lambda r: -r["seconds"]), whole


def roof(doc, model_path, device, peaks, notes):
    """(model, peaks {precision: FLOP/s}, ceilings {level: B/s}, source): the empirical model `doc`
    read from model_path (--roofline-json), else the textbook one of the device (--peak adds or
    overrides)."""
    if model_path:
        model = {k: doc[k] for k in ("orm", "carm", "textbook")}
        source = f"empirical ({model_path})"
    else:
        bw = {"device_memory": None, "levels": [], "local": None, "memory": {}}
        model = models(device, {}, bw, textbook_peaks(device, dict(peaks), notes), 0.15)
        source = "textbook"
    tb = (model.get("textbook") or {}).get("peaks", {})
    got = {TEXTBOOK_KEY[k]: c["fma"]["value"] for k, c in model["orm"]["compute"].items()
           if k in TEXTBOOK_KEY and "fma" in c}
    peaks_out = {p: got.get(p) or tb.get(p) for p in ("fp64", "fp32", "fp16") if got.get(p) or tb.get(p)}
    if model_path:
        tensor = [t["value"] for t in doc.get("tensor", {}).values() if t.get("unit") == "FLOP/s"]
        if tensor:
            peaks_out["tensor"] = max(tensor)
    levels = {lv["name"]: lv["value"] for lv in model["carm"]["levels"]}
    dram = model["orm"].get("device_memory")
    ceilings = {"L1": levels.get("L1") or tb.get("shared"), "L2": levels.get("L2"),
                "DRAM": dram["value"] if dram else tb.get("dram")}
    return model, peaks_out, {k: v for k, v in ceilings.items() if v}, source


def place(rows, peaks, ceilings):
    """Each row (kernel_rows) placed: its attained rate and intensities, the bound (the ceiling it
    uses most) and how far below it (of_bound: attained / roof at its intensities)."""
    placed = []
    for r in rows:
        p = placement(r["counters"], r["seconds"])
        name, use, _ = bound(p, peaks, ceilings)
        placed.append(dict(kernel=r["name"], launches=r["launches"], profiled=r["profiled"], time_share=r["share"],
                           bound=name, of_bound=use, **p))
    return placed
