"""The results schema (tools/archbench/records/results.py): every committed results file loads or is
recognised as another tool's output; schema 2 files rebuild their names from their axes and get
slowdown/speedup derived; an unknown version is refused. Stdlib unittest.

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
from archbench.records import results  # noqa: E402

CONTEXT = {"date": "2026-11-24T10:00:00+00:00", "device": "Some GPU", "backend": "cuda", "schema_version": "2"}


def row(name_format, axes, time_ns, rep=0, **extra):
    """One schema-2 iteration row."""
    name = name_format.format(**axes) + "/manual_time"
    return dict({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 3,
                 "repetition_index": rep, "iterations": 10, "real_time": time_ns, "cpu_time": 1.0,
                 "time_unit": "ns", "axes": axes, "name_format": name_format,
                 "cost": {"flops": 0, "int_ops": 0, "bytes_read": 0, "bytes_written": 0, "accesses": 0,
                          "calls": 1}}, **extra)


def schema2_rows():
    fmt = "{family}/{backend}/{op}/items:{items}"
    rows = []
    for items, times in ((1, (100, 110, 90)), (4, (30, 25, 35))):
        axes = {"family": "scalability", "backend": "cuda", "op": "vector_add", "items": items}
        for rep, t in enumerate(times):
            rows.append(row(fmt, axes, t, rep, baseline="scalability/cuda/vector_add/items:1", relation="speedup"))
    compute = {"family": "compute", "backend": "cuda", "op": "mad", "type": "float4", "scalar": "float", "width": 4}
    rows.append(row("{family}/{backend}/{op}/{type}", compute, 50, flop_per_s=1e12))
    paths = {"family": "divergence", "backend": "cuda", "op": "paths", "paths": 2}
    rows.append(row("{family}/{backend}/{op}/paths:{paths}", paths, 300,
                    baseline="compute/cuda/mad/float4", relation="slowdown"))
    return rows


class SchemaTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, doc):
        path = os.path.join(self.tmp.name, "r.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def test_committed_results_load_or_are_recognised(self):
        files = sorted(os.path.join(d, f) for d, _, names in os.walk(os.path.join(ROOT, "results"))
                       for f in names if f.endswith(".json"))
        self.assertTrue(files)
        for path in files:
            with self.subTest(path=os.path.relpath(path, ROOT)):
                context, entries = results.load(path)
                if context is None:
                    self.assertIn("not a results file", entries)
                    continue
                self.assertEqual(context["schema_version"], "2")
                for entry in entries:
                    self.assertEqual(results.name_of(entry), results.base_name(entry))
                    self.assertIn("family", entry["axes"])
                    self.assertIn("backend", entry["axes"])

    def test_schema1_conversion(self):
        entry = {"name": "compute/cuda/mad/float4/manual_time", "run_name": "compute/cuda/mad/float4/manual_time",
                 "run_type": "iteration", "real_time": 2.0, "time_unit": "us", "flop_per_s": 1e12}
        out = results.convert_v1(entry)
        self.assertEqual(out["axes"], {"family": "compute", "backend": "cuda", "op": "mad", "type": "float4",
                                       "scalar": "float", "width": 4})
        self.assertEqual(out["name_format"], "{family}/{backend}/{op}/{type}")
        self.assertAlmostEqual(out["cost"]["flops"], 2e6)
        self.assertTrue(out["converted"])
        axes, fmt = results.axes_of_name("latency/cuda/chase/bytes:1024")
        self.assertEqual(axes["bytes"], 1024)
        self.assertEqual(fmt, "{family}/{backend}/{op}/bytes:{bytes}")

    def test_schema2_axes_and_derived_relations(self):
        ctx, entries = results.read_results(self.write({"context": CONTEXT, "benchmarks": schema2_rows()}))
        for entry in entries:
            self.assertEqual(results.name_of(entry) + "/manual_time", entry["run_name"])
        by = {results.base_name(e): e for e in entries}
        self.assertAlmostEqual(by["scalability/cuda/vector_add/items:4"]["speedup"], 100 / 30)
        self.assertAlmostEqual(by["scalability/cuda/vector_add/items:1"]["speedup"], 1.0)
        self.assertAlmostEqual(by["divergence/cuda/paths/paths:2"]["slowdown"], 6.0)
        self.assertNotIn("converted", by["compute/cuda/mad/float4"])
        flat = results.flat_records(entries)
        self.assertEqual(flat[-2]["axes.width"], 4)
        self.assertEqual(flat[-2]["cost.calls"], 1)
        self.assertEqual(ctx["schema_version"], "2")

    def test_int_version_and_unknown_version(self):
        self.assertIsNotNone(results.read_results(self.write({"context": dict(CONTEXT, schema_version=2),
                                                              "benchmarks": schema2_rows()})))
        path = self.write({"context": dict(CONTEXT, schema_version="3"), "benchmarks": schema2_rows()})
        with self.assertRaises(results.InputError) as e:
            results.read_results(path)
        self.assertIn(path, str(e.exception))
        self.assertIn("schema_version '3'", str(e.exception))
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_compare.py"), path, path],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("schema_version '3'", p.stderr)

    def test_schema2_without_axes_is_refused(self):
        rows = schema2_rows()
        del rows[0]["axes"]
        with self.assertRaises(results.InputError) as e:
            results.read_results(self.write({"context": CONTEXT, "benchmarks": rows}))
        self.assertIn("\"axes\"", str(e.exception))

    def test_module_entry_point(self):
        path = self.write({"context": CONTEXT, "benchmarks": schema2_rows()})
        p = subprocess.run([sys.executable, "-m", "archbench", "compare", path, path], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=TOOLS))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("result: no regression", p.stdout)


if __name__ == "__main__":
    unittest.main()
