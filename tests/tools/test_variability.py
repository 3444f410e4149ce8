"""Tests for tools/archbench_merge.py and tools/archbench_variability.py (stdlib unittest):
merge of synthetic rank results and the MAD test, with a planted slow GPU, a slow node, none,
a failed rank and malformed input; the peer matrix tool.

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
MERGE = os.path.join(TOOLS, "archbench_merge.py")
VARIABILITY = os.path.join(TOOLS, "archbench_variability.py")
sys.path.insert(0, TOOLS)
from archbench.analysis import stats as av  # noqa: E402
from archbench.records import results as am  # noqa: E402

# name -> (counter, value on a good GPU); the latency one is better lower.
BENCHMARKS = {
    "memory/cuda/triad/double": ("byte_per_s", 3.0e12),
    "compute/cuda/mad/float4": ("flop_per_s", 60e12),
    "bus/cuda/to_device_pinned/bytes:268435456": ("byte_per_s", 55e9),
    "cache/cuda/read/bytes:65536": ("byte_per_s", 30e12),
    "latency/cuda/chase/bytes:1048576": ("ns_per_access", 250.0),
}


def rank_results(host, selector, rng, slowdown=1.0):
    """One rank's Google Benchmark JSON: 3 repetitions per benchmark, +-1% noise, `slowdown` x slower."""
    rows = []
    for name, (counter, good) in BENCHMARKS.items():
        for rep in range(3):
            value = good * rng.uniform(0.99, 1.01)
            value = value * slowdown if counter.startswith("ns_") else value / slowdown
            rows.append({"name": name + "/manual_time", "run_name": name + "/manual_time", "run_type": "iteration",
                         "repetitions": 3, "repetition_index": rep, "iterations": 100, "real_time": 10.0,
                         "cpu_time": 10.0, "time_unit": "us", counter: value})
    return {"context": {"host": host, "device": "NVIDIA H200", "device_selector": selector, "backend": "cuda"},
            "benchmarks": rows}


