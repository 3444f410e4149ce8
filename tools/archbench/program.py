"""Any CUDA program on the roofline, unchanged:

  archbench_roofline.py --program [options] -- PROGRAM [ARGS...]
  archbench_roofline.py --program [options] --report RAW.jsonl

runs PROGRAM natively (wall time), then under libarchbench_topdown.so with the traffic metric set
(ARCHBENCH_TOPDOWN_METRICS=traffic): the same injection, launch sampling (--sample, --max-launches)
and unreplayable-launch handling as archbench_topdown.py. Each kernel's bytes at each level and
flops by precision are its profiled launches' counters, each launch standing for the GPU time its
launch shape spent (kernel activity records), so kernels are weighted by all their GPU time. Every
kernel is placed on the device's roofline: the empirical one of --roofline-json (a model written by
archbench_roofline.py --json), else the textbook peaks of the device (or --peak). The table says
how far each kernel sits below its bound and which bound it is (the ceiling it uses most: its
precision's peak, or the bandwidth of L1, L2 or DRAM); the charts are the three of measured traffic
(original, cache-aware, hierarchical) with the kernels named. Exit status: the program's own (2 on
bad input).
"""
import argparse
import json
import os
import sys

from . import cli, roofline as rl, topdown, traffic
from .charts import si
from .cli import InputError


def kernel_rows(recs):
    """Per kernel: {name, launches, profiled, seconds, share, counters} with counters summed over
    the GPU time the kernel's launches stand for (each profiled launch's values scaled by its
    weight over its own duration); plus the program's total in the same form."""
    weights, totals = topdown.launch_weights(recs, key="traffic")
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


def roof(model_path, device, peaks, notes):
    """(model, peaks {precision: FLOP/s}, ceilings {level: B/s}, source): the empirical model of
    --roofline-json, else the textbook one of the device (--peak adds or overrides)."""
    if model_path:
        doc = ar_json(model_path)
        model = {k: doc[k] for k in ("orm", "carm", "textbook")}
        source = f"empirical ({model_path})"
    else:
        bw = {"device_memory": None, "levels": [], "local": None, "memory": {}}
        model = rl.models(device, {}, bw, rl.textbook_peaks(device, dict(peaks), notes), 0.15)
        source = "textbook"
    tb = (model.get("textbook") or {}).get("peaks", {})
    got = {rl.TEXTBOOK_KEY[k]: c["fma"]["value"] for k, c in model["orm"]["compute"].items()
           if k in rl.TEXTBOOK_KEY and "fma" in c}
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


