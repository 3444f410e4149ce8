"""The trace's views: the summary on a terminal, and the Chrome trace-event JSON (one track per
host thread, one per device queue; open it in https://ui.perfetto.dev)."""

import signal
import sys

from ..analysis.trace import activity_name
from ..records.trace import DEVICE_TYPES


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


def ms(ns):
    return f"{ns / 1e6:.3f} ms"


def print_summary(s, out=None):
    w = (out or sys.stdout).write
    # What the trace misses, first: a truncated trace read as complete shows a fraction of the kernels
    # and a near-idle device (issue 40: 16,665 of 64,649 kernels, "busy 1.1%").
    dropped = sum(p.get("records_dropped") or 0 for p in s["processes"])
    if dropped:
        w(f"INCOMPLETE: {dropped} records were dropped (the tracer's cap, ARCHBENCH_TRACE_MAX_RECORDS, or CUPTI's "
          "buffers): the counts, busy time and gaps below cover only what was recorded\n")
    lost = sum(p.get("samples_dropped") or 0 for p in s["processes"])
    if lost:
        w(f"note: {lost} host samples were dropped: the call paths below are a sample of a sample\n")
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
            if g["host"].get("parked"):
                w(f"      parked meanwhile: {g['host']['parked'][0]['path']}\n")
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
    if gi.get("parked_samples"):
        w(f"  parked threads, waiting on their own (not counted above): {gi['parked_samples']} samples, "
          f"{ms(gi['parked_ns'])}\n")
        for r in gi["parked"][:3]:
            w(f"    {r['samples']} samples: {r['path']}\n")
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


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"
