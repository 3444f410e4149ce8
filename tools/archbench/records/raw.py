"""The raw record files of the injection libraries (JSON lines, one record an object with a "type";
tools/analysis/*/FORMAT.md): reading them, and checking each format's records, in one place.
TopDown (libarchbench_topdown.so), PM sampling (libarchbench_pmsampling.so) and PC sampling
(libarchbench_pcsampling.so) share read_records; the tracers' format is records/trace.py's. Also
the JSON of a TopDown run and of a roofline model, as the timeline and program commands read them."""

import json

from .. import cli
from ..cli import InputError


class BadFile(InputError):
    """A raw file that is not its library's records (the message names file and line)."""


def read_records(path, types, check, what, library):
    """An injection library's raw file (JSON lines) as {type: [records]}, every type of `types`
    present; check(record) raises ValueError, KeyError, TypeError or AttributeError on a
    malformed one, and BadFile names the file and line; a file with no process record was not
    written by `library`. A last line cut off mid-write (a process killed, SIGKILL, while its
    library wrote) is left out and counted in recs["cut"]: what was written before it is kept."""
    recs = {t: [] for t in types}
    lines = cli.read_lines(path)
    recs["cut"] = 1 if lines and not lines[-1].endswith("\n") and lines[-1].strip() else 0
    for no, line in enumerate(lines[:len(lines) - recs["cut"]], 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            recs.setdefault(r["type"], []).append(r)
            check(r)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadFile(f"{path}:{no}: not a {what} record ({e})")
    if not recs["process"]:
        raise BadFile(f"{path}: no process record: not written by {library}")
    return recs


# ---------------------------------------------------------------- TopDown (kernel replay)

def check_topdown(r):
    if r["type"] == "kernel":
        float(r["duration_ns"]), r["name"], dict(r["topdown"])
    if r["type"] == "shape":
        int(r["launches"]), r["name"], float(r.get("unprofiled_ns", 0))


def load_topdown(path):
    """libarchbench_topdown.so's raw records, by type; a malformed line is an error naming the file and line."""
    return read_records(path, ("process", "profiler", "kernel", "error", "end", "shape", "unreplayable"),
                        check_topdown, "TopDown", "libarchbench_topdown.so")


# ---------------------------------------------------------------- PM sampling (the timeline)

PM_TYPES = ("process", "injection", "config", "base_metrics", "clock", "name", "launch", "wait", "host", "kernel",
            "sample", "error", "end", "exit", "interval")


def check_pm(r):
    t = r["type"]
    if t == "sample":
        int(r["start"]), int(r["end"]), [float(v) if v is not None else None for v in r["values"]]
    elif t == "kernel":
        int(r["start"]), int(r["end"]), str(r["name"])
    elif t == "launch":
        int(r["host_ns"])
    elif t == "config":
        list(r["metrics"]), dict(r["roles"]), list(r["level1"]), int(r["interval_ns"])
    elif t == "clock":
        int(r["mono_ns"]), int(r["cupti_ns"]), int(r["realtime_ns"])
    elif t == "exit":
        int(r["start_ns"]), int(r["end_ns"])
    elif t == "interval":
        int(r["interval_ns"]), int(r["host_ns"]), int(r["gap_ns"])


def load_pm(path):
    """libarchbench_pmsampling.so's raw records (and archbench_pmsampler's), by type."""
    return read_records(path, PM_TYPES, check_pm, "PM sampling", "libarchbench_pmsampling.so")


# ---------------------------------------------------------------- PC sampling

def check_pc(r):
    if r["type"] == "pc":
        r["name"], int(r["pc"]), int(r.get("line", 0))
        if not all(isinstance(v, int) and v >= 0 for v in dict(r["stalls"]).values()):
            raise ValueError("stall counts must be counts")
    elif r["type"] == "sass":
        r["name"], int(r["pc"]), int(r.get("smsp__sass_inst_executed", 0))
    elif r["type"] == "launch":
        r["name"], int(r["launches"]), float(r["warps_per_scheduler"])


def load_pc(path):
    """libarchbench_pcsampling.so's raw records (a sampled run's or a SASS metrics run's), by type."""
    return read_records(path, ("process", "config", "module", "pc", "sass", "drain", "launch", "end", "error"),
                        check_pc, "PC sampling", "libarchbench_pcsampling.so")


def load_warp(path):
    """The warp pass's per-kernel launches {mangled or name: (name, [warp objects])} from the
    TopDown injection's raw file (its kernel records' "warp" objects), and the records."""
    recs = load_topdown(path)
    out = {}
    for r in recs["kernel"]:
        if isinstance(r.get("warp"), dict) and r["warp"]:
            out.setdefault(r.get("mangled") or r["name"], (r["name"], []))[1].append(r["warp"])
    return out, recs


# ---------------------------------------------------------------- the tools' outputs read back

def stall_split_of(path):
    """{kernel name: frontend's share of the stall} from a kernel-replay TopDown's JSON
    (archbench_topdown.py --json): each kernel's frontend / (frontend + backend)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        rows = doc["kernels"]
        out = {}
        for r in rows:
            fe, be = float(r.get("frontend", 0) or 0), float(r.get("backend", 0) or 0)
            if fe + be > 0:
                out[str(r["kernel"])] = fe / (fe + be)
        return out
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"--stall-split {path}: not a kernel-replay TopDown JSON (archbench_topdown.py --json): {e}")


def load_model(path):
    """A roofline model (archbench_roofline.py --json): its orm and carm (and textbook, or None)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        doc["orm"], doc["carm"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a roofline model (archbench_roofline.py --json): {e}") from None
    doc.setdefault("textbook", None)
    return doc
