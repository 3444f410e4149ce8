"""A node's run in the report (analysis/nodeview.py): GPU by GPU, never a median over GPUs alone;
the outliers marked; the peer family's links as matrices."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from archbench.analysis import nodeview  # noqa: E402
from archbench.analysis.report import read_run  # noqa: E402

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "archbench_report.py")


def entry(name, sel, value, metric="flop_per_s"):
    return {"name": f"{name}/manual_time", "run_name": f"{name}/manual_time", "run_type": "iteration",
            "repetitions": 1, "repetition_index": 0, "iterations": 1, "real_time": 1.0, "cpu_time": 1.0,
            "time_unit": "ms", metric: value, "device": "NVIDIA H200", "device_selector": sel,
            "axes": {"family": name.split("/")[0], "backend": "cuda"}, "name_format": name,
            "cost": {"flops": 1.0}}


class NodeView(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        gpus = {"cuda:0": 66e12, "cuda:1": 66.1e12, "cuda:2": 30e12, "cuda:3": 65.9e12}
        doc = {"context": {"schema_version": "2", "device": "NVIDIA H200", "backend": "cuda",
                           "runs": [{"device_selector": s} for s in gpus], "merged_runs": 4,
                           "node": {"gpus": [{"device_selector": s, "pci_bus_id": f"0000:0{i}:00.0"}
                                             for i, s in enumerate(gpus)]}},
               "benchmarks": [entry("compute/cuda/mad/float4", s, v) for s, v in gpus.items()]
               + [entry(f"peer/cuda/ce_read/src:{a}/dst:{b}/bytes:268435456", "cuda:0", 390e9, "byte_per_s")
                  for a in range(2) for b in range(2) if a != b]}
        self.path = os.path.join(self.d, "node.json")
        with open(self.path, "w") as f:
            json.dump(doc, f)

    def test_gpu_by_gpu_with_the_outlier_marked(self):
        run = read_run(self.path, 0)
        units = nodeview.node_units(run)
        runs = nodeview.per_gpu(run, 0, units)
        self.assertEqual([r.context["gpu"] for r in runs], [f"cuda:{i} (0000:0{i}:00.0)" for i in range(4)])
        self.assertEqual([r.rows[0].run for r in runs], [0, 1, 2, 3])
        gpus, rows, slow = nodeview.node_table(run, units)
        row = next(r for r in rows if r["name"] == "compute/cuda/mad/float4")
        self.assertEqual(row["marks"], ["", "", "slow", ""])
        self.assertEqual([g["gpu"] for g in slow], ["cuda:2"])  # slow on the one benchmark it ran
        self.assertEqual(nodeview.link_matrices(run)["ce_read"][1][(0, 1)], (390.0, False))

    def test_the_page_has_a_column_a_gpu(self):
        out = os.path.join(self.d, "page.html")
        p = subprocess.run([sys.executable, TOOL, self.path, "-o", out], capture_output=True, text=True,
                           env=dict(os.environ, ARCHBENCH_CHARTS="svg"))
        self.assertEqual(p.returncode, 0, p.stderr)
        page = open(out, encoding="utf-8").read()
        self.assertIn('<section id="node0">', page)
        self.assertIn("(slow)", page)
        for i in range(4):
            self.assertIn(f"cuda:{i} (0000:0{i}:00.0)", page)


if __name__ == "__main__":
    unittest.main()
