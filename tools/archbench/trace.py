"""Trace an unmodified OpenCL or CUDA program, then say where its host and device waited on each other.

  archbench_trace.py run [--api opencl|cuda|auto] [--out DIR] [--rate HZ] [--lib-dir DIR]
                         [--overhead] [--repeat N] [--no-report] -- PROGRAM [ARGS...]
  archbench_trace.py report RAW.jsonl... [--json FILE] [--trace FILE] [--top N]

run: starts PROGRAM with the OpenCL tracer preloaded (LD_PRELOAD=libarchbench_trace_opencl.so)
and/or the CUDA tracer injected (CUDA_INJECTION64_PATH=libarchbench_trace_cuda.so), raw records
going to DIR (default ./archbench-trace) as the program runs; then reports on the files the run
wrote: summary.json, trace.json.gz (Chrome trace-event format, gzip-compressed: open it in
https://ui.perfetto.dev) and the summary, on stderr (or --log FILE), so that the program's stdout
and stderr stay its own. --overhead also runs the program untraced and prints traced/untraced
wall time. The exit is the program's own, as a shell sees it: its status, or death by the same
signal; 127 when PROGRAM is not found and 126 when it is not executable (as env(1) and the shell
do). A statically linked PROGRAM cannot be traced (neither LD_PRELOAD nor CUDA injection reaches
it): it runs untraced, with a message. An output folder that cannot be written: the same. A
process the program starts (fork, exec) is traced only if it calls OpenCL or CUDA itself.

report: the same analysis of raw files (tools/analysis/trace/FORMAT.md) from any run. Summary: device busy
and idle time over the program's span, the longest idle gaps, per-kernel totals, copies by kind,
builds, CPU_IDLE (host time blocked in synchronisation, by call path and by the kernels it waited
for), GPU_IDLE_CAUSE (sampled host call paths while no kernel or copy ran on any device), and the
inefficiency detectors, each with its evidence: redundant round trips, repeated JIT builds,
in-order queues of independent kernels, unused devices, kernels whose buffer arguments never
overlap. Exit 2 on a malformed raw file (with the file and line).

Frames of an executable that exports no symbols are named with addr2line (binutils) when the
executable is still where the run found it. The tracer libraries are looked for in --lib-dir
(only there when given), else $ARCHBENCH_TRACE_LIB_DIR, then next to this script (../lib in a
bundle, the newest ../build*/lib in a checkout).
"""

import argparse
import bisect
import collections
import heapq
import glob
import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from . import cli
from .cli import InputError

LIBS = {"opencl": "libarchbench_trace_opencl.so", "cuda": "libarchbench_trace_cuda.so"}
DEVICE_TYPES = ("kernel", "copy", "map", "memset")  # records that occupy a device queue


class TraceError(InputError):
    """A raw file that does not follow tools/analysis/trace/FORMAT.md (message names file and line)."""


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

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
    if len(procs) > 1:  # ids are unique within a file: name them by process when merging
        for p in procs:
            pid = p["process"]["pid"]
            for recs in p["by_type"].values():
                for r in recs:
                    for k in ID_FIELDS:
                        if r["type"] != "process" and isinstance(r.get(k), str):
                            r[k] = f"{pid}:{r[k]}"
                    for b in r.get("buffers") or []:
                        b["id"] = f"{pid}:{b['id']}"
    return procs


def symbolize(procs):
    """Names the program's own frames ("prog+0xOFFSET": an executable that exports no symbols)
    with addr2line from binutils, where it and the executable are at hand; otherwise leaves them."""
    tool = shutil.which("addr2line")
    for p in procs:
        exe = (p["process"].get("command") or "").split(" ")[0]
        if not tool or not os.path.isfile(exe):
            continue
        prefix = os.path.basename(exe) + "+0x"
        frames = sorted({f for recs in p["by_type"].values() for r in recs for f in r.get("path") or []
                         if isinstance(f, str) and f.startswith(prefix)})
        if not frames:
            continue
        # Return addresses: the call is the instruction before, so look up offset - 1.
        addrs = [hex(int(f[len(prefix):], 16) - 1) for f in frames]
        try:
            out = subprocess.run([tool, "-f", "-C", "-e", exe] + addrs, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        names = out.splitlines()[0::2]
        if len(names) != len(frames):
            continue
        rename = {f: n for f, n in zip(frames, names) if n and n != "??"}
        for recs in p["by_type"].values():
            for r in recs:
                if r.get("path"):
                    r["path"] = [rename.get(f, f) for f in r["path"]]


def records(procs, kind):
    return [r for p in procs for r in p["by_type"].get(kind, [])]


# ---------------------------------------------------------------------------------------------
# Interval arithmetic
# ---------------------------------------------------------------------------------------------

def union(intervals):
    """Sorted, merged [start, end) intervals."""
    out = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(merged, t):
    """True when t lies inside one of the merged intervals."""
    i = bisect.bisect_right(merged, [t, float("inf")]) - 1
    return i >= 0 and merged[i][0] <= t < merged[i][1]


def clip_total(merged, lo, hi):
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in merged)


