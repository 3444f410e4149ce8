"""A node's health verdict: each GPU and each link passed or failed against thresholds kept as data
(health.json): a GPU's figures against the median of the node's GPUs of its model (never across
models) and against the SKU's published peaks, NVML's facts (ECC, retired and remapped rows,
throttle reasons, PCIe width, NVLink links), a link's bandwidth against the median of its kind.
Each check names its subject (the GPU by selector and PCI bus id, the link by its two GPUs), the
figure, the value and the reference."""

import re
import statistics

from ..records import results as ar
from ..records.results import unit_of
from .variability import per_unit


def _ratio(metric, value, reference):
    """How a figure stands against its reference, higher better (a time or latency inverted)."""
    if not value or not reference:
        return None
    return value / reference if ar.is_higher_better(metric) else reference / value


def _check(subject, figure, value, reference, ratio, limit, why=""):
    return {"subject": subject, "figure": figure, "value": value, "reference": reference,
            "ratio": None if ratio is None else round(ratio, 4), "limit": limit,
            "pass": ratio is None or ratio >= limit, "why": why}


def namer(merged):
    """A GPU's name in the verdict, from its unit label (host, rank, selector) or its selector: the
    unit label and the PCI bus id, which stays the same whatever CUDA_VISIBLE_DEVICES's order."""
    ctx = merged.get("context", {})
    pci = {g.get("device_selector"): g.get("pci_bus_id") for g in ctx.get("node", {}).get("gpus", [])}
    unit = {r.get("device_selector"): unit_of(r) for r in ctx.get("runs", [])}

    def name_of(label):
        sel = label.split()[-1]
        label = unit.get(label, label)
        return f"{label} ({pci[sel]})" if pci.get(sel) else label
    return name_of


def fraction(thresholds, benchmark, key="node_fraction"):
    """The fraction a figure must reach: its family's (node_fraction_by_family), else the default."""
    return thresholds.get(key + "_by_family", {}).get(benchmark.split("/")[0], thresholds[key])


def gpu_checks(merged, thresholds, textbook):
    """The checks of each GPU's figures: against the median of its model's GPUs, and the published
    peaks of its SKU. merged: a --device=all (or MPI) results document."""
    name_of = namer(merged)
    runs = merged.get("context", {}).get("runs", [])
    model = {unit_of(r): r.get("device", "") for r in runs}
    for e in merged["benchmarks"]:
        model.setdefault(unit_of(e), e.get("device", ""))
    out = []
    for name, by_unit in sorted(per_unit(merged).items()):
        for dev in sorted({model.get(u, "") for u in by_unit}):
            units = {u: mv for u, mv in by_unit.items() if model.get(u, "") == dev}
            if len(units) >= 2:
                metric = next(iter(units.values()))[0]
                median = statistics.median(v for m, v in units.values() if m == metric)
                for u, (m, v) in sorted(units.items()):
                    out.append(_check(name_of(u), name, v, median, _ratio(m, v, median), fraction(thresholds, name),
                                      f"{m} against the median of {len(units)} {dev or 'GPUs'}"))
            for rule in thresholds.get("published", []):
                peak = next((p for match, _, p in textbook if match in dev), {}).get(rule["peak"])
                if not peak or not re.search(rule["benchmark"], name):
                    continue
                for u, (m, v) in sorted(units.items()):
                    if m == rule["metric"]:
                        out.append(_check(name_of(u), name, v, peak, v / peak, rule["fraction"],
                                          f"{m} against {dev}'s published {rule['peak']} peak"))
    return out


