"""History of one device's headline figures across driver/runtime/archbench versions: the runs
grouped by version, each group's headline figures (best compute rate per type, best memory
bandwidths, latency at the smallest and largest working set)."""

import math
import re
import statistics
from datetime import datetime

from ..records import results as ar

TYPES = ("int", "float", "double", "half")
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
              "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3}
SIZE_AXES = ("bytes", "size", "ws", "working_set", "workingset", "footprint", "buffer")
SIZE_RE = re.compile(r"(?:^|[:=])(\d+(?:\.\d+)?)([kmg]?i?b?)$", re.IGNORECASE)


def run_time(context):
    """The run's date as a POSIX timestamp (inf when missing or unparsable)."""
    try:
        return datetime.fromisoformat(str(context.get("date", ""))).timestamp()
    except (ValueError, OverflowError, OSError):
        return math.inf


def working_set(axes):
    """The working-set size in bytes of a latency benchmark (a size-like axis first, else the last
    number); a value may be a number of bytes or a text such as 4KiB."""
    values = [v for k, v in axes.items() if k not in ("family", "backend")]
    preferred = [v for k, v in axes.items() if k.lower() in SIZE_AXES]
    for value in reversed(preferred or values):
        if ar.number(value) is not None:
            return float(value)
        m = SIZE_RE.search(str(value))
        if m and m.group(2).lower() in SIZE_UNITS:
            return float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]
    return None


def headline_columns():
    """The headline metrics, in display order: (key, label, higher is better)."""
    cols = [(f"compute/{t}", f"compute {t} (op/s)" if t == "int" else f"compute {t} (flop/s)", True)
            for t in TYPES]
    cols += [("memory/triad", "triad (B/s)", True), ("memory/copy", "copy (B/s)", True),
             ("memory/max", "memory max (B/s)", True),
             ("latency/smallest", "latency smallest ws (ns)", False),
             ("latency/largest", "latency largest ws (ns)", False)]
    return cols


def headlines(benches):
    """Headline figures of one group's merged benchmarks: key -> value."""
    out, latency = {}, {}

    def best(key, value):
        out[key] = max(out.get(key, value), value)

    for bench in benches.values():
        if bench.error:
            continue
        axes, family = bench.axes, bench.axes.get("family")
        med = {m: statistics.median(v) for m in ar.values_of_keys(bench) if (v := ar.values_of(bench, m))}
        if family == "compute":
            kind = axes.get("scalar")
            rate = med.get("flop_per_s", med.get("op_per_s"))
            if kind in TYPES and rate is not None:
                best(f"compute/{kind}", rate)
        elif family == "memory" and "byte_per_s" in med:
            best("memory/max", med["byte_per_s"])
            if axes.get("op") in ("triad", "copy"):
                best(f"memory/{axes['op']}", med["byte_per_s"])
        elif family == "latency" and "ns_per_access" in med:
            ws = working_set(axes)
            if ws is not None:
                latency.setdefault(ws, []).extend(ar.values_of(bench, "ns_per_access"))
    if latency:
        out["latency/smallest"] = statistics.median(latency[min(latency)])
        out["latency/largest"] = statistics.median(latency[max(latency)])
    return out


def collect(folder, device):
    """(device, groups of its runs: [(driver, runtime, archbench, first date, run count, headlines)] by date)."""
    files = ar.result_files(folder)
    runs, devices = [], set()
    for path in files:
        context, entries = ar.read_results(path)  # a broken file is an error: nothing silently left out
        devices.add(str(context.get("device", "")))
        runs.append((context, entries))
    if device is None:
        if len(devices) != 1:
            raise ar.InputError(f"{folder}: results for {len(devices)} devices; pick one with --device "
                                f"({', '.join(sorted(devices))})")
        device = next(iter(devices))
    device = model_of(folder, device, devices)
    groups = {}
    for context, entries in runs:
        if str(context.get("device", "")) != device:
            continue
        key = (str(context.get("driver_version", "?")), str(context.get("runtime_version", "?")),
               str(context.get("archbench_version", "?")))
        g = groups.setdefault(key, {"date": math.inf, "label": "", "runs": 0, "benches": {}})
        when = run_time(context)
        if when <= g["date"]:
            g["date"], g["label"] = when, str(context.get("date", ""))[:10]
        g["runs"] += 1
        ar.add_entries(g["benches"], entries)
    ordered = sorted(groups.items(), key=lambda kv: (kv[1]["date"], kv[0]))
    return device, [(*key, g["label"], g["runs"], headlines(g["benches"])) for key, g in ordered]


def model_of(folder, given, devices):
    """The one device model a --device names: the model itself (case aside), else the only one that
    contains it; InputError listing the models where several contain it (two models never mix:
    "H100" names both "H100 80GB HBM3" and "H100 PCIe")."""
    exact = [d for d in devices if d.lower() == given.lower()]
    found = exact or sorted(d for d in devices if given.lower() in d.lower())
    if len(found) > 1:
        raise ar.InputError(f"{folder}: {len(found)} device models match {given!r}: "
                            f"{'; '.join(found)}; give one of them as --device")
    if not found:
        raise ar.InputError(f"{folder}: no results for a device matching {given!r} "
                            f"(devices: {', '.join(sorted(devices)) or 'none'})")
    return found[0]


def chart_columns(groups):
    """The headline metrics some version group has: (key, label, higher is better)."""
    return [c for c in headline_columns() if any(c[0] in g[-1] for g in groups)]


def group_label(g, groups):
    """The driver, with the runtime and the archbench version where those differ across groups."""
    return " / ".join([g[0]] + [g[k] for k in (1, 2) if len({r[k] for r in groups}) > 1])