def function_name(frame):
    """A demangled frame without its parameter list: "ns::f(int) const" -> "ns::f"."""
    end = len(frame.rstrip()) - (6 if frame.rstrip().endswith(" const") else 0)
    if not frame[:end].endswith(")"):
        return frame
    depth = 0
    for i in range(end - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(frame[i], 0)
        if depth == 0:
            return frame[:i] if i > 0 else frame
    return frame


def outer_frames(path):
    """The frames outermost first, without parameter lists and without the C runtime's entry."""
    return [function_name(f) for f in reversed(path or [])
            if f not in ("_start", "__libc_start_main") and not f.startswith("libc.so")]


def short_path(path, depth=6):
    """A sampled call path for people, from the outermost frame down (as a calling-context tree
    reads), cut at `depth` frames so that samples taken under one caller add up."""
    frames = outer_frames(path)
    return " > ".join(frames[:depth]) if frames else "(no path)"


def call_site(path, head=2, tail=4):
    """An API call's path: its outermost frames and, after "...", the innermost ones (the call site)."""
    frames = outer_frames(path)
    if len(frames) > head + tail:
        frames = frames[:head] + ["..."] + frames[-tail:]
    return " > ".join(frames) if frames else "(no path)"


def activity_name(r):
    if r["type"] == "kernel":
        return r["name"]
    kind = f" {r['kind']}" if r.get("kind") else ""
    return f"{r['type']}{kind}" + (f" ({r['host_memory']})" if r["type"] == "copy" and r.get("host_memory") else "")


# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------

def analyse(procs, top=10):
    """The summary as a dict (what --json writes)."""
    span_lo = min(p["process"]["start_ns"] for p in procs)
    span_hi = max(p["process"]["end_ns"] for p in procs)
    span = max(1, span_hi - span_lo)
    queues = {q["id"]: q for q in records(procs, "queue")}
    devices = {d["id"]: d for d in records(procs, "device")}
    acts = [r for t in DEVICE_TYPES for r in records(procs, t) if r["end_ns"] >= r["start_ns"] > 0]
    busy = union([r["start_ns"], r["end_ns"]] for r in acts)
    busy_ns = clip_total(busy, span_lo, span_hi)

    per_device = []
    by_dev = collections.defaultdict(list)
    for r in acts:
        by_dev[queues.get(r["queue"], {}).get("device", "?")].append([r["start_ns"], r["end_ns"]])
    for dev_id in sorted(set(devices) | set(by_dev)):
        b = clip_total(union(by_dev.get(dev_id, [])), span_lo, span_hi)
        d = devices.get(dev_id, {})
        per_device.append({"id": dev_id, "name": d.get("name", "?"), "used": d.get("used", dev_id in by_dev),
                           "busy_ns": b, "idle_ns": span - b, "busy_share": b / span})

    gaps = [{"start_ns": a[1], "end_ns": b[0], "ns": b[0] - a[1]} for a, b in zip(busy, busy[1:])]
    gaps.sort(key=lambda g: -g["ns"])

    kernels = collections.defaultdict(list)
    for r in records(procs, "kernel"):
        kernels[r["name"]].append(r["end_ns"] - r["start_ns"])
    ktotal = sum(sum(v) for v in kernels.values()) or 1
    kernel_rows = sorted(({"name": k, "count": len(v), "total_ns": sum(v), "mean_ns": sum(v) / len(v),
                           "share": sum(v) / ktotal} for k, v in kernels.items()), key=lambda r: -r["total_ns"])

    copies = collections.defaultdict(lambda: {"count": 0, "bytes": 0, "ns": 0})
    for r in records(procs, "copy"):
        c = copies[f"{r['kind']} {r.get('host_memory') or '?'}"]
        c["count"] += 1
        c["bytes"] += r["bytes"]
        c["ns"] += r["end_ns"] - r["start_ns"]
    builds = records(procs, "build")

    summary = {
        "files": [p["file"] for p in procs],
        "processes": [{k: p["process"].get(k) for k in ("pid", "api", "command", "clock", "sample_rate_hz", "sampler",
                                                         "samples_dropped", "records_dropped", "signal", "ended",
                                                         "truncated") if k in p["process"]} for p in procs],
        "record_counts": dict(sorted(collections.Counter(t for p in procs for t, recs in p["by_type"].items()
                                                         for _ in recs).items())),
        "span_ns": span,
        "device_busy_ns": busy_ns,
        "device_idle_ns": span - busy_ns,
        "devices": per_device,
        "idle_gaps": [dict(g, host=gap_host(procs, g)) for g in gaps[:top]],
        "kernels": kernel_rows,
        "copies": dict(sorted(copies.items())),
        "builds": {"count": len(builds), "total_ns": sum(b["end_ns"] - b["start_ns"] for b in builds)},
        "cpu_idle": cpu_idle(procs, acts, top),
        "gpu_idle_cause": gpu_idle_cause(procs, busy, top),
        "detectors": {
            "redundant_round_trip": redundant_round_trips(procs),
            "repeated_jit": repeated_jit(builds),
            "in_order_independent": in_order_independent(procs, queues),
            "unused_devices": [{"id": d["id"], "name": d["name"]} for d in per_device if not d["used"]],
            "kernel_params_not_aliased": not_aliased(procs),
        },
    }
    return summary


def gap_host(procs, gap):
    """What the host did in an idle gap: the sampled paths in it, and the builds that overlap it."""
    lo, hi = gap["start_ns"], gap["end_ns"]
    paths = collections.Counter(sample_label(s, short_path(s.get("path")))
                                for s in records(procs, "sample") if lo <= s["t_ns"] < hi)
    builds = [{"program": b.get("program"), "ns": min(hi, b["end_ns"]) - max(lo, b["start_ns"])}
              for b in records(procs, "build") if b["start_ns"] < hi and b["end_ns"] > lo]
    return {"samples": [{"path": k, "count": v} for k, v in paths.most_common(3)], "builds": builds}


def sample_label(s, path):
    """A sample's call path as the report shows it: a sleeping thread's names the call it sleeps
    in, then its stack (FORMAT.md: path_from own) or, where that could not be walked, where the
    thread last ran."""
    if not s.get("wait"):
        return path
    if s.get("path_from") == "own":
        return f"waiting in {s['wait']}: {path}"
    return f"waiting in {s['wait']}" + (f" (last ran in {path})" if s.get("path") else "")


def sample_period_ns(proc):
    """The sampling interval: from the process record, else the median step between one thread's samples."""
    hz = proc["process"].get("sample_rate_hz")
    if isinstance(hz, (int, float)) and hz > 0:
        return 1e9 / hz
    by_tid = collections.defaultdict(list)
    for s in proc["by_type"].get("sample", []):
        by_tid[s["tid"]].append(s["t_ns"])
    steps = [b - a for ts in by_tid.values() for a, b in zip(sorted(ts), sorted(ts)[1:])]
    return statistics.median(steps) if steps else 0


def cpu_idle(procs, acts, top):
    """CPU_IDLE: time in synchronisation calls, by call path and by the device work it waited for.

    A sync's time is split over the device work that overlapped it (on its queue, or any queue
    of the process for a wait without one), in proportion to the overlap; time with nothing
    running is '(no device work)' (submission latency, a wait on a user event)."""
    by_path = collections.defaultdict(lambda: {"ns": 0, "count": 0})
    by_work = collections.defaultdict(float)
    total = 0
    for p in procs:
        pacts = sorted((r for t in DEVICE_TYPES for r in p["by_type"].get(t, []) if r["end_ns"] >= r["start_ns"] > 0),
                       key=lambda r: r["start_ns"])
        # A sweep over syncs by start time: `live` holds the work that started before the current
        # sync ends and has not ended before it starts (a heap by end time), so each sync looks
        # only at the work that overlaps it, even when one long kernel spans thousands of others.
        live, nxt = [], 0
        for s in sorted(p["by_type"].get("sync", []), key=lambda s: s["start_ns"]):
            d = s["end_ns"] - s["start_ns"]
            total += d
            key = f"{s['kind']}: {short_path(s.get('path'))}"
            by_path[key]["ns"] += d
            by_path[key]["count"] += 1
            while nxt < len(pacts) and pacts[nxt]["start_ns"] < s["end_ns"]:
                heapq.heappush(live, (pacts[nxt]["end_ns"], nxt))
                nxt += 1
            while live and live[0][0] <= s["start_ns"]:
                heapq.heappop(live)
            waited = [(pacts[i], min(e, s["end_ns"]) - max(pacts[i]["start_ns"], s["start_ns"])) for e, i in live
                      if s.get("queue") is None or pacts[i]["queue"] == s.get("queue")]
            waited = [(r, o) for r, o in waited if o > 0]
            busy = clip_total(union([r["start_ns"], r["end_ns"]] for r, _ in waited), s["start_ns"], s["end_ns"])
            over = sum(o for _, o in waited) or 1
            for r, o in waited:
                by_work[activity_name(r)] += busy * o / over
            if d - busy > 0:
                by_work["(no device work)"] += d - busy
    return {"total_ns": total,
            "by_path": sorted(({"path": k, **v} for k, v in by_path.items()), key=lambda r: -r["ns"])[:top],
            "by_work": sorted(({"name": k, "ns": round(v)} for k, v in by_work.items()), key=lambda r: -r["ns"])[:top]}


def gpu_idle_cause(procs, busy, top):
    """GPU_IDLE_CAUSE: samples of the program's threads taken while no device work ran anywhere,
    by call path and by function (inclusive: every frame of the path).

    A sample stands for the wall time since its thread's previous sample: a running thread is
    sampled per interval of CPU time it uses, so on a loaded machine, where it waits for a CPU,
    its samples are fewer than the wall time's intervals; counting each as one interval would
    under-state the time."""
    by_path = collections.Counter()
    by_func = collections.Counter()
    ns_path = collections.defaultdict(float)
    ns_func = collections.defaultdict(float)
    taken = idle = other = 0
    for p in procs:
        period = sample_period_ns(p)
        last = {}
        # The program's threads: the main thread and every thread that called the API. The
        # runtime's own threads (the driver's poll thread, CUPTI's worker) are sampled too, but
        # they are not host call paths a programmer can act on.
        callers = {p["process"]["pid"]} | {r["tid"] for t, recs in p["by_type"].items() if t != "sample"
                                           for r in recs if isinstance(r, dict) and "tid" in r}
        for s in sorted(p["by_type"].get("sample", []), key=lambda s: s["t_ns"]):
            if s["tid"] not in callers:
                other += 1
                continue
            taken += 1
            # The wall time since the thread's previous sample (running or waiting), at most 1 s
            # (older files, sampled by a wall-clock timer: 10 intervals); a thread's first: the
            # time the sampler gave it.
            cap = 1e9 if "ns" in s else 10 * period
            weight = min(s["t_ns"] - last[s["tid"]], cap) if s["tid"] in last else s.get("ns", period)
            last[s["tid"]] = s["t_ns"]
            if covered(busy, s["t_ns"]):
                continue
            idle += 1
            key = short_path(s.get("path"), 8)
            key = sample_label(s, key)
            by_path[key] += 1
            ns_path[key] += weight
            for f in set(s.get("path") or []):
                by_func[f] += 1
                ns_func[f] += weight
    return {"samples": taken, "idle_samples": idle, "ns": round(sum(ns_path.values())),
            "runtime_thread_samples": other,
            "by_path": [{"path": k, "samples": v, "ns": round(ns_path[k])} for k, v in by_path.most_common(top)],
            "by_function": [{"function": k, "samples": v, "ns": round(ns_func[k])} for k, v in by_func.most_common(top)]}


def redundant_round_trips(procs):
    """A d2h whose bytes (same hash, same size) later go back to the device by an h2d."""
    found = []
    for p in procs:
        copies = sorted((r for r in p["by_type"].get("copy", []) if r.get("hash")), key=lambda r: r["start_ns"])
        seen = {}
        for r in copies:
            key = (r["hash"], r["bytes"])
            if r["kind"] == "d2h":
                seen[key] = r
            elif r["kind"] == "h2d" and key in seen:
                back = seen.pop(key)
                found.append({"hash": r["hash"], "bytes": r["bytes"],
                              "read": {"id": back.get("id"), "buffer": back.get("buffer"), "path": call_site(back.get("path"))},
                              "written": {"id": r.get("id"), "buffer": r.get("buffer"), "path": call_site(r.get("path"))}})
    return found


def repeated_jit(builds):
    """The same program (source hash, options, kind) built more than once or in several contexts."""
    groups = collections.defaultdict(list)
    for b in builds:
        groups[(b["source_hash"], b.get("options", ""), b.get("kind", "build"))].append(b)
    out = []
    for (h, opts, kind), bs in groups.items():
        contexts = sorted({b.get("context", "?") for b in bs})
        if len(bs) > 1:
            out.append({"source_hash": h, "options": opts, "kind": kind, "count": len(bs), "contexts": contexts,
                        "programs": [b.get("program") for b in bs],
                        "total_ns": sum(b["end_ns"] - b["start_ns"] for b in bs),
                        "paths": sorted({call_site(b.get("path")) for b in bs})})
    return sorted(out, key=lambda r: -r["total_ns"])


def buffer_ranges(procs):
    """buffer id -> (root buffer, offset, bytes or None) from buffer records (sub-buffers name a parent)."""
    recs = {b["id"]: b for b in records(procs, "buffer")}
    out = {}
    for bid, b in recs.items():
        root, off = bid, 0
        while recs.get(root, {}).get("parent"):
            off += recs[root].get("offset", 0)
            root = recs[root]["parent"]
        out[bid] = (root, off, b.get("bytes"))
    return out


def overlap(ranges, a, b):
    ra, rb = ranges.get(a, (a, 0, None)), ranges.get(b, (b, 0, None))
    if ra[0] != rb[0]:
        return False
    if ra[2] is None or rb[2] is None:
        return True
    return ra[1] < rb[1] + rb[2] and rb[1] < ra[1] + ra[2]


def in_order_independent(procs, queues):
    """In-order queues where consecutive kernels share no buffer that either of them writes."""
    ranges = buffer_ranges(procs)
    by_queue = collections.defaultdict(list)
    for r in records(procs, "kernel"):
        by_queue[r["queue"]].append(r)
    out = []
    for qid, ks in sorted(by_queue.items()):
        if not queues.get(qid, {}).get("in_order", True):
            continue
        ks.sort(key=lambda r: r["start_ns"])
        pairs = unknown = 0
        examples = []
        for a, b in zip(ks, ks[1:]):
            if not a.get("buffers") or not b.get("buffers"):
                unknown += 1  # no argument information (a CUDA kernel without pointer args, say)
                continue
            if not depends(a, b, ranges):
                pairs += 1
                if len(examples) < 5:
                    examples.append({"first": {"id": a.get("id"), "name": a["name"], "buffers": [x["id"] for x in a["buffers"]]},
                                     "then": {"id": b.get("id"), "name": b["name"], "buffers": [x["id"] for x in b["buffers"]]}})
        if pairs:
            out.append({"queue": qid, "device": queues.get(qid, {}).get("device"), "kernels": len(ks),
                        "independent_pairs": pairs, "pairs_without_buffer_info": unknown, "examples": examples})
    return out


def depends(a, b, ranges):
    """True when a buffer one kernel writes overlaps one the other touches (access '?' counts as rw)."""
    def writes(k):
        return [x["id"] for x in k["buffers"] if x.get("access", "?") in ("w", "rw", "?")]
    return (any(overlap(ranges, w, x["id"]) for w in writes(a) for x in b["buffers"]) or
            any(overlap(ranges, w, x["id"]) for w in writes(b) for x in a["buffers"]))


def not_aliased(procs):
    """Kernels given two or more buffers in which no two arguments ever overlap (KERNEL_PARAMS_NOT_ALIASED)."""
    ranges = buffer_ranges(procs)
    stats = {}
    for r in records(procs, "kernel"):
        ids = [x["id"] for x in r.get("buffers") or []]
        if len(ids) < 2:
            continue
        s = stats.setdefault(r["name"], {"launches": 0, "aliased": 0, "example": ids})
        s["launches"] += 1
        if any(overlap(ranges, ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids))):
            s["aliased"] += 1
    return [{"name": k, "launches": v["launches"], "example_buffers": v["example"]}
            for k, v in sorted(stats.items()) if v["aliased"] == 0]


