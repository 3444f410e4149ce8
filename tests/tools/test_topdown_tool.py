"""tools/archbench_topdown.py on synthetic injection records: time weighting, views, errors."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "archbench_topdown.py")


def kernel(seq, name, inv, dur, retire, div, front, back):
    return {"type": "kernel", "name": name, "mangled": name, "seq": seq, "invocation": inv, "grid": [1, 1, 1],
            "block": [32, 1, 1], "host_ns": 0, "context": 1, "duration_ns": dur, "metrics": {},
            "topdown": {"td_retire": retire, "td_divergence": div, "td_frontend": front, "td_backend": back,
                        "td_stall_long_scoreboard": back}}


class TopDownTool(unittest.TestCase):
    def run_tool(self, records, *args):
        d = tempfile.mkdtemp()
        raw = os.path.join(d, "raw.jsonl")
        with open(raw, "w") as f:
            f.write("\n".join(json.dumps(r) for r in records) + "\n")
        out = os.path.join(d, "out.json")
        p = subprocess.run([sys.executable, TOOL, "--report", raw, "--json", out, *args], capture_output=True, text=True)
        return p, (json.load(open(out)) if os.path.exists(out) else None)

    def test_time_weighted_totals_and_invocations(self):
        recs = [{"type": "process", "pid": 1, "command": "x", "start_ns": 0, "date": "2026-11-22T12:00:00Z"},
                {"type": "profiler", "chip": "GH100", "passes": 6, "metrics": 25, "device": 0,
                 "device_name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:00:06.0"},
                kernel(0, "a", 0, 100, 0.9, 0.05, 0.02, 0.03), kernel(1, "b", 0, 300, 0.1, 0.0, 0.1, 0.8),
                kernel(2, "a", 1, 100, 0.7, 0.1, 0.1, 0.1)]
        p, j = self.run_tool(recs, "--level", "3", "--by-invocation")
        self.assertEqual(p.returncode, 0, p.stderr)
        ks = {k["kernel"]: k for k in j["kernels"]}
        self.assertAlmostEqual(ks["a"]["retire"], 0.8)  # equal times: the plain mean
        self.assertAlmostEqual(ks["b"]["time_share"], 0.6)
        self.assertAlmostEqual(j["total"]["retire"], (0.9 * 100 + 0.1 * 300 + 0.7 * 100) / 500)
        self.assertAlmostEqual(j["total"]["stall_long_scoreboard"], (0.03 * 100 + 0.8 * 300 + 0.1 * 100) / 500)
        self.assertEqual([r["seq"] for r in j["invocations"]], [0, 1, 2])
        self.assertEqual(j["context"]["passes"], 6)
        self.assertEqual(j["context"]["device"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(j["context"]["date"], "2026-11-22T12:00:00Z")
        self.assertIn("TOTAL", p.stdout)

    def test_sampled_launches_stand_for_their_shape(self):
        # Kernel a: 2 of 10 launches profiled, the 8 others 800 ns in activity records; kernel b:
        # 1 of 3 profiled and no activity records (each counts at the profiled mean); kernel c
        # could not be replayed (host memory): time only.
        proc = {"type": "process", "pid": 1, "command": "x", "start_ns": 0, "date": "d"}
        recs = [proc, kernel(0, "a", 0, 100, 0.5, 0.1, 0.1, 0.3), kernel(1, "a", 1, 100, 0.7, 0.1, 0.1, 0.1),
                kernel(2, "b", 0, 300, 0.2, 0.0, 0.2, 0.6),
                {"type": "unreplayable", "name": "c", "mangled": "c", "seq": 3, "reason": "argument 0 points into host memory"},
                {"type": "shape", "name": "a", "mangled": "a", "grid": [1, 1, 1], "block": [32, 1, 1], "launches": 10,
                 "profiled": 2, "unreplayable": 0, "unprofiled_records": 8, "unprofiled_ns": 800},
                {"type": "shape", "name": "b", "mangled": "b", "grid": [1, 1, 1], "block": [32, 1, 1], "launches": 3,
                 "profiled": 1, "unreplayable": 0},
                {"type": "shape", "name": "c", "mangled": "c", "grid": [1, 1, 1], "block": [1, 1, 1], "launches": 1,
                 "profiled": 0, "unreplayable": 1, "unprofiled_records": 1, "unprofiled_ns": 100},
                {"type": "end", "profiled": 3, "unprofiled": 11, "unreplayable": 1, "passes": 6, "sample": 2,
                 "unprofiled_time": "CUPTI kernel activity records"}]
        p, j = self.run_tool(recs)
        self.assertEqual(p.returncode, 0, p.stderr)
        k = {r["kernel"]: r for r in j["kernels"]}
        self.assertEqual((k["a"]["launches"], k["a"]["profiled"]), (10, 2))
        self.assertAlmostEqual(k["a"]["gpu_time_s"], 1000e-9)
        self.assertAlmostEqual(k["b"]["gpu_time_s"], 900e-9)
        self.assertAlmostEqual(k["c"]["gpu_time_s"], 100e-9)
        self.assertNotIn("retire", k["c"])
        self.assertAlmostEqual(k["a"]["retire"], 0.6)
        # The total weights a by 1000 ns and b by 900 ns (c has no fractions).
        self.assertAlmostEqual(j["total"]["retire"], (0.6 * 1000 + 0.2 * 900) / 1900)
        self.assertAlmostEqual(k["b"]["time_share"], 900 / 2000)
        self.assertEqual(j["context"]["unreplayable"][0]["kernel"], "c")
        self.assertIn("not replayable, ran natively: c", p.stdout)

    def test_over_budget_kernels_are_named_and_the_cost_shown(self):
        # Kernel b's only launch ran natively over the overhead budget: it has time, no fractions,
        # and the coverage line says so.
        proc = {"type": "process", "pid": 1, "command": "x", "start_ns": 0, "date": "d"}
        recs = [proc, kernel(0, "a", 0, 300, 0.5, 0.1, 0.1, 0.3),
                {"type": "shape", "name": "a", "mangled": "a", "grid": [1, 1, 1], "block": [32, 1, 1], "launches": 1,
                 "profiled": 1, "unreplayable": 0, "over_budget": 0, "unprofiled_records": 0, "unprofiled_ns": 0},
                {"type": "shape", "name": "b", "mangled": "b", "grid": [1, 1, 1], "block": [32, 1, 1], "launches": 1,
                 "profiled": 0, "unreplayable": 0, "over_budget": 1, "unprofiled_records": 1, "unprofiled_ns": 100},
                {"type": "end", "profiled": 1, "unprofiled": 1, "unreplayable": 0, "passes": 7, "sample": 2,
                 "budget": 1, "over_budget": 1, "setup_s": 0.42, "replay_s": 0.03, "decode_s": 0.001,
                 "unprofiled_time": "CUPTI kernel activity records"}]
        p, j = self.run_tool(recs)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("profiled kernels: 1 of 2, 75.0% of the GPU time", p.stdout)
        self.assertIn("1 launches ran natively over the overhead budget (--budget 1", p.stdout)
        self.assertIn("profiling's time: setup 0.42 s, replay 0.03 s", p.stdout)
        self.assertEqual(j["context"]["over_budget"], 1)
        self.assertAlmostEqual(j["total"]["retire"], 0.5)

    def test_unprofiled_shape_stands_with_the_nearest_profiled_one(self):
        # A size sweep: kernel s profiled at grids 1 and 1024; its grid-4096 launches (9000 ns)
        # ran natively (over the budget). They count with the grid-1024 launch, the nearest in
        # threads; the prepared set-up is shown.
        proc = {"type": "process", "pid": 1, "command": "x", "start_ns": 0, "date": "d"}
        small, big = kernel(0, "s", 0, 100, 0.2, 0.0, 0.1, 0.7), kernel(1, "s", 1, 900, 0.8, 0.0, 0.1, 0.1)
        big["grid"] = [1024, 1, 1]
        shape = {"type": "shape", "name": "s", "mangled": "s", "block": [32, 1, 1], "unreplayable": 0}
        recs = [proc, small, big,
                dict(shape, grid=[1, 1, 1], launches=1, profiled=1, unprofiled_records=0, unprofiled_ns=0),
                dict(shape, grid=[1024, 1, 1], launches=1, profiled=1, unprofiled_records=0, unprofiled_ns=0),
                dict(shape, grid=[4096, 1, 1], launches=3, profiled=0, over_budget=3, unprofiled_records=3,
                     unprofiled_ns=9000),
                {"type": "end", "profiled": 2, "unprofiled": 3, "unreplayable": 0, "passes": 7, "sample": 2,
                 "budget": 1, "over_budget": 3, "setup_s": 0.05, "replay_s": 0.03, "decode_s": 0.001,
                 "prepare_s": 0.48, "prepare_wait_s": 0.02, "enable_ahead_s": 0.21,
                 "unprofiled_time": "CUPTI kernel activity records"}]
        p, j = self.run_tool(recs)
        self.assertEqual(p.returncode, 0, p.stderr)
        (s,) = j["kernels"]
        self.assertAlmostEqual(s["gpu_time_s"], 10000e-9)
        self.assertAlmostEqual(s["retire"], (0.2 * 100 + 0.8 * 9900) / 10000)
        self.assertIn("made ahead on the library's threads beside the program: 0.48 s, its enable on the first "
                      "context 0.21 s; the first profiled launch waited 0.02 s", p.stdout)

    def test_a_killed_run_is_read_as_far_as_it_was_written(self):
        # SIGKILL mid-run: no shape or end record, the last line cut mid-write.
        recs = [{"type": "process", "pid": 1, "command": "x", "start_ns": 0, "date": "d"},
                kernel(0, "a", 0, 100, 0.5, 0.1, 0.1, 0.3)]
        d = tempfile.mkdtemp()
        raw = os.path.join(d, "raw.jsonl")
        with open(raw, "w") as f:
            f.write("\n".join(json.dumps(r) for r in recs) + '\n{"type": "kernel", "name": "b", "mang')
        p = subprocess.run([sys.executable, TOOL, "--report", raw], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("no end record (the program was killed or crashed)", p.stderr)
        self.assertIn("last record cut off mid-write", p.stderr)
        self.assertRegex(p.stdout, r"\na +1 ")

    def test_malformed_file_is_an_error_with_its_line(self):
        p, _ = self.run_tool([{"type": "process", "pid": 1}, {"type": "kernel", "name": "a"}])
        self.assertEqual(p.returncode, 2)
        self.assertIn("raw.jsonl:2", p.stderr)

    def test_program_or_report_not_both(self):
        p = subprocess.run([sys.executable, TOOL], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