def nvml_checks(merged, thresholds):
    """The checks of NVML's facts of each GPU (context.node.gpus): the counters that must be zero,
    the throttle reasons that fail a GPU, the PCIe width against its maximum, and the NVLink links
    active against the node's most (PCIe's generation is left out: an idle link trains down)."""
    gpus = merged.get("context", {}).get("node", {}).get("gpus", [])
    fail_bits = {int(k): v for k, v in thresholds.get("clock_event_fail_bits", {}).items()}
    links = [sum(g["nvlink_active"]) for g in gpus if isinstance(g.get("nvlink_active"), list)]
    most = max(links, default=0)
    name_of, out = namer(merged), []
    for g in gpus:
        subject = name_of(str(g.get("device_selector", "?")))

        def fact(figure, ok, value, why):
            out.append({"subject": subject, "figure": figure, "value": value, "reference": None, "ratio": None,
                        "limit": None, "pass": ok, "why": why})
        for key in thresholds.get("nvml_zero", []):
            v = g.get(key)
            if isinstance(v, (int, float)):
                fact(key, v == 0, v, "must be 0")
        reasons = g.get("clock_event_reasons")
        if isinstance(reasons, (int, float)):
            bad = [why for bit, why in fail_bits.items() if int(reasons) & bit]
            fact("clock_event_reasons", not bad, int(reasons), ", ".join(bad) or "no slowdown")
        w, wmax = g.get("pcie_width"), g.get("pcie_max_width")
        if isinstance(w, (int, float)) and isinstance(wmax, (int, float)) and wmax:
            fact("pcie_width", w >= wmax, w, f"x{int(w)} of x{int(wmax)}")
        if isinstance(g.get("nvlink_active"), list) and most:
            n = sum(g["nvlink_active"])
            fact("nvlink_active", n >= most, n, f"{n} of {most} links active (the node's most)")
    return out


PEER = re.compile(r"^peer/\w+/(?P<kind>\w+)/src:(?P<src>\d+)/dst:(?P<dst>\d+)")


def link_checks(peer, thresholds):
    """The checks of each ordered pair's figures (the peer family: peer/<backend>/<kind>/src:S/dst:D/...)
    against the median of its kind's pairs."""
    kinds = {}
    for name, by_unit in per_unit(peer).items():
        m = PEER.match(name)
        if m:
            for metric, v in by_unit.values():
                kinds.setdefault(m["kind"], []).append((f"GPU {m['src']} -> GPU {m['dst']}", name, metric, v))
    out = []
    for kind, rows in sorted(kinds.items()):
        if len(rows) < 2:
            continue
        median = statistics.median(v for *_, v in rows)
        for subject, name, metric, v in rows:
            out.append(_check(f"link {subject}", name, v, median, _ratio(metric, v, median), thresholds["link_fraction"],
                              f"{metric} against the median of {len(rows)} {kind} pairs"))
    return out


def verdict(merged, thresholds, textbook, peer=None):
    """The verdict (a dict): every check, and the failures, by subject."""
    checks = gpu_checks(merged, thresholds, textbook) + nvml_checks(merged, thresholds)
    if peer:
        checks += link_checks(peer, thresholds)
    failed = [c for c in checks if not c["pass"]]
    runs = merged.get("context", {}).get("runs", [])
    return {"thresholds": thresholds, "checks": checks, "failed": failed,
            "subjects": sorted({c["subject"] for c in checks}),
            "failed_subjects": sorted({c["subject"] for c in failed}),
            "failed_runs": [{"gpu": unit_of(r), "status": r.get("status"), "error": r.get("error", "")}
                            for r in runs if r.get("failed")]}


def ways(concurrent, serial, tolerance=0.05):
    """Which figures differ between every GPU at once and one GPU after another, and by how much: per
    benchmark, each GPU's concurrent figure over its serial one (higher better), their median and
    range, and whether the median is beyond `tolerance` (the host's shared PCIe and memory, power
    and clocks shared by the node)."""
    a, b = per_unit(concurrent), per_unit(serial)
    rows = []
    for name in sorted(set(a) & set(b)):
        ratios = {u: _ratio(m, v, b[name][u][1]) for u, (m, v) in a[name].items() if u in b[name]}
        ratios = {u: r for u, r in ratios.items() if r}
        if ratios:
            xs = sorted(ratios.values())
            med = statistics.median(xs)
            rows.append({"name": name, "gpus": len(xs), "median_ratio": round(med, 4), "min_ratio": round(xs[0], 4),
                         "max_ratio": round(xs[-1], 4), "differs": abs(med - 1) > tolerance})
    wall = [d.get("context", {}).get("node", {}).get("wall_seconds") for d in (concurrent, serial)]
    return {"tolerance": tolerance, "wall_seconds": {"concurrent": wall[0], "serial": wall[1]}, "per_benchmark": rows}
