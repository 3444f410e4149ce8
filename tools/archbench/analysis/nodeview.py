"""A node's merged run (archbench --device=all, archbench_mpi) seen GPU by GPU for the report: one
report Run per GPU, so that every table and chart shows each GPU as its own column or series and
never a median over GPUs alone; the table of each benchmark's figure on each GPU with the outliers
of the variability test marked; and each link kind of the peer family as a matrix, a pair below the
health verdict's fraction of its kind's median marked."""

import statistics

from ..records import results as ar
from ..records.results import unit_of
from .health import PEER
from .report import Run, rows_of
from .variability import per_unit, variability


def units_of(run):
    """The GPUs a run's files hold ({unit label: [entries]}), in the order met."""
    out = {}
    for file in run.files:
        for e in ar.read_results(file)[1]:
            out.setdefault(unit_of(e), []).append(e)
    return out


def node_units(run):
    """units_of(run) for a merged run (context runs or merged_runs), else {}: one read of its files."""
    return units_of(run) if run.context.get("merged_runs") or run.context.get("runs") else {}


def per_gpu(run, index, units):
    """[Run] one a GPU where the run holds several (units: node_units(run); context "gpu": its unit
    label and PCI bus id), else [run]; index: the first Run's number (rows carry it)."""
    if len(units) < 2:
        return [run]
    pci = {g.get("device_selector"): g.get("pci_bus_id") for g in run.context.get("node", {}).get("gpus", [])}
    out = []
    for n, (unit, entries) in enumerate(units.items()):
        benches = {}
        ar.add_entries(benches, entries, energy=True)
        sel = unit.split()[-1]
        gpu = f"{unit} ({pci[sel]})" if pci.get(sel) else unit
        device = next((e.get("device") for e in entries if e.get("device")), run.context.get("device"))
        context = dict(run.context, gpu=gpu, device=device)
        facts = dict(run.facts, gpu=[gpu], device=[device])
        out.append(Run(run.arg, run.files, context, facts, rows_of(entries, index + n), benches, run.cache_bytes))
    return out


def node_table(run, units):
    """(GPU labels, rows, slow GPUs) of a node's run (units: node_units(run)): each benchmark
    measured on two GPUs or more, its metric, a value a GPU (None where it did not run) and each
    GPU's mark: "slow" or "fast" (an outlier of the variability test), "" otherwise."""
    merged = {"context": run.context, "benchmarks": [e for es in units.values() for e in es]}
    report = variability(merged)
    marks = {(b["name"], o["gpu"]): "slow" if o["slow"] else "fast" for b in report["per_benchmark"]
             for o in b["outliers"]}
    gpus = list(units)
    rows = []
    for name, by_unit in sorted(per_unit(merged).items()):
        if len(by_unit) < 2:
            continue
        metric = next(iter(by_unit.values()))[0]
        rows.append({"name": name, "metric": metric,
                     "values": [by_unit[g][1] if g in by_unit else None for g in gpus],
                     "marks": [marks.get((name, g), "") for g in gpus]})
    return gpus, rows, report["slow_gpus"]


def link_matrices(run, fraction=0.9):
    """{kind: (gpus, {(src, dst): (GB/s, low)})} of the peer family's ordered pairs (the run's rows:
    one process measures them all), `low` where a pair is below `fraction` of its kind's median."""
    kinds = {}
    for row in run.rows:
        m = PEER.match(row.name)
        if m and row.values.get("byte_per_s"):
            kinds.setdefault(m["kind"], {})[(int(m["src"]), int(m["dst"]))] = row.values["byte_per_s"] / 1e9
    out = {}
    for kind, cells in sorted(kinds.items()):
        median = statistics.median(cells.values())
        gpus = sorted({g for pair in cells for g in pair})
        out[kind] = (gpus, {p: (v, v < fraction * median) for p, v in cells.items()})
    return out
