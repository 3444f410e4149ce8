"""archbench_topdown.py --timeline (archbench.commands.timeline) on synthetic PM-sampling records:
the level-1 arithmetic, the clocks, the attribution of samples to kernels, the views and errors.
Host-only; the GPU run is a case of tests/analysis/topdown/topdown_gpu.py."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from unittest import mock

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
from archbench.analysis import timeline  # noqa: E402
from archbench.cli import InputError  # noqa: E402
from archbench.records import raw as raw_records  # noqa: E402
from archbench.render import charts, timeline as tl_render  # noqa: E402

TOOL = os.path.join(TOOLS, "archbench_topdown.py")
METRICS = ["sm__cycles_active.sum", "sm__inst_executed.sum", "smsp__thread_inst_executed.sum", "sm__inst_issued.sum",
           "smsp__warps_issue_stalled_long_scoreboard.sum", "smsp__warps_issue_stalled_barrier.sum"]
ROLES = {"sm__cycles_active.sum": "cycles", "sm__inst_executed.sum": "executed",
         "smsp__thread_inst_executed.sum": "thread", "sm__inst_issued.sum": "issued",
         "smsp__warps_issue_stalled_long_scoreboard.sum": "stall_long_scoreboard",
         "smsp__warps_issue_stalled_barrier.sum": "stall_barrier"}
CLASSES = {"long_scoreboard": "memory", "barrier": "fetch"}
START, MONO, CUPTI = 1_000_000_000, 1_500_000_000, 1_700_000_000_000_000_000
US = 1000

# Sample 0: IPC 2, warp efficiency 0.75, issued IPC 2.2, stalls 3:1 memory:fetch. By the formulas:
# retire 2*0.75/4, divergence (2*0.25 + 0.2)/4, stall (4 - 2 - 0.2)/4 split 1:3 frontend:backend.
S0 = [1000, 2000, 2000 * 32 * 0.75, 2200, 300, 100]
L0 = {"retire": 0.375, "divergence": 0.175, "frontend": 0.1125, "backend": 0.3375}
S1 = [0, 0, 0, 0, 0, 0]  # idle
S2 = [1000, 4000, 4000 * 32, 4000, 0, 0]  # IPC_MAX reached: all retire
L2 = {"retire": 1.0, "divergence": 0.0, "frontend": 0.0, "backend": 0.0}


def config(metrics=METRICS, roles=ROLES, quantities=("retire", "divergence", "frontend", "backend")):
    return {"type": "config", "chip": "GH100", "device": 0, "device_name": "NVIDIA H100 80GB HBM3",
            "pci_bus_id": "00000000:00:06.0", "interval_ns": 100 * US, "trigger": "gpu time", "decode_ms": 20,
            "hw_buffer_bytes": 64 << 20, "max_samples": 1600, "passes": 1, "metrics": list(metrics),
            "roles": roles, "stall_class": CLASSES, "level1": list(quantities), "notes": ["a note"],
            "not_collected": {"smsp__warps_issue_stalled_wait.sum": "needs 2 passes with the others"},
            "selection": "search", "setup_ns": 250_000_000, "start_ns": MONO}


def sample(i, values, level1=None):
    t = CUPTI + 10 * US + i * 100 * US
    return {"type": "sample", "i": i, "start": t, "end": t + 100 * US, "values": values, "level1": level1}


def records(kernels=True, end=True):
    recs = [{"type": "process", "pid": 7, "command": "./prog arg", "start_ns": START, "date": "2026-11-30T10:00:00Z"},
            {"type": "base_metrics", "chip": "GH100", "metrics": ["sm__cycles_active"]},
            {"type": "clock", "when": "start", "mono_ns": MONO, "cupti_ns": CUPTI, "realtime_ns": CUPTI + 30 * 10 ** 9},
            config(), sample(0, S0, L0), sample(1, S1), sample(2, S2, L2),
            {"type": "name", "id": 0, "name": "a(float*)", "mangled": "_Z1aPf"},
            {"type": "name", "id": 1, "name": "b()", "mangled": "_Z1bv"},
            {"type": "launch", "host_ns": MONO + 5 * US, "correlation": 1, "name": 0},
            {"type": "launch", "host_ns": MONO + 6 * US, "correlation": 2, "name": 1}]
    if kernels:  # a covers sample 0; b the second half of sample 2
        recs += [{"type": "kernel", "name": "a(float*)", "start": CUPTI + 10 * US, "end": CUPTI + 110 * US,
                  "correlation": 1, "stream": 7, "device": 0, "grid": [1, 1, 1], "block": [32, 1, 1]},
                 {"type": "kernel", "name": "b()", "start": CUPTI + 260 * US, "end": CUPTI + 310 * US,
                  "correlation": 2, "stream": 7, "device": 0, "grid": [1, 1, 1], "block": [32, 1, 1]}]
    if end:
        recs.append({"type": "end", "why": "exit", "samples": 3, "idle": 1, "lost": 0, "overflow": False})
    return recs


def write(recs):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "raw.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(r) for r in recs) + "\n")
    return d, path


class Arithmetic(unittest.TestCase):
    def test_level1_of_known_counters(self):
        q = ["retire", "divergence", "frontend", "backend"]
        for values, want in ((S0, L0), (S2, L2)):
            got = timeline.level1(timeline.counters_of(values, METRICS, ROLES), q, CLASSES)
            for k, v in want.items():
                self.assertAlmostEqual(got[k], v, msg=k)
            self.assertAlmostEqual(sum(got[k] for k in q), 1.0)
        self.assertIsNone(timeline.level1(timeline.counters_of(S1, METRICS, ROLES), q, CLASSES))

    def test_what_is_not_collected_counts_as_nothing_lost(self):
        # Only the IPC pair: retire = IPC / IPC_MAX (every lane active, no replay), the rest stall.
        got = timeline.level1({"cycles": 1000.0, "executed": 1000.0}, ["retire", "stall"], {})
        self.assertEqual(set(got), {"retire", "stall", "ipc"})
        self.assertAlmostEqual(got["retire"], 0.25)
        self.assertAlmostEqual(got["stall"], 0.75)
        # Stall reasons collected but none counted in this sample: the stall is backend (as topdown.cpp).
        got = timeline.level1({"cycles": 1000.0, "executed": 1000.0, "stall_barrier": 0.0},
                              ["retire", "frontend", "backend"], CLASSES)
        self.assertAlmostEqual(got["backend"], 0.75)
        self.assertAlmostEqual(got["frontend"], 0.0)

    def test_some_stall_reasons_with_the_active_warps(self):
        # IPC 2, warp efficiency 0.75, issued IPC 2.2 (sample 0): stall 0.45 of IPC_MAX. 20000 active
        # warp-cycles less 2200 issued leave 17800 without an issue: barrier (fetch) holds 3000 of them,
        # long_scoreboard (memory) 9000; the rest of the stall is stall_other (the library's arithmetic,
        # inject.cpp level1, gives the same).
        c = {"cycles": 1000.0, "executed": 2000.0, "thread": 48000.0, "issued": 2200.0, "warps": 20000.0,
             "stall_long_scoreboard": 9000.0, "stall_barrier": 3000.0}
        q = ["retire", "divergence", "frontend", "backend", "stall_other"]
        got = timeline.level1(c, q, CLASSES)
        self.assertAlmostEqual(got["frontend"], 0.45 * 3000 / 17800)
        self.assertAlmostEqual(got["backend"], 0.45 * 9000 / 17800)
        self.assertAlmostEqual(got["stall_other"], 0.45 * 5800 / 17800)
        self.assertAlmostEqual(sum(got[k] for k in q), 1.0)
        # More counted than the warps' idle cycles (sampling skew): the counted reasons share the stall.
        got = timeline.level1(dict(c, warps=4000.0), q, CLASSES)
        self.assertAlmostEqual(got["frontend"], 0.45 * 3000 / 12000)
        self.assertAlmostEqual(got["backend"], 0.45 * 9000 / 12000)
        self.assertAlmostEqual(got["stall_other"], 0.0)
        # No active warps counted: nothing can be shared out.
        got = timeline.level1(dict(c, warps=0.0), ["retire", "divergence", "backend", "stall_other"], CLASSES)
        self.assertAlmostEqual(got["stall_other"], 0.45)

    def test_unclassified_reasons_stay_out_of_the_split(self):
        c = {"cycles": 1000.0, "executed": 2000.0, "stall_barrier": 100.0, "stall_new_reason": 900.0}
        got = timeline.level1(c, ["retire", "frontend", "backend"], {"barrier": "fetch", "new_reason": "unclassified"})
        self.assertAlmostEqual(got["frontend"], 0.5)
        self.assertAlmostEqual(got["backend"], 0.0)


class Analysis(unittest.TestCase):
    def test_run_kernels_and_samples(self):
        _, path = write(records())
        res = timeline.analyse(raw_records.load_pm(path))
        c = res["context"]
        self.assertEqual((c["samples"], c["active_samples"]), (3, 2))
        self.assertEqual(c["sample_clock"], "CUPTI timestamps")
        # On the process's time axis: the clock record says CUPTI's time CUPTI is 0.5 s after its start.
        self.assertAlmostEqual(res["samples"][0]["start_s"], 0.5 + 10e-6)
        self.assertAlmostEqual(res["samples"][2]["end_s"], 0.5 + 310e-6)
        for s in res["samples"]:  # the library's per-sample fractions are the tool's
            for k, v in (s["recorded"] or {}).items():
                self.assertAlmostEqual(s["level1"][k], v, msg=k)
        k = {r["kernel"]: r for r in res["kernels"]}
        for name, want in (("a(float*)", L0), ("b()", L2)):
            for q, v in want.items():
                self.assertAlmostEqual(k[name][q], v, msg=f"{name} {q}")
        self.assertAlmostEqual(k["b()"]["samples"], 0.5)
        self.assertAlmostEqual(k["a(float*)"]["gpu_time_s"], 100e-6)
        self.assertAlmostEqual(k["a(float*)"]["time_share"], 2 / 3)
        # The run: samples 0 and 2 summed (IPC 3, warp efficiency 176000 / 192000, issued IPC 3.1).
        t = res["total"]
        self.assertAlmostEqual(t["retire"], 3 * (176000 / 192000) / 4)
        self.assertAlmostEqual(t["divergence"], (3 * (1 - 176000 / 192000) + 0.1) / 4)
        self.assertAlmostEqual(t["frontend"], 0.225 / 4)
        self.assertAlmostEqual(t["backend"], 0.225 * 3 / 4)
        self.assertAlmostEqual(sum(t[q] for q in res["quantities"]), 1.0)
        self.assertEqual([(i["kernel"], i["invocation"]) for i in res["invocations"]], [("a(float*)", 0), ("b()", 0)])
        self.assertEqual(res["kernel_source"], "CUPTI kernel records (GPU time)")

    def test_stall_split_from_a_kernel_replay(self):
        # The run measured no stall reason: stall only. The kernel-replay file says a's stall is 1/4
        # frontend; b is not in it, so b's stall (sample 2: IPC 2, no divergence) stays stall.
        m = METRICS[:4]
        recs = records()
        recs[3] = config(metrics=m, roles={k: ROLES[k] for k in m}, quantities=("retire", "divergence", "stall"))
        recs[4], recs[6] = sample(0, S0[:4]), sample(2, [1000, 2000, 2000 * 32, 2000])
        res = timeline.analyse(raw_records.load_pm(write(recs)[1]))
        self.assertEqual(res["quantities"], ["retire", "divergence", "stall"])
        stall_a = res["kernels"][[k["kernel"] for k in res["kernels"]].index("a(float*)")]["stall"]
        self.assertAlmostEqual(stall_a, 0.45)
        d = tempfile.mkdtemp()
        path = os.path.join(d, "td.json")
        with open(path, "w") as f:
            json.dump({"kernels": [{"kernel": "a(float*)", "frontend": 0.1, "backend": 0.3},
                                   {"kernel": "zzz()", "frontend": 0.0, "backend": 0.0}]}, f)
        split = raw_records.stall_split_of(path)
        self.assertEqual(split, {"a(float*)": 0.25})
        self.assertTrue(timeline.apply_stall_split(res, split, path))
        self.assertEqual(res["quantities"], ["retire", "divergence", "frontend", "backend", "stall"])
        self.assertEqual(res["measured_quantities"], ["retire", "divergence", "stall"])
        k = {r["kernel"]: r for r in res["kernels"]}
        self.assertAlmostEqual(k["a(float*)"]["frontend"], 0.45 / 4)
        self.assertAlmostEqual(k["a(float*)"]["backend"], 0.45 * 3 / 4)
        self.assertAlmostEqual(k["a(float*)"]["stall"], 0.0)
        self.assertNotIn("frontend", k["b()"])
        self.assertAlmostEqual(k["b()"]["stall"], 0.5)
        s0 = res["samples"][0]["level1"]  # all of sample 0 is a's
        self.assertAlmostEqual(s0["frontend"], 0.45 / 4)
        self.assertAlmostEqual(s0["stall"], 0.0)
        self.assertAlmostEqual(res["samples"][2]["level1"]["stall"], 0.5)
        for smp in res["samples"]:
            if smp["level1"]:
                self.assertAlmostEqual(sum(smp["level1"][q] for q in res["quantities"]), 1.0)
        # The run: stall 0.475 of IPC_MAX, shared as the samples' parts weighted by their cycles:
        # sample 0 frontend 0.1125, backend 0.3375; sample 2 stall 0.5.
        t = res["total"]
        self.assertAlmostEqual(sum(t[q] for q in res["quantities"]), 1.0)
        self.assertAlmostEqual(t["frontend"], 0.475 * 112.5 / 950)
        self.assertAlmostEqual(t["backend"], 0.475 * 337.5 / 950)
        self.assertAlmostEqual(t["stall"], 0.475 * 500 / 950)
        self.assertIn("kernel-replay TopDown", res["context"]["stall_split"]["approximation"])
        self.assertEqual(res["context"]["stall_split"]["kernels"], {"a(float*)": 0.25})
        self.assertIn("approximated: frontend and backend", tl_render.text_report(res))
        drawn = tl_render.chart_samples(res, limit=2)  # merged: the split parts weighted by cycles
        self.assertAlmostEqual(sum(drawn[0]["level1"][q] for q in res["quantities"]), 1.0)
        # Where the run measured frontend and backend itself, nothing is shared out.
        res = timeline.analyse(raw_records.load_pm(write(records())[1]))
        self.assertFalse(timeline.apply_stall_split(res, split, path))
        with self.assertRaises(InputError):
            raw_records.stall_split_of(os.path.join(d, "missing.json"))

    def test_the_library_costs(self):
        recs = records()
        recs[3] = dict(config(), setup_ns=300_000_000, start="context (context created)",
                       setup={"cu_init_ns": 5_000_000, "profiler_init_ns": 1_000_000, "host_init_ns": 250_000_000,
                              "enable_ns": 40_000_000, "waited_for_context_ns": 90_000_000})
        recs.insert(1, {"type": "injection", "start": "context", "init_ns": 2_000_000})
        recs.append({"type": "wait", "waited_ns": 60_000_000, "trigger": "context created", "host_ns": MONO})
        recs.append({"type": "host", "times": {"init_ns": 200_000_000}, "since_start_ns": 210_000_000,
                     "ready_ns": MONO})
        e = next(i for i, r in enumerate(recs) if r["type"] == "end")
        recs[e] = dict(recs[e], first_launch_wait_ns=60_000_000, end_ns=START + 900_000_000,
                        decodes=7, decode={"total_ns": 30_000_000, "max_ns": 8_000_000, "set_aside": 40},
                        exit={"join_ns": 1_000_000, "stop_ns": 2_000_000, "final_decode_ns": 10_000_000,
                              "flush_ns": 3_000_000, "total_ns": 16_000_000})
        res = timeline.analyse(raw_records.load_pm(write(recs)[1]))
        k = res["context"]["costs"]
        self.assertAlmostEqual(k["injection_init_s"], 0.002)
        self.assertAlmostEqual(k["first_launch_wait_s"], 0.06)
        self.assertAlmostEqual(k["setup_s"], 0.3)
        self.assertAlmostEqual(k["setup_parts_s"]["host_init"], 0.25)
        self.assertAlmostEqual(k["exit_s"], 0.016)
        self.assertAlmostEqual(k["exit_parts_s"]["final_decode"], 0.01)
        self.assertAlmostEqual(k["decode_s"], 0.03)
        self.assertAlmostEqual(k["library_span_s"], 0.9)
        c = dict(res["context"], native_s=0.5, sampled_s=0.65, spawn_ns=START - 100_000_000,
                 exit_ns=START + 950_000_000, process_start_ns=START, end_ns=START + 900_000_000)
        text = "\n".join(tl_render.cost_lines(c))
        self.assertIn("overhead: +0.150 s over the native run", text)
        self.assertIn("0.100 s from the start until the program's cuInit loaded the library", text)
        self.assertIn("0.060 s the first launch waited for the sampling to start (context (context created))", text)
        self.assertIn("host_init 0.250", text)
        self.assertIn("0.016 s at the end: join 0.001, stop 0.002, final_decode 0.010, flush 0.003", text)
        self.assertIn("0.050 s from the end record until the program had exited", text)
        self.assertIn("0.030 s decoding on the library's thread (7 decodes, the longest 8.0 ms)", text)
        self.assertIn("0.210 s building the host object that evaluates the samples", text)
        self.assertIn("40 samples decoded before it was there waited for it", text)

    def test_kernels_before_the_start_are_counted_unsampled(self):
        recs = records()
        recs.append({"type": "kernel", "name": "early()", "start": CUPTI - 90 * US, "end": CUPTI - 30 * US,
                     "correlation": 3, "stream": 7, "device": 0, "grid": [1, 1, 1], "block": [32, 1, 1]})
        # CUPTI's first sample reaches back before the start, its counters 0: the start record decides.
        recs.append(dict(sample(0, [0] * len(S0)), i=-1, start=CUPTI - 400 * US, end=CUPTI + 10 * US))
        _, path = write(recs)
        res = timeline.analyse(raw_records.load_pm(path))
        b = res["context"]["before_sampling"]
        self.assertEqual(b["launches"], 1)
        self.assertAlmostEqual(b["gpu_time_s"], 60e-6)
        self.assertAlmostEqual(b["gpu_share"], 60 / 210)
        self.assertIn("1 launches (0.060 ms, 28.6% of the kernels' GPU time) ran unsampled", tl_render.text_report(res))
        _, path = write(records())
        self.assertEqual(timeline.analyse(raw_records.load_pm(path))["context"]["before_sampling"]["launches"], 0)
        # A program that ended before the sampling started: its kernels, and what to do.
        _, path = write([r for r in records() if r["type"] not in ("config", "sample")])
        text = tl_render.text_report(timeline.analyse(raw_records.load_pm(path)))
        self.assertIn("the program's 2 kernels (0.150 ms) ran, and it exited, before the sampling had started", text)
        self.assertIn("without --no-wait the first launch waits", text)

    def test_launches_only(self):
        _, path = write(records(kernels=False))
        res = timeline.analyse(raw_records.load_pm(path))
        self.assertEqual(res["kernel_source"], "launches only (host time)")
        self.assertEqual([(k["kernel"], k["launches"]) for k in res["kernels"]], [("a(float*)", 1), ("b()", 1)])
        self.assertNotIn("retire", res["kernels"][0])
        self.assertAlmostEqual(res["launches"][0]["t_s"], 0.5 + 5e-6)

    def test_clocks(self):
        recs = raw_records.load_pm(write(records())[1])
        clock = recs["clock"][0]
        self.assertEqual(timeline.sample_clock(recs, clock["realtime_ns"] + 5 * US),
                         (MONO - clock["realtime_ns"], "host real time"))
        off, how = timeline.sample_clock(recs, 42 * 10 ** 9)  # a clock of its own: the first sample ends as sampling starts
        self.assertEqual(off, MONO - 42 * 10 ** 9)
        self.assertIn("aligned at the start", how)

    def test_first_sample_reaching_back_a_second(self):
        # After an uncached search CUPTI's first sample began 1.1 s before the start (H100): its end,
        # not its start, names the clock, and the samples stay on the program's time axis.
        recs = records()
        recs[4] = dict(sample(0, S0, L0), start=CUPTI - 1_100_000_000)
        res = timeline.analyse(raw_records.load_pm(write(recs)[1]))
        self.assertEqual(res["context"]["sample_clock"], "CUPTI timestamps")
        self.assertAlmostEqual(res["samples"][2]["end_s"], 0.5 + 310e-6)

    def test_chart_merges_samples_beyond_its_limit(self):
        res = timeline.analyse(raw_records.load_pm(write(records())[1]))
        drawn = tl_render.chart_samples(res, limit=2)  # samples 0 and 1 (idle) merged; sample 2 alone
        self.assertEqual(len(drawn), 2)
        self.assertAlmostEqual(drawn[0]["end_s"], res["samples"][1]["end_s"])
        for (got, want) in ((drawn[0], L0), (drawn[1], L2)):
            for k, v in want.items():
                self.assertAlmostEqual(got["level1"][k], v, msg=k)
        self.assertIs(tl_render.chart_samples(res), res["samples"])

    def test_sampled_from_a_process_of_its_own(self):
        # --start before: archbench_pmsampler's records (role sampler) after the program's, and the
        # command's exit record. The sampler started 0.5 s before the program and sampled once before
        # it and once after its end: those two are left out, the rest is analysed as before.
        recs = records(end=False)
        prog = [r for r in recs if r["type"] in ("process", "name", "launch", "kernel")]
        prog += [{"type": "clock", "when": "program", "mono_ns": MONO, "cupti_ns": CUPTI, "realtime_ns": CUPTI},
                 {"type": "end", "why": "exit", "sampling": "outside", "end_ns": MONO + 400 * US,
                  "exit": {"flush_ns": 2000, "total_ns": 2000}, "decode": {"total_ns": 0}}]
        samp = [dict(recs[0], role="sampler", start_ns=START - 500_000_000),
                dict(recs[2], role="sampler")] + [r for r in recs if r["type"] in ("base_metrics", "config", "sample")]
        samp += [sample(-6000, S2), sample(10, S2),
                 {"type": "end", "why": "exit", "role": "sampler", "samples": 5, "lost": 0, "overflow": False,
                  "decodes": 4, "decode": {"total_ns": 7_000_000, "max_ns": 3_000_000},
                  "exit": {"final_decode_ns": 1_000_000, "total_ns": 2_000_000}}]
        ext = {"type": "exit", "status": 3, "start_ns": START - 1000, "end_ns": MONO + 500 * US, "command": "./prog"}
        res = timeline.analyse(raw_records.load_pm(write(prog + samp + [ext])[1]))
        c = res["context"]
        self.assertTrue(c["start"].startswith("before"), c["start"])
        self.assertEqual((c["samples"], c["samples_outside_program"], c["program_exit"]), (3, 2, 3))
        self.assertAlmostEqual(res["samples"][0]["start_s"], 0.5 + 10e-6)  # the program's time axis
        k = {r["kernel"]: r for r in res["kernels"]}
        for name, want in (("a(float*)", L0), ("b()", L2)):
            for q, v in want.items():
                self.assertAlmostEqual(k[name][q], v, msg=f"{name} {q}")
        # The samples cover 300 of the 390 us from the first one to the program's end: said.
        self.assertAlmostEqual(c["coverage"]["share"], 300 / 390)
        self.assertIn("warning: the samples cover 0.000 s of the 0.000 s", tl_render.text_report(res))
        self.assertNotIn("--interval-us 1000", tl_render.text_report(res))  # no record without time here
        costs = c["costs"]
        self.assertAlmostEqual(costs["decode_s"], 0.007)  # the sampler's decoding, its exit apart
        self.assertAlmostEqual(costs["sampler_exit_s"], 0.002)
        self.assertAlmostEqual(costs["exit_s"], 0.000002)
        lines = "\n".join(tl_render.cost_lines(dict(c, sampler_ready_s=0.3, sampler_stop_s=0.1)))
        self.assertIn("archbench_pmsampler took to start sampling", lines)
        self.assertIn("2 samples from before the program started or after it ended left out", lines)
        self.assertNotIn("first launch waited", lines)

    def test_not_sampled(self):
        recs = [records()[0], {"type": "error", "reason": "cuptiPmSamplingEnable: insufficient privileges"}]
        res = timeline.analyse(raw_records.load_pm(write(recs)[1]))
        self.assertIn("insufficient privileges", tl_render.text_report(res))


class Command(unittest.TestCase):
    def run_tool(self, recs, *args, env=None):
        d, path = write(recs)
        out = os.path.join(d, "out.json")
        p = subprocess.run([sys.executable, os.path.abspath(TOOL), "--timeline", "--report", path, "--json", out, *args],
                           capture_output=True, text=True, env=dict(os.environ, **(env or {})), cwd=d)
        if not os.path.exists(out):
            return d, p, None
        with open(out) as f:
            return d, p, json.load(f)

    def test_report_json_and_plain_svg_chart(self):
        d, p, j = self.run_tool(records(), "--by-invocation", "-o", "chart.svg", env={charts.FORCE_ENV: "svg"})
        self.assertEqual(p.returncode, 0, p.stderr)
        ET.parse(os.path.join(d, "chart.svg"))
        self.assertIn("sampling interval 100 us", p.stdout)
        self.assertIn("3 samples", p.stdout)
        self.assertIn("RUN (every sample)", p.stdout)
        self.assertIn("b #0", p.stdout)  # short names in the tables
        self.assertIn("not in the pass: smsp__warps_issue_stalled_wait.sum", p.stdout)
        self.assertEqual(j["quantities"], ["retire", "divergence", "frontend", "backend"])
        self.assertEqual(len(j["samples"]), 3)
        self.assertTrue(j["samples"][1]["idle"])
        self.assertAlmostEqual(j["samples"][0]["backend"], 0.3375)
        self.assertEqual(j["context"]["chip"], "GH100")
        self.assertEqual(p.stderr, "")

    def test_charts(self):
        with tempfile.TemporaryDirectory() as d:
            res = timeline.analyse(raw_records.load_pm(write(records())[1]))
            with mock.patch.dict(os.environ, {charts.FORCE_ENV: "svg"}):
                self.assertIsNone(tl_render.write_chart(os.path.join(d, "c.svg"), res))
            root = ET.parse(os.path.join(d, "c.svg")).getroot()
            self.assertEqual(len(root.findall(".//{http://www.w3.org/2000/svg}polygon")), 5)  # 4 parts + idle
            if charts.pyplot()[0] is None:
                self.skipTest("matplotlib is not importable")
            self.assertIsNone(tl_render.write_chart(os.path.join(d, "c.png"), res))
            with open(os.path.join(d, "c.png"), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            launches = timeline.analyse(raw_records.load_pm(write(records(kernels=False))[1]))
            self.assertIsNone(tl_render.write_chart(os.path.join(d, "l.svg"), launches))

    def test_stall_split_option(self):
        m = METRICS[:4]
        recs = records()
        recs[3] = config(metrics=m, roles={k: ROLES[k] for k in m}, quantities=("retire", "divergence", "stall"))
        recs[4], recs[6] = sample(0, S0[:4]), sample(2, S2[:4])
        d = tempfile.mkdtemp()
        split = os.path.join(d, "td.json")
        with open(split, "w") as f:
            json.dump({"kernels": [{"kernel": "a(float*)", "frontend": 0.1, "backend": 0.3},
                                   {"kernel": "b()", "frontend": 0.0, "backend": 0.2}]}, f)
        _, p, j = self.run_tool(recs, "--stall-split", split, "--by-invocation")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(j["quantities"], ["retire", "divergence", "frontend", "backend"])
        self.assertEqual(j["measured_quantities"], ["retire", "divergence", "stall"])
        self.assertIn("approximated: frontend and backend: the stall this run measured", p.stdout)
        self.assertIn("level 1 from one pass: retire, divergence, stall", p.stdout)
        _, p, _ = self.run_tool(recs, "--stall-split", os.path.join(d, "none.json"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("--stall-split", p.stderr)

    def test_crashed_run_keeps_what_was_recorded(self):
        _, p, j = self.run_tool(records(end=False))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("without an end record", p.stdout)
        self.assertEqual(len(j["samples"]), 3)

    def test_malformed_file_is_an_error_with_its_line(self):
        recs = records()
        recs[4] = {"type": "sample", "i": 0, "start": "x"}
        _, p, _ = self.run_tool(recs)
        self.assertEqual(p.returncode, 2)
        self.assertIn("raw.jsonl:5", p.stderr)

    def test_program_exit_as_the_shell_saw_it(self):
        # No sampler beside the "library" (this file): sampled inside the program, said; a program
        # that makes no CUDA call is said to; its status, and a death by a signal, are the command's.
        env = dict(os.environ, ARCHBENCH_PM_LIB=TOOL)
        for prog, want in (("exit 3", 3), ("kill -SEGV $$", -11)):
            p = subprocess.run([sys.executable, TOOL, "--timeline", "--no-native", "--", "sh", "-c", prog],
                               capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, want, p.stderr)
            self.assertIn("no archbench_pmsampler beside", p.stderr)
            self.assertIn("made no CUDA call", p.stderr)

    def test_program_or_report(self):
        p = subprocess.run([sys.executable, TOOL, "--timeline"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        p = subprocess.run([sys.executable, TOOL, "--timeline", "--", "/no/such/program"], capture_output=True, text=True,
                           env=dict(os.environ, ARCHBENCH_PM_LIB=TOOL))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such program", p.stderr)


if __name__ == "__main__":
    unittest.main()
