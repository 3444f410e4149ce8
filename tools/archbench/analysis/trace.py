"""Where a traced program's host and device waited on each other, from the tracers' records
(records/trace.py): device busy and idle time, the longest idle gaps, kernels, copies, builds,
CPU_IDLE (host time blocked in synchronisation), GPU_IDLE_CAUSE (sampled host call paths while no
device work ran), and the inefficiency detectors, each with its evidence."""

import bisect
import collections
import heapq
import statistics

from ..records.trace import DEVICE_TYPES, records


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

    blame = Blame(procs, busy)
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
        "idle_gaps": [dict(g, host=gap_host(procs, g, blame)) for g in gaps[:top]],
        "kernels": kernel_rows,
        "copies": dict(sorted(copies.items())),
        "builds": {"count": len(builds), "total_ns": sum(b["end_ns"] - b["start_ns"] for b in builds)},
        "cpu_idle": cpu_idle(procs, acts, top),
        "gpu_idle_cause": gpu_idle_cause(procs, busy, blame, top),
        "detectors": {
            "redundant_round_trip": redundant_round_trips(procs),
            "repeated_jit": repeated_jit(builds),
            "in_order_independent": in_order_independent(procs, queues),
            "unused_devices": [{"id": d["id"], "name": d["name"]} for d in per_device if not d["used"]],
            "kernel_params_not_aliased": not_aliased(procs),
        },
    }
    return summary


# The records whose thread drives the device: it launches, copies or synchronises.
DRIVING_TYPES = ("kernel", "copy", "memset", "map", "sync")


class Blame:
    """Which host samples explain the device's idle time. Only the threads that drive the device
    count; of those, a thread running is blamed, and a thread waiting is blamed only where its own
    device work is what ended the idle time (it waited for its input: a DataLoader, a lock). Any
    other waiting driver is parked (an autograd or BLAS pool on its condition variable) and listed
    apart: under PyTorch and JAX the longest gaps had been charged to parked pool threads while
    the thread that launched next was importing, compiling or choosing cuDNN algorithms."""

    def __init__(self, procs, busy):
        self.starts = [b[0] for b in busy]
        self.opener = [None] * len(busy)  # (pid, tid) of each busy interval's first device work
        self.drivers = {}
        for p in procs:
            pid = p["process"]["pid"]
            tids = {r["tid"] for t in DRIVING_TYPES for r in p["by_type"].get(t, []) if isinstance(r.get("tid"), int)}
            self.drivers[pid] = tids or {pid}
            for t in DEVICE_TYPES:
                for r in p["by_type"].get(t, []):
                    i = bisect.bisect_left(self.starts, r["start_ns"])
                    if i < len(self.starts) and self.starts[i] == r["start_ns"] and self.opener[i] is None \
                            and isinstance(r.get("tid"), int):
                        self.opener[i] = (pid, r["tid"])

    def __call__(self, pid, s):
        """'blamed', 'parked', or None (not a driving thread) for an idle-time sample of process pid."""
        if s["tid"] not in self.drivers.get(pid, ()):
            return None
        if not s.get("wait"):
            return "blamed"
        i = bisect.bisect_right(self.starts, s["t_ns"])  # the busy interval that ended this idle time
        return "blamed" if i < len(self.opener) and self.opener[i] == (pid, s["tid"]) else "parked"


def gap_host(procs, gap, blame):
    """What the host did in an idle gap: the driving threads' sampled paths in it (the parked ones
    apart), and the builds that overlap it."""
    lo, hi = gap["start_ns"], gap["end_ns"]
    paths = {"blamed": collections.Counter(), "parked": collections.Counter()}
    for p in procs:
        for s in p["by_type"].get("sample", []):
            how = blame(p["process"]["pid"], s) if lo <= s["t_ns"] < hi else None
            if how:
                paths[how][sample_label(s, short_path(s.get("path")))] += 1
    builds = [{"program": b.get("program"), "ns": min(hi, b["end_ns"]) - max(lo, b["start_ns"])}
              for b in records(procs, "build") if b["start_ns"] < hi and b["end_ns"] > lo]
    return {"samples": [{"path": k, "count": v} for k, v in paths["blamed"].most_common(3)],
            "parked": [{"path": k, "count": v} for k, v in paths["parked"].most_common(3)], "builds": builds}


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


def gpu_idle_cause(procs, busy, blame, top):
    """GPU_IDLE_CAUSE: samples of the threads that drive the device taken while no device work ran
    anywhere, by call path and by function (inclusive: every frame of the path); parked threads'
    samples (Blame) by path apart.

    A sample stands for the wall time since its thread's previous sample: a running thread is
    sampled per interval of CPU time it uses, so on a loaded machine, where it waits for a CPU,
    its samples are fewer than the wall time's intervals; counting each as one interval would
    under-state the time."""
    by_path = collections.Counter()
    by_func = collections.Counter()
    ns_path = collections.defaultdict(float)
    ns_func = collections.defaultdict(float)
    parked, ns_parked = collections.Counter(), collections.defaultdict(float)
    taken = idle = other = 0
    for p in procs:
        period = sample_period_ns(p)
        last = {}
        pid = p["process"]["pid"]
        # The threads that drive the device. The others (the runtime's own, the driver's poll
        # thread, CUPTI's worker, a BLAS pool that never touches the device) are sampled too, but
        # they are not host call paths that keep the device waiting.
        drivers = blame.drivers.get(pid, ())
        for s in sorted(p["by_type"].get("sample", []), key=lambda s: s["t_ns"]):
            if s["tid"] not in drivers:
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
            if blame(pid, s) == "parked":
                parked[key] += 1
                ns_parked[key] += weight
                continue
            by_path[key] += 1
            ns_path[key] += weight
            for f in set(s.get("path") or []):
                by_func[f] += 1
                ns_func[f] += weight
    return {"samples": taken, "idle_samples": idle, "ns": round(sum(ns_path.values())),
            "runtime_thread_samples": other, "parked_samples": sum(parked.values()),
            "parked_ns": round(sum(ns_parked.values())),
            "parked": [{"path": k, "samples": v, "ns": round(ns_parked[k])} for k, v in parked.most_common(top)],
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


def overhead(untraced, traced, repeat):
    """Traced against untraced wall time: medians, and minimums (the run least disturbed by other
    load on a shared machine)."""
    out = {"untraced_s": statistics.median(untraced), "traced_s": statistics.median(traced),
           "untraced_min_s": min(untraced), "traced_min_s": min(traced), "repeat": repeat}
    out["ratio"] = out["traced_s"] / out["untraced_s"]
    out["ratio_min"] = out["traced_min_s"] / out["untraced_min_s"]
    return out
