"""The tracers' raw files (tools/analysis/trace/FORMAT.md; libarchbench_trace_opencl.so and
libarchbench_trace_cuda.so): reading and checking them into processes, and writing the JSON the
trace command writes (summary.json, trace.json.gz)."""

import collections
import gzip
import json

from .. import cli
from .raw import BadFile

DEVICE_TYPES = ("kernel", "copy", "map", "memset")  # records that occupy a device queue


class TraceError(BadFile):
    """A raw file that does not follow tools/analysis/trace/FORMAT.md (message names file and line)."""


# Fields a reader needs, per record type; integers unless listed in STRINGS.
REQUIRED = {
    "process": ("pid", "start_ns"),
    "device": ("id",),
    "queue": ("id",),
    "kernel": ("name", "queue", "start_ns", "end_ns"),
    "copy": ("kind", "bytes", "queue", "start_ns", "end_ns"),
    "map": ("kind", "queue", "start_ns", "end_ns"),
    "memset": ("queue", "start_ns", "end_ns"),
    "build": ("source_hash", "start_ns", "end_ns"),
    "sync": ("kind", "start_ns", "end_ns"),
    "sample": ("tid", "t_ns"),
}
STRINGS = {"id", "name", "queue", "kind", "source_hash"}
ID_FIELDS = ("id", "queue", "device", "buffer", "program", "context", "parent")


def read_text(path):
    """The lines of a raw or JSON file, gzip-compressed or not (told by its first bytes)."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    if not gz:
        return cli.read_lines(path)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.readlines()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: not a readable gzip text file: {e}") from None


def on_host_clock(recs):
    """Moves device times onto the host clock: records written with `device_ns` (the device's
    queued, submit, start, end) get queued_ns..end_ns from the device's `clock` record where the
    runtime measured the offset, else from the enqueue alignment (FORMAT.md). Returns the clock."""
    offset = {r["device"]: r["offset_ns"] for r in recs if r["type"] == "clock" and isinstance(r.get("offset_ns"), int)}
    timed = [r for r in recs if isinstance(r.get("device_ns"), list) and len(r["device_ns"]) == 4]
    align = {}
    for r in timed:
        q, dev = r["device_ns"][0], r.get("device")
        if dev not in offset and isinstance(q, int) and q > 0 and isinstance(r.get("enqueue_ns"), int):
            align[dev] = max(align.get(dev, r["enqueue_ns"] - q), r["enqueue_ns"] - q)
    for r in timed:
        off = offset.get(r.get("device"), align.get(r.get("device"), 0))
        for k, t in zip(("queued_ns", "submit_ns", "start_ns", "end_ns"), r["device_ns"]):
            r[k] = t + off if isinstance(t, int) and t > 0 else 0
    devs = {r.get("device") for r in timed}
    if not devs:
        return None
    return "device+host timer" if devs <= set(offset) else "aligned at enqueue"


def load(paths):
    """Reads raw files into one list of processes: {"process": rec, "by_type": {type: [recs]}, "file": path}.

    A file's last line cut off mid-write (the program crashed or the disk filled) is left out and
    the process is marked truncated; a file without its end record (the program crashed, was
    killed, or exec'd another) ends at its last record and is marked so."""
    procs = []
    for path in paths:
        lines = read_text(path)
        recs, truncated = [], False
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                if n == len(lines) and not line.endswith("\n"):
                    truncated = True
                    continue
                raise TraceError(f"{path}:{n}: not JSON: {e.msg}")
            if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
                raise TraceError(f"{path}:{n}: not a record (an object with a string 'type')")
            recs.append((n, rec))
        clock = on_host_clock([r for _, r in recs])
        by_type = collections.defaultdict(list)
        table, uses = {}, []  # the file's path table; records that name a path by its id
        for n, rec in recs:
            for key in REQUIRED.get(rec["type"], ()):
                want = str if key in STRINGS else int
                if not isinstance(rec.get(key), want) or isinstance(rec.get(key), bool):
                    raise TraceError(f"{path}:{n}: {rec['type']} record without {want.__name__} field '{key}'")
            by_type[rec["type"]].append(rec)
            if rec["type"] == "path":
                if not isinstance(rec.get("id"), int) or not isinstance(rec.get("frames"), list):
                    raise TraceError(f"{path}:{n}: path record without int 'id' and list 'frames'")
                table[rec["id"]] = rec["frames"]
            elif "path_id" in rec:
                uses.append((n, rec))
        for n, rec in uses:  # a call path given by its id in the file's path table
            if rec["path_id"] not in table:
                raise TraceError(f"{path}:{n}: path_id {rec['path_id']} has no path record")
            rec["path"] = table[rec["path_id"]]
        if len(by_type["process"]) != 1:
            raise TraceError(f"{path}: {len(by_type['process'])} process records (one expected)")
        proc = by_type["process"][0]
        if clock and not proc.get("clock"):
            proc["clock"] = clock
        end = by_type.get("end")
        if end:  # written as it went: the end record finishes the process record
            proc.update({k: v for k, v in end[-1].items() if k != "type"})
        elif not isinstance(proc.get("end_ns"), int):
            proc["end_ns"] = max([proc["start_ns"]] + [r[k] for _, r in recs for k in ("end_ns", "t_ns")
                                                        if isinstance(r.get(k), int)])
            proc["ended"] = "without its end record (the program crashed, was killed or exec'd another)"
        if truncated:
            proc["truncated"] = True
        procs.append({"process": proc, "by_type": by_type, "file": path})
    if len(procs) > 1:  # ids are unique within a file: name them by process (and image: an exec keeps the pid)
        seen = collections.Counter()
        for p in procs:
            seen[p["process"]["pid"]] += 1
            n = seen[p["process"]["pid"]]
            pid = p["process"]["pid"] if n == 1 else f"{p['process']['pid']}.{n}"
            for recs in p["by_type"].values():
                for r in recs:
                    for k in ID_FIELDS:
                        if r["type"] != "process" and isinstance(r.get(k), str):
                            r[k] = f"{pid}:{r[k]}"
                    for b in r.get("buffers") or []:
                        b["id"] = f"{pid}:{b['id']}"
    return procs


def records(procs, kind):
    return [r for p in procs for r in p["by_type"].get(kind, [])]


def write_json(path, doc, indent=None):
    """Write doc as JSON to path (gzip-compressed when it ends in .gz), or raise TraceError saying why not."""
    text = json.dumps(doc, indent=indent).encode("utf-8")
    try:
        cli.write_file(path, gzip.compress(text, mtime=0) if path.endswith(".gz") else text)
    except cli.InputError as e:
        raise TraceError(str(e)) from None
