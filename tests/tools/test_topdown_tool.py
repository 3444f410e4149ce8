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

    def test_malformed_file_is_an_error_with_its_line(self):
        p, _ = self.run_tool([{"type": "process", "pid": 1}, {"type": "kernel", "name": "a"}])
        self.assertEqual(p.returncode, 2)
        self.assertIn("raw.jsonl:2", p.stderr)

    def test_program_or_report_not_both(self):
        p = subprocess.run([sys.executable, TOOL], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
