"""archbench_topdown.py --timeline (tools/archbench/timeline.py) on synthetic PM-sampling records:
the level-1 arithmetic, the clocks, the attribution of samples to kernels, the views and errors.
Host-only; the GPU run is a case of tests/topdown/topdown_gpu.py."""
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
from archbench import charts, timeline  # noqa: E402

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

    def test_unclassified_reasons_stay_out_of_the_split(self):
        c = {"cycles": 1000.0, "executed": 2000.0, "stall_barrier": 100.0, "stall_new_reason": 900.0}
        got = timeline.level1(c, ["retire", "frontend", "backend"], {"barrier": "fetch", "new_reason": "unclassified"})
        self.assertAlmostEqual(got["frontend"], 0.5)
        self.assertAlmostEqual(got["backend"], 0.0)


class Analysis(unittest.TestCase):
    def test_run_kernels_and_samples(self):
        _, path = write(records())
        res = timeline.analyse(timeline.load(path))
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

    def test_launches_only(self):
        _, path = write(records(kernels=False))
        res = timeline.analyse(timeline.load(path))
        self.assertEqual(res["kernel_source"], "launches only (host time)")
        self.assertEqual([(k["kernel"], k["launches"]) for k in res["kernels"]], [("a(float*)", 1), ("b()", 1)])
        self.assertNotIn("retire", res["kernels"][0])
        self.assertAlmostEqual(res["launches"][0]["t_s"], 0.5 + 5e-6)

    def test_clocks(self):
        recs = timeline.load(write(records())[1])
        clock = recs["clock"][0]
        self.assertEqual(timeline.sample_clock(recs, clock["realtime_ns"] + 5 * US),
                         (MONO - clock["realtime_ns"], "host real time"))
        off, how = timeline.sample_clock(recs, 42 * 10 ** 9)  # a clock of its own: the first sample starts with sampling
        self.assertEqual(off, MONO - 42 * 10 ** 9)
        self.assertIn("aligned at the start", how)

    def test_chart_merges_samples_beyond_its_limit(self):
        res = timeline.analyse(timeline.load(write(records())[1]))
        drawn = timeline.chart_samples(res, limit=2)  # samples 0 and 1 (idle) merged; sample 2 alone
        self.assertEqual(len(drawn), 2)
        self.assertAlmostEqual(drawn[0]["end_s"], res["samples"][1]["end_s"])
        for (got, want) in ((drawn[0], L0), (drawn[1], L2)):
            for k, v in want.items():
                self.assertAlmostEqual(got["level1"][k], v, msg=k)
        self.assertIs(timeline.chart_samples(res), res["samples"])

    def test_not_sampled(self):
        recs = [records()[0], {"type": "error", "reason": "cuptiPmSamplingEnable: insufficient privileges"}]
        res = timeline.analyse(timeline.load(write(recs)[1]))
        self.assertIn("insufficient privileges", timeline.text_report(res))


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
        self.assertIn("b() #0", p.stdout)
        self.assertIn("not in the pass: smsp__warps_issue_stalled_wait.sum", p.stdout)
        self.assertEqual(j["quantities"], ["retire", "divergence", "frontend", "backend"])
        self.assertEqual(len(j["samples"]), 3)
        self.assertTrue(j["samples"][1]["idle"])
        self.assertAlmostEqual(j["samples"][0]["backend"], 0.3375)
        self.assertEqual(j["context"]["chip"], "GH100")
        self.assertEqual(p.stderr, "")

    def test_charts(self):
        with tempfile.TemporaryDirectory() as d:
            res = timeline.analyse(timeline.load(write(records())[1]))
            with mock.patch.dict(os.environ, {charts.FORCE_ENV: "svg"}):
                self.assertIsNone(timeline.write_chart(os.path.join(d, "c.svg"), res))
            root = ET.parse(os.path.join(d, "c.svg")).getroot()
            self.assertEqual(len(root.findall(".//{http://www.w3.org/2000/svg}polygon")), 5)  # 4 parts + idle
            if charts.pyplot()[0] is None:
                self.skipTest("matplotlib is not importable")
            self.assertIsNone(timeline.write_chart(os.path.join(d, "c.png"), res))
            with open(os.path.join(d, "c.png"), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            launches = timeline.analyse(timeline.load(write(records(kernels=False))[1]))
            self.assertIsNone(timeline.write_chart(os.path.join(d, "l.svg"), launches))

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

    def test_program_or_report(self):
        p = subprocess.run([sys.executable, TOOL, "--timeline"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        p = subprocess.run([sys.executable, TOOL, "--timeline", "--", "/no/such/program"], capture_output=True, text=True,
                           env=dict(os.environ, ARCHBENCH_PM_LIB=TOOL))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such program", p.stderr)


if __name__ == "__main__":
    unittest.main()
