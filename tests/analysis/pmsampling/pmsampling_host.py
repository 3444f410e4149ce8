#!/usr/bin/env python3
"""libarchbench_pmsampling without a GPU (ctest analysis/pmsampling/pmsampling_host): mock_device.cpp,
the library's source with the device side faked and the Profiler Host API real, run as a CUDA program would be.

  - the first run searches GH100's counters (plain and the TriageCompute collection) and takes the
    one-pass set the host API allows (the IPC pair, predicated-on thread instructions, issued
    instructions), says that no stall reason can be sampled in one pass and what is approximated,
    and caches the set with its config image;
  - the second run starts from the cache without a host object (built on a thread of its own:
    a `host` record), so its first launch waits less than the first run's did;
  - with ARCHBENCH_PM_WAIT_S=0 the first launch does not wait: a `wait` record of 0 ns marked
    no_wait, and the run is sampled from the start on;
  - by default (early) the sampling starts before the program's context where the process sees one
    device, and on the first context's device where it sees two (the config record says why);
  - ARCHBENCH_PM_START=launch and sync start at the first launch; every run's samples carry the
    known fractions (retire 0.375, divergence 0.175, stall 0.45) and its records the library's
    times (setup, wait, exit);
  - archbench_topdown.py --timeline --report reads the file and takes the overhead apart;
  - the command's default, --start before: the mock as archbench_pmsampler samples from its own
    process, started before the program (the mock with ARCHBENCH_PM_START=outside: launches and no
    sampling of its own); the report keeps the samples within the program's run, finds the known
    fractions and the program's launches, and names the sampler's costs; a sampler that sees two
    devices (and no --device) stops at once, and the command samples inside the program instead, said.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(mock, out, cache, *args, start=None, wait=None, env_extra=None):
    env = dict(os.environ, ARCHBENCH_PM_OUT=out, ARCHBENCH_PM_CACHE=cache, ARCHBENCH_PM_LOCK_DIR=os.path.dirname(cache),
               **(env_extra or {}))
    env.pop("ARCHBENCH_PM_WAIT_S", None)
    if wait is not None:  # "0": the launches do not wait (archbench_topdown.py --timeline --no-wait)
        env["ARCHBENCH_PM_WAIT_S"] = wait
    if start:
        env["ARCHBENCH_PM_START"] = start
    p = subprocess.run([mock, *args], env=env, capture_output=True, text=True, timeout=120)
    recs = {}
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            recs.setdefault(r["type"], []).append(r)
    return p, recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mock", required=True)
    ap.add_argument("--tool", required=True)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="pmsampling-host-")
    cache = os.path.join(d, "pm.cache")
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)
        return ok

    def common(name, p, recs, trigger):
        expect(p.returncode == 0, f"{name}: the program exited with {p.returncode}: {p.stderr}")
        cfg, end, wait = recs.get("config", [{}])[0], recs.get("end", [{}])[0], recs.get("wait", [{}])[0]
        expect(end.get("sampling") == "sampled", f"{name}: end record {end}")
        if wait or not trigger.startswith("library loaded"):  # an early start can be running before the first launch
            expect(wait.get("trigger") == trigger and wait.get("sampling") is True, f"{name}: wait record {wait}")
        samples = recs.get("sample", [])
        expect(len(samples) >= 3, f"{name}: {len(samples)} samples")
        for s in samples:
            l1 = s["level1"]
            if not all(abs(l1.get(k, -1) - v) < 1e-6 for k, v in (("retire", 0.375), ("divergence", 0.175),
                                                                    ("stall", 0.45))):
                expect(False, f"{name}: sample {s}")
                break
        keys = ("enable_ns", "set_config_ns", "start_ns") + (() if trigger.endswith("(sync)") else ("cu_init_ns",))
        for key in keys:
            expect(key in cfg.get("setup", {}), f"{name}: no {key} in the config's setup {cfg.get('setup')}")
        expect(all(k in end.get("exit", {}) for k in ("stop_ns", "final_decode_ns", "total_ns")),
               f"{name}: end record's exit {end.get('exit')}")
        print(f"{name}: selection {cfg.get('selection')}; the first launch waited {wait.get('waited_ns', 0) / 1e6:.1f} ms;"
              f" setup {cfg.get('setup')}; exit {end.get('exit')}")
        return cfg, end, wait

    # 1. The search, cached.
    p, recs = run(a.mock, os.path.join(d, "1.jsonl"), cache, "50", start="context")
    cfg, _, wait1 = common("search", p, recs, "context created")
    expect(cfg.get("selection", "").startswith("search"), f"search: selection {cfg.get('selection')}")
    expect(cfg.get("metrics") == ["sm__cycles_active.sum", "sm__inst_executed.sum",
                                  "sm__thread_inst_executed_pred_on_realtime.sum", "sm__inst_issued.sum"],
           f"search: metrics {cfg.get('metrics')}")
    expect(cfg.get("level1") == ["retire", "divergence", "stall"], f"search: level1 {cfg.get('level1')}")
    expect(any("no stall reason can be sampled in one pass on GH100" in n for n in cfg.get("notes", [])),
           f"search: notes {cfg.get('notes')}")
    expect(any("predicated-on" in n for n in cfg.get("approximations", [])),
           f"search: approximations {cfg.get('approximations')}")
    expect(any(c.get("collection") == "TriageCompute" for c in cfg.get("search", [])),
           f"search: the TriageCompute collection was not tried: {cfg.get('search')}")
    with open(cache) as f:
        expect(any(line.startswith("config ") for line in f), "the cache has no config image")
    # 2. From the cache: no host object needed to start.
    p, recs = run(a.mock, os.path.join(d, "2.jsonl"), cache, "50", start="context")
    cfg, _, wait2 = common("cache", p, recs, "context created")
    expect("(config image too)" in cfg.get("selection", ""), f"cache: selection {cfg.get('selection')}")
    host = recs.get("host", [{}])[0]
    expect("since_start_ns" in host and not host.get("error"), f"cache: host record {host}")
    expect(wait2.get("waited_ns", 1e18) < wait1.get("waited_ns", 0),
           f"cache: the first launch waited {wait2.get('waited_ns')} ns, no less than the search's "
           f"{wait1.get('waited_ns')}")
    # 3, 4. Started at the first launch.
    p, recs = run(a.mock, os.path.join(d, "3.jsonl"), cache, "20", "nocontext", start="launch")
    common("launch", p, recs, "first launch")
    p, recs = run(a.mock, os.path.join(d, "4.jsonl"), cache, "20", "nocontext", start="sync")
    cfg, _, _ = common("sync", p, recs, "first launch (sync)")
    expect(cfg.get("start", "").startswith("sync"), f"sync: start {cfg.get('start')}")
    # 5. --no-wait: the launches do not wait for the start.
    p, recs = run(a.mock, os.path.join(d, "5.jsonl"), cache, "50", start="context", wait="0")
    wait5, end5 = recs.get("wait", [{}])[0], recs.get("end", [{}])[0]
    expect(p.returncode == 0, f"no wait: the program exited with {p.returncode}: {p.stderr}")
    expect(wait5.get("no_wait") is True and wait5.get("waited_ns") == 0, f"no wait: wait record {wait5}")
    expect(end5.get("sampling") == "sampled" and len(recs.get("sample", [])) >= 1,
           f"no wait: end record {end5}, {len(recs.get('sample', []))} samples")
    # 6. The default, early: one device, so the sampling starts before the program's context.
    p, recs = run(a.mock, os.path.join(d, "6.jsonl"), cache, "20", env_extra={"FAKE_CONTEXT_AFTER_START": "1"})
    cfg, _, _ = common("early", p, recs, "library loaded (one device)")
    expect(cfg.get("start", "").startswith("early (one device"), f"early: start {cfg.get('start')}")
    # 7. Two devices: the first context's is sampled, as with start=context, and the record says why.
    p, recs = run(a.mock, os.path.join(d, "7.jsonl"), cache, "50", env_extra={"FAKE_DEVICES": "2"})
    cfg, _, _ = common("early, two devices", p, recs, "context created")
    expect(cfg.get("start", "").startswith("context (not ahead: 2 devices"), f"two devices: start {cfg.get('start')}")
    # The command on the second run's file.
    j = os.path.join(d, "2.json")
    p = subprocess.run([sys.executable, a.tool, "--timeline", "--report", os.path.join(d, "2.jsonl"), "--json", j],
                       capture_output=True, text=True)
    print(p.stdout, p.stderr, sep="\n")
    expect(p.returncode == 0, f"--report exited with {p.returncode}")
    if expect(os.path.exists(j), "--report wrote no JSON"):
        with open(j) as f:
            doc = json.load(f)
        costs = doc["context"].get("costs", {})
        for k in ("injection_init_s", "first_launch_wait_s", "setup_s", "host_object_s", "exit_s", "decode_s"):
            expect(k in costs, f"--report: no {k} in the costs {costs}")
        expect(abs(doc["total"]["stall"] - 0.45) < 1e-6, f"--report: the run's stall {doc['total']}")
    expect("the first launch waited" in p.stdout, "--report: the library's times are not printed")
    # 8. The program's side alone (ARCHBENCH_PM_START=outside): launches recorded, nothing sampled.
    p, recs = run(a.mock, os.path.join(d, "8.jsonl"), cache, "20", "nocontext", start="outside")
    end8 = recs.get("end", [{}])[0]
    expect(p.returncode == 0 and not recs.get("config") and not recs.get("sample") and len(recs.get("launch", [])) == 3
           and end8.get("sampling", "").startswith("outside"),
           f"outside: rc {p.returncode}, {len(recs.get('launch', []))} launches, end {end8}: {p.stderr}")
    # 9. The command's default: the sampler's own process, then the program.
    def timeline(name, extra_env, *program):
        raw, j = os.path.join(d, name + ".jsonl"), os.path.join(d, name + ".json")
        env = dict(os.environ, ARCHBENCH_PM_SAMPLER=f"{a.mock} sampler", ARCHBENCH_PM_CACHE=cache,
                   ARCHBENCH_PM_LOCK_DIR=d, **extra_env)
        p = subprocess.run([sys.executable, a.tool, "--timeline", "--no-native", "--lib", a.mock, "--raw", raw,
                            "--json", j, "--", a.mock, *program], env=env, capture_output=True, text=True, timeout=120)
        print(p.stdout, p.stderr, sep="\n")
        doc = json.load(open(j)) if os.path.exists(j) else {}
        return p, doc, doc.get("context", {})
    p, doc, c = timeline("9", {}, "200", "nocontext")
    expect(p.returncode == 0, f"before: the command exited with {p.returncode}")
    expect(str(c.get("start", "")).startswith("before") and "start_fallback" not in c, f"before: start {c.get('start')}")
    expect(c.get("samples", 0) >= 1 and "sampler_ready_s" in c and "sampler_stop_s" in c,
           f"before: {c.get('samples')} samples, ready {c.get('sampler_ready_s')}, stop {c.get('sampler_stop_s')}")
    expect(c.get("launches") == 3 and c.get("program_exit") == 0, f"before: launches {c.get('launches')}, "
           f"exit {c.get('program_exit')}")
    total = doc.get("total") or {}
    expect(abs(total.get("retire", 0) - 0.375) < 1e-6 and abs(total.get("stall", 0) - 0.45) < 1e-6,
           f"before: the run's level 1 {total}")
    expect(all(s["end_s"] > 0 for s in doc.get("samples", [])), "before: a sample from before the program started was kept")
    expect("archbench_pmsampler took" in p.stdout and "decoding, in archbench_pmsampler's process" in p.stdout,
           "before: the sampler's costs are not printed")
    expect(not [f for f in os.listdir(d) if f.startswith("9.jsonl.sampler")], "before: the sampler's files were left")
    # 10. Two devices and no --device: the sampler stops, the program samples itself (context).
    p, doc, c = timeline("10", {"FAKE_DEVICES": "2"}, "50")
    expect(p.returncode == 0 and "2 devices" in c.get("start_fallback", ""),
           f"fallback: rc {p.returncode}, {c.get('start_fallback')}")
    expect(str(c.get("start", "")).startswith("context (not ahead: 2 devices") and c.get("samples", 0) >= 1,
           f"fallback: start {c.get('start')}, {c.get('samples')} samples")
    # 12. The sampler's decoding falls behind (a full image of records without time): it restarts
    # at ten times the interval, said, and the samples go on to the program's end.
    p, doc, c = timeline("12", {"FAKE_BEHIND": "3"}, "400", "nocontext")
    ch = (c.get("interval_changes") or [{}])[0]
    expect(p.returncode == 0 and ch.get("interval_ns") == 1000000 and not ch.get("error"),
           f"behind: rc {p.returncode}, interval changes {c.get('interval_changes')}")
    later = [x for x in doc.get("samples", []) if x["start_s"] > ch.get("at_s", 1e9)]
    expect(later and c.get("empty", 0) >= 64 and abs((doc.get("total") or {}).get("retire", 0) - 0.375) < 1e-6,
           f"behind: {len(later)} samples after the restart, {c.get('empty')} without time, total {doc.get('total')}")
    expect("restarted after" in p.stdout, "behind: the restart is not said")
    # 11. A second session on a GPU another one samples: refused by the lock before CUPTI is asked
    # (whose enable would stop the first one's samples), said, and the program runs on.
    holder = subprocess.Popen([a.mock, "sampler"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, ARCHBENCH_PM_OUT=os.path.join(d, "11h.jsonl"), ARCHBENCH_PM_CACHE=cache,
                                       ARCHBENCH_PM_LOCK_DIR=d, ARCHBENCH_PM_ROLE="sampler"))
    for _ in range(3000):  # until the holder samples (its config record)
        if os.path.exists(os.path.join(d, "11h.jsonl")) and '"type":"config"' in open(os.path.join(d, "11h.jsonl")).read():
            break
        import time
        time.sleep(0.01)
    p, recs = run(a.mock, os.path.join(d, "11.jsonl"), cache, "50")
    holder.stdin.close()
    holder.wait(60)
    errors = " ".join(e.get("reason", "") for e in recs.get("error", []))
    expect(p.returncode == 0 and "another archbench timeline samples this GPU (process " + str(holder.pid) in errors
           and not recs.get("sample"), f"locked: rc {p.returncode}, errors {errors!r}, {len(recs.get('sample', []))} samples")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK ({d})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