def ar_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        doc["orm"], doc["carm"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a roofline model (archbench_roofline.py --json): {e}") from None
    doc.setdefault("textbook", None)
    return doc


def table(rows, peaks, ceilings):
    """The per-kernel table: time, attained rate, intensities, the bound and how far below it."""
    head = f"{'kernel':44s} {'launches':>8s} {'time %':>7s} {'prec':>6s} {'FLOP/s':>11s} " \
           f"{'AI L1':>7s} {'AI L2':>7s} {'AI DRAM':>7s} {'bound':>10s} {'of bound':>8s}"
    out, placed = [head, "-" * len(head)], []
    for r in rows:
        p = traffic.placement(r["counters"], r["seconds"])
        name, use, _ = traffic.bound(p, peaks, ceilings)
        placed.append(dict(kernel=r["name"], launches=r["launches"], profiled=r["profiled"], time_share=r["share"],
                           bound=name, of_bound=use, **p))
        ai = [f"{p['ai'][lv]:7.3g}" if lv in p["ai"] else f"{'-':>7s}" for lv in ("L1", "L2", "DRAM")]
        out.append(f"{topdown.short(r['name'], 44):44s} {r['launches']:>8} {100 * r['share']:>6.1f}% "
                   f"{p['precision'] or '-':>6s} {si(p['flop_per_s'], 'FLOP/s') if p['flop_per_s'] else '-':>11s} "
                   f"{' '.join(ai)} {name or '-':>10s} {f'{100 * use:.1f}%' if use is not None else '-':>8s}")
    return "\n".join(out), placed


def run(argv):
    ap = argparse.ArgumentParser(prog="archbench_roofline.py --program", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roofline-json", metavar="FILE", help="the device's empirical model (archbench_roofline.py --json)")
    ap.add_argument("--peak", action="append", type=rl.parse_peak, default=[], metavar="NAME=VALUE",
                    help="published peak (as archbench_roofline.py's), for the textbook roof")
    ap.add_argument("--precision", choices=rl.PRECISIONS, default="float", help="compute ceilings drawn (default float)")
    ap.add_argument("--svg", metavar="STEM", default="program-roofline",
                    help="charts at STEM-dram, STEM-l1, STEM-hierarchical (.svg and .png)")
    ap.add_argument("--json", metavar="FILE", help="write the kernels' placements as JSON here")
    ap.add_argument("--title", help="chart title")
    topdown.injection_options(ap)
    a, cmd = topdown.parse_injection(ap, argv)
    context, notes = {"sample": a.sample, "max_launches": a.max_launches}, []
    rc = topdown.profile(a, cmd, context, "archbench_roofline", metric_set="traffic") if cmd else 0
    raw = context.get("raw", a.report)
    recs = topdown.load(raw)
    prof = (recs["profiler"] or [{}])[0]
    device = prof.get("device_name", "")
    context.update(device=device, chip=prof.get("chip", ""), traffic_counters=prof.get("traffic_counters", ""),
                   traffic_missing=prof.get("traffic_missing", ""))
    if prof and prof.get("metric_set") != "traffic":
        raise InputError(f"{raw}: recorded with the {prof.get('metric_set', 'topdown')} metric set, not traffic")
    for e in recs["error"]:
        print(f"archbench_roofline: not profiled: {e.get('reason')}", file=sys.stderr)
    rows, whole = kernel_rows(recs)
    if not rows:
        raise InputError(f"{raw}: no kernel launch was profiled")
    model, peaks, ceilings, source = roof(a.roofline_json, device, a.peak, notes)
    text, placed = table(rows + [whole], peaks, ceilings)
    print(f"kernels of {context.get('command', raw)} on the roofline of {device or 'the device'} "
          f"({source}: " + ", ".join(f"{k} {si(v, 'FLOP/s')}" for k, v in peaks.items()) + "; "
          + ", ".join(f"{k} {si(v, 'B/s')}" for k, v in ceilings.items()) + ")")
    print(text)
    print("bound: the ceiling the kernel uses most (its precision's peak, or a level's bandwidth); of bound: "
          "attained / roof at its intensities (100% is on the roof)")
    for u in recs["unreplayable"]:
        print(f"not replayable, ran natively: {topdown.short(u['name'])}: {u['reason']}")
    context.update(topdown.end_summary(recs, a))
    print(topdown.coverage([{"gpu_time_s": r["seconds"], "profiled": r["profiled"]} for r in rows], context))
    if context.get("traffic_missing"):
        print(f"not measured on this chip: {context['traffic_missing']}")
    if "overhead" in context:
        print(f"wall time: native {context['native_s']:.3f} s, profiled {context['profiled_s']:.3f} s, "
              f"overhead {context['overhead']:.1f}x")
    title = a.title or f"{os.path.basename(cmd[0]) if cmd else 'program'} on {device or 'the device'}"
    notes += rl.write_measured(a.svg, model, rows, a.precision, title, names=True)
    for n in notes:
        print(f"note: {n}")
    if a.json:
        rl.ar.write_file(a.json, json.dumps({"context": context, "roof": {"source": source, "peaks": peaks,
                                             "ceilings": ceilings}, "kernels": placed}, indent=1) + "\n")
    return rc


def main(argv=None):
    return cli.run("archbench_roofline", run, argv)