# ---------------------------------------------------------------------------------------------
# Chrome trace-event JSON
# ---------------------------------------------------------------------------------------------

def chrome_trace(procs):
    """Trace events: one track per host thread (syncs, builds, enqueues), one per device queue."""
    t0 = min(p["process"]["start_ns"] for p in procs)

    def us(ns):
        return (ns - t0) / 1000.0

    ev = []
    queue_track = {}
    for p in procs:
        pid = p["process"]["pid"]
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                   "args": {"name": f"host {pid}: {p['process'].get('command', '')}"[:200]}})
        tids = {r["tid"] for recs in p["by_type"].values() for r in recs if isinstance(r.get("tid"), int)}
        for tid in sorted(tids):
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                       "args": {"name": "main thread" if tid == pid else f"thread {tid}"}})
        devices = {d["id"]: d for d in p["by_type"].get("device", [])}
        for q in {q["id"]: q for q in p["by_type"].get("queue", [])}.values():  # a writer may restate one: the last
            dev_pid = 1000000000 + len(queue_track)  # a track group per queue, apart from host pids
            queue_track[q["id"]] = (dev_pid, 1)
            dname = devices.get(q.get("device"), {}).get("name", q.get("device", "?"))
            order = "in-order" if q.get("in_order", True) else "out-of-order"
            ev.append({"ph": "M", "name": "process_name", "pid": dev_pid, "tid": 0, "ts": 0,
                       "args": {"name": f"device {q.get('device')} {dname}"}})
            ev.append({"ph": "M", "name": "thread_name", "pid": dev_pid, "tid": 1, "ts": 0,
                       "args": {"name": f"queue {q['id']} ({order})"}})
        for kind in ("sync", "build"):
            for r in p["by_type"].get(kind, []):
                name = f"{kind} {r['kind']}" if kind == "sync" else f"build {r.get('program', '?')}"
                ev.append({"ph": "X", "name": name, "cat": kind, "pid": pid, "tid": r.get("tid", pid),
                           "ts": us(r["start_ns"]), "dur": max(0, r["end_ns"] - r["start_ns"]) / 1000.0,
                           "args": {"path": r.get("path", []), "queue": r.get("queue"),
                                    "source_hash": r.get("source_hash")}})
        for n, r in enumerate(r for t in DEVICE_TYPES for r in p["by_type"].get(t, [])):
            if r["queue"] not in queue_track:
                dev_pid = 1000000000 + len(queue_track)
                queue_track[r["queue"]] = (dev_pid, 1)
                ev.append({"ph": "M", "name": "process_name", "pid": dev_pid, "tid": 0, "ts": 0,
                           "args": {"name": f"queue {r['queue']}"}})
            qpid, qtid = queue_track[r["queue"]]
            args = {k: r[k] for k in ("id", "global", "local", "bytes", "hash", "host_memory", "buffer", "blocking",
                                      "queued_ns", "submit_ns") if k in r}
            args["path"] = r.get("path", [])
            name = activity_name(r) + (f" {r['bytes']} B" if r["type"] != "kernel" and "bytes" in r else "")
            ev.append({"ph": "X", "name": name, "cat": r["type"], "pid": qpid, "tid": qtid, "ts": us(r["start_ns"]),
                       "dur": max(0, r["end_ns"] - r["start_ns"]) / 1000.0, "args": args})
            if isinstance(r.get("queued_ns"), int) and "tid" in r:
                # The enqueue on the host thread, with a flow arrow to the work on the device.
                fid = f"{pid}.{n}"
                ev.append({"ph": "i", "s": "t", "name": f"enqueue {activity_name(r)}", "cat": "enqueue", "pid": pid,
                           "tid": r["tid"], "ts": us(r["queued_ns"])})
                ev.append({"ph": "s", "id": fid, "name": "enqueue", "cat": "flow", "pid": pid, "tid": r["tid"],
                           "ts": us(r["queued_ns"])})
                ev.append({"ph": "f", "bp": "e", "id": fid, "name": "enqueue", "cat": "flow", "pid": qpid,
                           "tid": qtid, "ts": us(max(r["start_ns"], r["queued_ns"]))})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"t0_ns": t0, "clock": "CLOCK_MONOTONIC", "files": [p["file"] for p in procs]}}


