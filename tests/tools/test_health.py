"""The node health verdict (archbench-health): a slow GPU, NVML's facts, links, models kept apart."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "archbench_health.py")


def entry(name, sel, value, device="NVIDIA H200", metric="byte_per_s"):
    return {"name": f"{name}/manual_time", "run_name": f"{name}/manual_time", "run_type": "iteration",
            "repetitions": 1, "repetition_index": 0, "iterations": 1, "real_time": 1.0, "cpu_time": 1.0,
            "time_unit": "ms", metric: value, "device": device, "device_selector": sel,
            "axes": {"family": name.split("/")[0]}, "name_format": name, "cost": {"bytes_read": 1.0}}


def node(values, models=None, gpus=None):
    models = models or {}
    ents = [entry(n, s, v, models.get(s, "NVIDIA H200")) for n, by in values.items() for s, v in by.items()]
    sels = sorted({s for by in values.values() for s in by})
    return {"context": {"schema_version": "2", "runs": [{"device_selector": s, "device": models.get(s, "NVIDIA H200")}
                                                        for s in sels],
                        "node": {"gpus": gpus or []}}, "benchmarks": ents}


class Health(unittest.TestCase):
    def run_tool(self, doc, *extra, peer=None):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "node.json")
        json.dump(doc, open(path, "w"))
        args = [sys.executable, TOOL, path, "--json", os.path.join(d, "v.json")]
        if peer:
            json.dump(peer, open(os.path.join(d, "peer.json"), "w"))
            args += ["--peer", os.path.join(d, "peer.json")]
        p = subprocess.run(args + list(extra), capture_output=True, text=True)
        v = json.load(open(os.path.join(d, "v.json"))) if os.path.exists(os.path.join(d, "v.json")) else None
        return p, v

    def test_a_slow_gpu_is_named_with_its_pci_bus_id_and_the_figure(self):
        gpus = [{"device_selector": f"cuda:{i}", "pci_bus_id": f"0000:0{i}:00.0"} for i in range(4)]
        doc = node({"memory/cuda/triad/double": {"cuda:0": 4.4e12, "cuda:1": 4.39e12, "cuda:2": 3.0e12, "cuda:3": 4.41e12}},
                   gpus=gpus)
        p, v = self.run_tool(doc)
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("FAIL cuda:2 (0000:02:00.0): memory/cuda/triad/double", p.stdout)
        self.assertEqual(v["failed_subjects"], ["cuda:2 (0000:02:00.0)"])
        self.assertIn("PASS cuda:0 (0000:00:00.0)", p.stdout)

    def test_published_peak_and_nvml_facts(self):
        gpus = [{"device_selector": "cuda:0", "pci_bus_id": "a", "ecc_volatile_uncorrected": 2, "clock_event_reasons": 4,
                 "pcie_width": 16, "pcie_max_width": 16, "nvlink_active": [1] * 18},
                {"device_selector": "cuda:1", "pci_bus_id": "b", "ecc_volatile_uncorrected": 0, "clock_event_reasons": 64,
                 "pcie_width": 8, "pcie_max_width": 16, "nvlink_active": [1] * 17 + [0]}]
        doc = node({"memory/cuda/triad/double": {"cuda:0": 4.4e12, "cuda:1": 4.4e12}}, gpus=gpus)
        p, v = self.run_tool(doc)
        self.assertEqual(p.returncode, 4)
        failed = {(c["subject"], c["figure"]) for c in v["failed"]}
        self.assertEqual(failed, {("cuda:0 (a)", "ecc_volatile_uncorrected"), ("cuda:1 (b)", "clock_event_reasons"),
                                  ("cuda:1 (b)", "pcie_width"), ("cuda:1 (b)", "nvlink_active")})
        self.assertIn("thermal slowdown (hardware)", p.stdout)
        # 4.4 TB/s against the H200's published 4.916: x0.895, above its 0.8
        pub = [c for c in v["checks"] if "published" in c["why"]]
        self.assertEqual(len(pub), 2)
        self.assertTrue(all(c["pass"] for c in pub))

    def test_models_are_never_compared(self):
        doc = node({"compute/cuda/mad/float4": {"cuda:0": 60e12, "cuda:1": 61e12, "cuda:2": 20e12, "cuda:3": 21e12}},
                   models={"cuda:2": "NVIDIA L4", "cuda:3": "NVIDIA L4"})
        p, v = self.run_tool(doc)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertTrue(all("median of 2" in c["why"] for c in v["checks"] if "median" in c["why"]))

    def test_a_slow_link(self):
        peer = {"context": {"schema_version": "2"}, "benchmarks": [
            entry(f"peer/cuda/ce_read/src:{s}/dst:{d}/bytes:268435456", "cuda:0", 394e9 if (s, d) != (1, 2) else 200e9)
            for s in range(3) for d in range(3) if s != d]}
        doc = node({"memory/cuda/triad/double": {"cuda:0": 4.4e12, "cuda:1": 4.4e12, "cuda:2": 4.4e12}})
        p, v = self.run_tool(doc, peer=peer)
        self.assertEqual(p.returncode, 4)
        self.assertEqual(v["failed_subjects"], ["link GPU 1 -> GPU 2"])

    def test_bad_input(self):
        d = tempfile.mkdtemp()
        bad = os.path.join(d, "t.json")
        open(bad, "w").write("{}")
        p, _ = self.run_tool(node({"x": {"cuda:0": 1.0, "cuda:1": 1.0}}), "--thresholds", bad)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a thresholds file", p.stderr)


if __name__ == "__main__":
    unittest.main()