class Cluster:
    """Synthetic ranks in a temporary folder, and the manifest the launcher would write."""

    def __init__(self, tmp, hosts=3, gpus=2, slow=(), failed=()):
        rng = random.Random(7)
        self.tmp, self.lines = tmp, []
        for rank in range(hosts * gpus):
            host, local = f"node{rank // gpus}", rank % gpus
            path = os.path.join(tmp, f"rank-{rank}.json")
            tail = os.path.join(tmp, f"tail-{rank}.txt")
            status = 0
            if rank in failed:
                status, path = 139, ""
                with open(tail, "w") as f:
                    f.write("archbench: cudaMalloc failed: an illegal memory access\n")
            else:
                with open(path, "w") as f:
                    json.dump(rank_results(host, f"cuda:{local}", rng, 1.25 if rank in slow else 1.0), f)
            self.lines.append(f"{status}\t{path}\t{tail}\thost={host}\trank={rank}\tdevice_selector=cuda:{local}")

    def merge(self):
        manifest = os.path.join(self.tmp, "manifest.tsv")
        with open(manifest, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        out = os.path.join(self.tmp, "merged.json")
        p = subprocess.run([sys.executable, MERGE, "--manifest", manifest, "-o", out, "--report",
                            os.path.join(self.tmp, "report.json")], capture_output=True, text=True)
        with open(out) as f:
            merged = json.load(f)
        with open(os.path.join(self.tmp, "report.json")) as f:
            return p, merged, json.load(f)


class MergeAndVariability(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def test_merge_tags_every_entry_with_host_rank_and_device(self):
        p, merged, _ = Cluster(self.tmp).merge()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(merged["benchmarks"]), 6 * len(BENCHMARKS) * 3)
        self.assertEqual({(b["host"], b["rank"], b["device_selector"]) for b in merged["benchmarks"]},
                         {(f"node{r // 2}", str(r), f"cuda:{r % 2}") for r in range(6)})
        self.assertEqual(merged["context"]["merged_runs"], 6)
        self.assertEqual(merged["context"]["failed_runs"], 0)

    def test_planted_slow_gpu_is_found_with_its_evidence(self):
        p, _, report = Cluster(self.tmp, slow={3}).merge()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([g["gpu"] for g in report["slow_gpus"]], ["node1 rank 3 cuda:1"])
        slow = report["slow_gpus"][0]
        self.assertEqual((slow["slow_on"], slow["tested"]), (len(BENCHMARKS), len(BENCHMARKS)))
        # The latency benchmark counts too: slow there means a longer time per access.
        latency = [e for e in slow["evidence"] if e["name"].startswith("latency/")]
        self.assertEqual(len(latency), 1)
        self.assertGreater(latency[0]["ratio_to_median"], 1.2)
        self.assertEqual(report["slow_nodes"], [], "node1's other GPU is fine")
        self.assertIn("SLOW GPU: node1 rank 3 cuda:1", p.stdout)
        for b in report["per_benchmark"]:
            self.assertEqual(b["gpus"], 6)
            self.assertLessEqual(b["min"], b["median"])
            self.assertLessEqual(b["median"], b["max"])

    def test_slow_node_when_all_its_gpus_are_slow(self):
        _, _, report = Cluster(self.tmp, slow={4, 5}).merge()
        self.assertEqual(sorted(g["gpu"] for g in report["slow_gpus"]), ["node2 rank 4 cuda:0", "node2 rank 5 cuda:1"])
        self.assertEqual(report["slow_nodes"], ["node2"])

    def test_nothing_flagged_without_a_slow_gpu(self):
        p, _, report = Cluster(self.tmp).merge()
        self.assertEqual(report["slow_gpus"], [])
        self.assertEqual(report["slow_nodes"], [])
        self.assertTrue(all(not b["outliers"] for b in report["per_benchmark"]), report["per_benchmark"])
        self.assertIn("no slow GPU", p.stdout)

    def test_identical_gpus_make_no_outlier_of_a_small_difference(self):
        # MAD 0: the floor (1% of the median) keeps a 2% difference from being an outlier,
        # while a 20% one still is.
        values = {f"g{i}": 100.0 for i in range(5)}
        self.assertEqual(av.outliers(dict(values, g0=102.0), 3.5), {})
        self.assertEqual(list(av.outliers(dict(values, g0=80.0), 3.5)), ["g0"])

    def test_failed_rank_is_reported_not_fatal(self):
        p, merged, report = Cluster(self.tmp, failed={2}).merge()
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len({b["rank"] for b in merged["benchmarks"]}), 5)
        bad = [r for r in merged["context"]["runs"] if r.get("failed")]
        self.assertEqual([(r["rank"], r["status"]) for r in bad], [("2", 139)])
        self.assertIn("illegal memory access", bad[0]["output_tail"])
        self.assertEqual([r["status"] for r in report["failed_runs"]], [139])
        self.assertIn("FAILED: node1 rank 2 cuda:0 (exit 139)", p.stdout)

    def test_malformed_rank_file_counts_as_failed_with_the_reason(self):
        cluster = Cluster(self.tmp)
        with open(os.path.join(self.tmp, "rank-1.json"), "w") as f:
            f.write("{not json")
        p, merged, _ = cluster.merge()
        self.assertEqual(p.returncode, 1)
        bad = [r for r in merged["context"]["runs"] if r.get("failed")]
        self.assertEqual(len(bad), 1)
        self.assertIn("malformed JSON", bad[0]["error"])

    def test_malformed_manifest_and_merged_file_are_clear_errors(self):
        manifest = os.path.join(self.tmp, "manifest.tsv")
        with open(manifest, "w") as f:
            f.write("zero\tfile.json\n")
        p = subprocess.run([sys.executable, MERGE, "--manifest", manifest, "-o", os.path.join(self.tmp, "m.json")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("line 1: expected", p.stderr)
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"benchmarks": "no"}, f)
        p = subprocess.run([sys.executable, VARIABILITY, bad], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a Google Benchmark results file", p.stderr)

    def test_unit_label(self):
        self.assertEqual(am.unit_of({"host": "n0", "rank": "3", "device_selector": "cuda:1"}), "n0 rank 3 cuda:1")
        self.assertEqual(am.unit_of({"host": "n0", "device_selector": "cuda:1"}), "n0 cuda:1")



class PeerMatrix(unittest.TestCase):
    def test_matrix_from_per_device_names(self):
        rows = []
        for (variant, src, dst, counter, value) in [("ce_write", 0, 1, "byte_per_s", 150e9),
                                                    ("ce_write", 1, 0, "byte_per_s", 140e9),
                                                    ("latency", 1, 0, "ns_per_access", 1500.0)]:
            name = f"peer/cuda/{variant}/src:{src}/dst:{dst}/bytes:268435456/manual_time"
            for rep, scale in enumerate((0.9, 1.0, 1.1)):
                rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetition_index": rep,
                             "real_time": 1.0, "time_unit": "us", counter: value * scale})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "peer.json")
            with open(path, "w") as f:
                json.dump({"context": {"device": "H200"}, "benchmarks": rows}, f)
            out = os.path.join(tmp, "matrix.json")
            p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_peer.py"), path, "--json", out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                doc = {(m["variant"], c["src"], c["dst"]): c["value"] for m in json.load(f) for c in m["cells"]}
            self.assertAlmostEqual(doc[("ce_write", 0, 1)], 150.0)   # GB/s, the median
            self.assertAlmostEqual(doc[("latency", 1, 0)], 1.5)      # us per access
            self.assertIn("ce_write, 256 MiB (GB/s", p.stdout)
            empty = os.path.join(tmp, "none.json")
            with open(empty, "w") as f:
                json.dump({"context": {"device": "NVIDIA H200"}, "benchmarks": []}, f)
            p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_peer.py"), empty],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("no peer/cuda", p.stderr)


if __name__ == "__main__":
    unittest.main()