# ---------------------------------------------------------------------------------------------
# Console
# ---------------------------------------------------------------------------------------------

def ms(ns):
    return f"{ns / 1e6:.3f} ms"


def print_summary(s, out=None):
    w = (out or sys.stdout).write
    for p in s["processes"]:
        w(f"process {p['pid']} ({p.get('api')}, clock: {p.get('clock')}, sampling {p.get('sample_rate_hz')} Hz): {p.get('command')}\n")
        if p.get("sampler"):
            w(f"  sampler: {p['sampler']}\n")
        if p.get("signal"):
            w(f"  the process ended by signal {signal_name(p['signal'])}; its trace holds what was recorded until then\n")
        elif p.get("ended"):
            w(f"  trace {p['ended']}\n")
        if p.get("truncated"):
            w("  its last record was cut off mid-write and is left out\n")
    w(f"span {ms(s['span_ns'])}; device busy {ms(s['device_busy_ns'])} ({100 * s['device_busy_ns'] / s['span_ns']:.1f}%), "
      f"idle {ms(s['device_idle_ns'])}\n")
    for d in s["devices"]:
        w(f"  device {d['id']} {d['name']}: {'used' if d['used'] else 'UNUSED'}, busy {ms(d['busy_ns'])} ({100 * d['busy_share']:.1f}%)\n")
    if s["idle_gaps"]:
        w("longest idle gaps between device work:\n")
        for g in s["idle_gaps"][:5]:
            top = g["host"]["samples"][0]["path"] if g["host"]["samples"] else "(no samples)"
            built = sum(b["ns"] for b in g["host"]["builds"])
            w(f"  {ms(g['ns'])}  host: {top}" + (f" (building programs: {ms(built)})" if built else "") + "\n")
    if s["kernels"]:
        w("kernels:\n")
        for k in s["kernels"]:
            w(f"  {k['name']}: {k['count']} x, total {ms(k['total_ns'])}, mean {k['mean_ns'] / 1e3:.1f} us, {100 * k['share']:.1f}%\n")
    for kind, c in s["copies"].items():
        w(f"copies {kind}: {c['count']} x, {c['bytes']} B, {ms(c['ns'])}\n")
    w(f"builds: {s['builds']['count']}, {ms(s['builds']['total_ns'])}\n")
    ci = s["cpu_idle"]
    w(f"CPU_IDLE {ms(ci['total_ns'])} (host blocked in synchronisation)\n")
    for r in ci["by_path"][:5]:
        w(f"  {ms(r['ns'])} in {r['count']} x {r['path']}\n")
    for r in ci["by_work"][:5]:
        w(f"  waiting for {r['name']}: {ms(r['ns'])}\n")
    gi = s["gpu_idle_cause"]
    w(f"GPU_IDLE_CAUSE {ms(gi['ns'])}: {gi['idle_samples']} of {gi['samples']} samples with no device work\n")
    for r in gi["by_path"][:5]:
        w(f"  {r['samples']} samples ({ms(r['ns'])}): {r['path']}\n")
    det = s["detectors"]
    w("detectors:\n")
    for r in det["redundant_round_trip"]:
        w(f"  redundant round trip: {r['bytes']} B read from {r['read']['buffer']} (copy {r['read']['id']}) and written "
          f"unchanged to {r['written']['buffer']} (copy {r['written']['id']}), hash {r['hash']}, at {r['written']['path']}\n")
    for r in det["repeated_jit"]:
        w(f"  repeated JIT: source {r['source_hash']} ({r['kind']}, options '{r['options']}') built {r['count']} x in "
          f"{len(r['contexts'])} context(s) {r['contexts']}, {ms(r['total_ns'])}\n")
    for r in det["in_order_independent"]:
        w(f"  in-order queue {r['queue']}: {r['independent_pairs']} of {r['kernels'] - 1} consecutive kernel pairs share no written buffer\n")
    for r in det["unused_devices"]:
        w(f"  unused device: {r['id']} {r['name']}\n")
    for r in det["kernel_params_not_aliased"]:
        w(f"  kernel {r['name']}: buffer arguments never overlap in {r['launches']} launches (restrict is legal)\n")
    if not any(det.values()):
        w("  (none fired)\n")


def cmd_report(args):
    procs = load(args.raw)
    if not args.no_symbolize:
        symbolize(procs)
    summary = analyse(procs, args.top)
    print_summary(summary)
    if args.json:
        write_json(args.json, summary, indent=1)
    if args.trace:
        write_json(args.trace, chrome_trace(procs))
    return 0


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def write_json(path, doc, indent=None):
    """Write doc as JSON to path (gzip-compressed when it ends in .gz), or raise TraceError saying why not."""
    try:
        with (gzip.open(path, "wt", encoding="utf-8") if path.endswith(".gz") else open(path, "w", encoding="utf-8")) as f:
            json.dump(doc, f, indent=indent)
    except OSError as e:
        raise TraceError(f"{path}: cannot write: {e.strerror or e}") from None


# ---------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------

def find_lib(name, lib_dir, env="ARCHBENCH_TRACE_LIB_DIR"):
    """Path of the library `name` (a tracer's, or archbench_topdown.py's), or None: in `lib_dir`
    when given, else in $`env`, the bundle's lib/ beside tools/, an installed tree's PREFIX/lib
    (tools/ is PREFIX/share/archbench/tools), and the newest build*/lib."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/
    if lib_dir:  # asked for: that folder only
        dirs = [lib_dir]
    else:
        dirs = [d for d in (os.environ.get(env or ""),) if d] + [os.path.join(here, "..", "lib")]
        dirs.append(os.path.join(here, "..", "..", "..", "lib"))
        dirs += sorted(glob.glob(os.path.join(here, "..", "build*", "lib")), key=os.path.getmtime, reverse=True)
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return os.path.abspath(p)
    return None


def dynamic_elf(path):
    """False for an ELF executable with no program interpreter (statically linked: LD_PRELOAD and
    CUDA injection cannot reach it); True otherwise (a dynamic ELF, a script, anything else the
    kernel runs)."""
    import struct
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or len(head) < 64 or head[4] != 2:  # not a 64-bit ELF: let exec decide
                return True
            end = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack(end + "Q", head[32:40])
            phentsize, phnum = struct.unpack(end + "HH", head[54:58])
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return True
    return any(struct.unpack(end + "I", table[i * phentsize:i * phentsize + 4])[0] == 3 for i in range(phnum))  # PT_INTERP


def cmd_run(args):
    """Runs the program traced; returns its exit status (shell convention: 127 not found, 126 not executable;
    a death by signal N as -N, which cli.run re-raises)."""
    log = sys.stderr
    if args.log:
        try:
            log = open(args.log, "a", encoding="utf-8")
        except OSError as e:
            raise InputError(f"--log {args.log}: cannot write: {e.strerror or e}") from None
    say = lambda msg: print(f"archbench_trace.py: {msg}", file=log, flush=True)  # noqa: E731
    prog = args.program[0] if args.program else None
    if not prog:
        print("archbench_trace.py run: no program given (run -- PROGRAM ARGS...)", file=sys.stderr)
        return 2
    exe = shutil.which(prog) if os.sep not in prog else prog
    if not exe or not os.path.exists(exe):
        say(f"{prog}: program not found")
        return 127
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        say(f"{prog}: not an executable file")
        return 126
    apis = ["opencl", "cuda"] if args.api == "auto" else [args.api]
    libs = {a: find_lib(LIBS[a], args.lib_dir) for a in apis}
    missing = [a for a in apis if not libs[a]]
    if args.api != "auto" and missing or not any(libs.values()):
        print(f"archbench_trace.py run: {', '.join(LIBS[a] for a in missing)} not found (give --lib-dir or "
              f"ARCHBENCH_TRACE_LIB_DIR; build it with cmake --build BUILD --target archbench_trace_{apis[0]})",
              file=sys.stderr)
        return 2
    cmd = [os.path.abspath(exe)] + args.program[1:]  # absolute: the report finds it to name frames
    traced = True
    if not dynamic_elf(exe):
        say(f"{prog} is statically linked: the tracers (LD_PRELOAD, CUDA injection) cannot enter it; "
            "it runs untraced")
        traced = False
    try:
        os.makedirs(args.out, exist_ok=True)
        probe = os.path.join(args.out, f".archbench-trace-probe-{os.getpid()}")
        open(probe, "w").close()
        os.remove(probe)
    except OSError as e:
        say(f"cannot write traces to {args.out} ({e.strerror or e}); the program runs untraced")
        traced = False
    env = dict(os.environ, ARCHBENCH_TRACE_DIR=os.path.abspath(args.out),
               ARCHBENCH_TRACE_SAMPLE_US=str(max(1, round(1e6 / args.rate))) if args.rate > 0 else "0")
    if libs.get("opencl"):
        env["LD_PRELOAD"] = libs["opencl"] + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if libs.get("cuda"):
        env["CUDA_INJECTION64_PATH"] = libs["cuda"]

    def timed(e):
        """Runs the program; while it runs, this script ignores the terminal's SIGINT and SIGQUIT
        as a shell does (the program gets them and decides), then restores them."""
        t = time.monotonic()
        try:
            child = subprocess.Popen(cmd, env=e)
        except OSError as err:  # not a format the kernel runs, say: the shell's 126 (127: gone)
            say(f"{prog}: cannot run: {err.strerror or err}")
            raise SystemExit(127 if isinstance(err, FileNotFoundError) else 126) from None
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
        try:
            rc = child.wait()
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
        return rc, time.monotonic() - t

    if not traced:
        return timed(dict(os.environ))[0]
    untraced = []
    if args.overhead:
        for _ in range(args.repeat):
            untraced.append(timed(dict(os.environ))[1])
    pattern = os.path.join(args.out, "*.jsonl")
    before = {f: os.path.getmtime(f) for f in glob.glob(pattern)}
    times = []
    for i in range(args.repeat if args.overhead else 1):
        if i:  # keep only the last run's files for the report
            before = {f: os.path.getmtime(f) for f in glob.glob(pattern)}
        rc, t = timed(env)
        times.append(t)
    raw = sorted(f for f in glob.glob(pattern) if before.get(f) != os.path.getmtime(f))
    how = f"was killed by {signal_name(-rc)} (signal {-rc})" if rc < 0 else f"exited {rc}"
    if rc < 0 and -rc in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT):
        how = f"crashed ({signal_name(-rc)}, signal {-rc}; the shell shows exit status {128 - rc})"
    say(f"the program {how} after {times[-1]:.3f} s traced; raw: {', '.join(raw) or 'none'}")
    overhead = None
    if args.overhead:
        # Medians, and minimums (the run least disturbed by other load on a shared machine).
        overhead = {"untraced_s": statistics.median(untraced), "traced_s": statistics.median(times),
                    "untraced_min_s": min(untraced), "traced_min_s": min(times), "repeat": args.repeat}
        overhead["ratio"] = overhead["traced_s"] / overhead["untraced_s"]
        overhead["ratio_min"] = overhead["traced_min_s"] / overhead["untraced_min_s"]
        say(f"overhead: untraced {overhead['untraced_s']:.3f} s, traced {overhead['traced_s']:.3f} s "
            f"(median of {args.repeat}): {overhead['ratio']:.2f}x; fastest runs {overhead['untraced_min_s']:.3f} s "
            f"and {overhead['traced_min_s']:.3f} s: {overhead['ratio_min']:.2f}x")
    if not raw:
        # Each process that makes an OpenCL call writes its file at that call, and so does CUDA's
        # at cuInit: no file means no call (the tracers said so on stderr if a file could not be opened).
        say("no trace: the program " + ("made no OpenCL/CUDA call" if rc >= 0 else
                                          "made no OpenCL/CUDA call before it ended") +
            ", or the tracer could not attach (its message above says why)")
        return rc
    if not args.no_report:
        procs = load(raw)
        symbolize(procs)
        summary = analyse(procs, args.top)
        summary["exit"] = {"status": rc if rc >= 0 else None, "signal": signal_name(-rc) if rc < 0 else None}
        if overhead:
            summary["overhead"] = overhead
        print_summary(summary, log)
        if rc < 0:
            kept = ", ".join(f"{t} {n}" for t, n in summary["record_counts"].items() if t not in ("process", "path", "end"))
            say(f"the trace keeps what was recorded until the program ended (records: {kept or 'none'})")
        if len(procs) > 1 or any(p["process"].get("pid") != procs[0]["process"].get("pid") for p in procs):
            say(f"{len(procs)} processes traced; a process the program starts (fork, exec) is traced only if it "
                "calls OpenCL or CUDA itself")
        write_json(os.path.join(args.out, "summary.json"), summary, indent=1)
        write_json(os.path.join(args.out, "trace.json.gz"), chrome_trace(procs))
        say(f"{args.out}/summary.json, {args.out}/trace.json.gz (open in https://ui.perfetto.dev)")
    return rc


def main(argv=None):
    """The command line; returns the exit code (the program's own for run; 2 on bad input)."""
    return cli.run("archbench_trace", run, argv)


def run(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 1)[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a program under the tracer, then report")
    r.add_argument("--api", choices=("opencl", "cuda", "auto"), default="auto",
                   help="which tracer (auto: each one that is built; a program that does not call an API is not traced by it)")
    r.add_argument("--out", default="archbench-trace", help="folder for raw files, summary.json, trace.json")
    r.add_argument("--rate", type=float, default=1000, help="samples per second per thread (0: none; default 1000)")
    r.add_argument("--lib-dir", help="folder holding the tracer libraries")
    r.add_argument("--overhead", action="store_true", help="also run untraced and print the wall-time ratio")
    r.add_argument("--repeat", type=int, default=1, help="with --overhead: runs of each, medians compared")
    r.add_argument("--no-report", action="store_true", help="only write the raw files")
    r.add_argument("--top", type=int, default=10, help="rows per ranking")
    r.add_argument("--log", help="this tool's own messages and report go here (default: stderr), so that the "
                                 "program's stdout and stderr are exactly its own")
    r.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    p = sub.add_parser("report", help="analyse raw files")
    p.add_argument("raw", nargs="+", help="raw .jsonl files (tools/analysis/trace/FORMAT.md)")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("--trace", help="write the Chrome trace-event JSON here")
    p.add_argument("--top", type=int, default=10, help="rows per ranking")
    p.add_argument("--no-symbolize", action="store_true",
                   help="leave the program's own frames as prog+0xOFFSET (default: named with addr2line when found)")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        if args.program and args.program[0] == "--":
            args.program = args.program[1:]
        if args.repeat < 1:
            ap.error("--repeat must be at least 1")
        return cmd_run(args)
    return cmd_report(args)

