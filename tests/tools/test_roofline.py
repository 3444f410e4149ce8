"""Tests for tools/archbench_roofline.py (stdlib unittest).

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
ROOFLINE = os.path.join(TOOLS, "archbench_roofline.py")
H100 = os.path.join(ROOT, "results", "nvidia-h100-80gb-hbm3", "580-159-04")
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from archbench.analysis import roofline as rl  # noqa: E402
from archbench.render import roofline as rr  # noqa: E402
from test_compare import CONTEXT, bench_rows  # noqa: E402  (helpers only, no test classes)

LLC = 50 * 1024 * 1024
L1, L2, DRAM = 20e12, 8e12, 3e12
PEAK_FLOAT = 66e12


def staircase(sizes, noise=0.05, seed=1):
    """byte_per_s of a cache read curve: L1 up to 64 KiB, L2 up to 16 MiB, a transition at 32 MiB, then DRAM."""
    rng = random.Random(seed)
    out = []
    for ws in sizes:
        base = L1 if ws <= 64 * 1024 else L2 if ws <= 16 * 1024 ** 2 else 5e12 if ws <= 32 * 1024 ** 2 else DRAM
        out.append(base * (1 + rng.uniform(-noise, noise)))
    return out


SIZES = [4096 * 2 ** i for i in range(18)]  # 4 KiB .. 512 MiB (> 8 x 50 MiB)


def synthetic_rows(backend="cuda", flops=True):
    """A run with compute, cache, local, memory and flops rows (5 repetitions plus aggregates each)."""
    rows = []
    rows += bench_rows(f"compute/{backend}/mad/float4", 1000, {"flop_per_s": PEAK_FLOAT}, seed=1)
    rows += bench_rows(f"compute/{backend}/mad/float", 1000, {"flop_per_s": 60e12}, seed=2)
    rows += bench_rows(f"compute/{backend}/add/float4", 1000, {"flop_per_s": 33e12}, seed=3)
    rows += bench_rows(f"compute/{backend}/mad/double2", 1000, {"flop_per_s": 33e12}, seed=4)
    rows += bench_rows(f"compute/{backend}/mma/fp16", 1000, {"flop_per_s": 650e12}, seed=5)
    rows += bench_rows(f"local/{backend}/read/stride:1", 1000, {"byte_per_s": 30e12}, seed=6)
    rows += bench_rows(f"local/{backend}/read/stride:2", 1000, {"byte_per_s": 15e12}, seed=7)
    rows += bench_rows(f"memory/{backend}/triad/double", 1000, {"byte_per_s": 2.9e12, "flop_per_s": 2.4e11}, seed=8)
    for op, scale in (("read", 1.0), ("rmw", 0.6)):
        for i, (ws, v) in enumerate(zip(SIZES, staircase(SIZES, seed=9 if op == "read" else 10))):
            rows += bench_rows(f"cache/{backend}/{op}/bytes:{ws}", 1000, {"byte_per_s": v * scale},
                               cv=0.005, seed=100 + i)
    if flops:
        for source, bw in (("dram", DRAM), ("cache", L2)):
            for i in range(12):
                n = 2 ** i
                ai = n / 4.0
                attained = 0.95 * min(PEAK_FLOAT, bw * ai)
                rows += bench_rows(f"flops/{backend}/{source}/float/flops:{n}", 1000,
                                   {"flop_per_s": attained, "byte_per_s": attained / ai}, cv=0.002, seed=200 + i)
    return rows


def write(path, rows, **context):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ctx = {**CONTEXT, "backend": "cuda", "cache_bytes": str(LLC), **context}
    with open(path, "w") as f:
        json.dump({"context": ctx, "benchmarks": rows}, f)
    return path


def run(*args):
    p = subprocess.run([sys.executable, ROOFLINE, *args], capture_output=True, text=True, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def svg_text(path):
    """All text of an SVG file (it must parse as XML)."""
    return " ".join("".join(e.itertext()) for e in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}text"))


class PlateauTest(unittest.TestCase):
    def test_clean_staircase(self):
        values = [10, 10, 10, 5, 5, 5, 5, 2, 2]
        self.assertEqual(rl.find_plateaus(values, 0.15), [(0, 3), (3, 7), (7, 9)])

    def test_noise_within_tolerance(self):
        rng = random.Random(3)
        values = [v * (1 + rng.uniform(-0.1, 0.1)) for v in [100] * 6 + [40] * 6 + [10] * 6]
        self.assertEqual(rl.find_plateaus(values, 0.15), [(0, 6), (6, 12), (12, 18)])

    def test_transition_point_is_not_a_level(self):
        values = [100, 100, 100, 60, 45, 40, 40, 40]  # 60 between the levels; 45 close to the second
        spans = rl.find_plateaus(values, 0.15)
        self.assertEqual(len(spans), 2)
        self.assertEqual(spans[0], (0, 3))
        self.assertNotIn(3, range(*spans[1]))

    def test_single_point_step_is_not_a_level(self):
        values = [10, 10, 10, 6, 3, 3, 3]
        self.assertEqual(rl.find_plateaus(values, 0.15), [(0, 3), (4, 7)])
        self.assertEqual(rl.find_plateaus([10, 5], 0.15), [])

    def test_tolerance_matters(self):
        values = [100, 90, 80, 70]
        self.assertEqual(rl.find_plateaus(values, 0.05), [])
        self.assertEqual(rl.find_plateaus(values, 0.2), [(0, 4)])

    def test_levels_named_and_device_memory(self):
        points = [(ws, v, f"cache/x/read/bytes:{ws}") for ws, v in zip(SIZES, staircase(SIZES))]
        levels = rl.levels_of(points, 0.15, LLC)
        self.assertEqual([lv["name"] for lv in levels], ["L1", "L2", "device memory"])
        self.assertEqual(levels[0]["range_bytes"], [4096, 65536])
        self.assertEqual(levels[0]["range"], "4 KiB - 64 KiB")
        self.assertGreater(levels[-1]["range_bytes"][1], LLC)
        for lv, want in zip(levels, (L1, L2, DRAM)):
            self.assertAlmostEqual(lv["value"] / want, 1, delta=0.06)
            self.assertIn("median of the plateau", lv["method"])
        # A curve that stops before the LLC has no device-memory level.
        short = [p for p in points if p[0] <= 16 * 1024 ** 2]
        self.assertEqual([lv["name"] for lv in rl.levels_of(short, 0.15, LLC)], ["L1", "L2"])


class ArithmeticTest(unittest.TestCase):
    def test_ridge_and_roof(self):
        self.assertAlmostEqual(rl.ridge(66e12, 3e12), 22.0)
        self.assertIsNone(rl.ridge(66e12, None))
        self.assertAlmostEqual(rl.roof(1.0, 66e12, 3e12), 3e12)
        self.assertAlmostEqual(rl.roof(100.0, 66e12, 3e12), 66e12)

    def test_roof_check(self):
        compute = {"float": {"fma": {"value": 60e12}}}
        bw = {"device_memory": {"name": "device memory", "value": 3e12}, "levels": [], "local": None}
        cache = {"name": "L2", "value": 10e12}
        points = [{"name": "flops/x/dram/float/flops:1", "ai": 1.0, "flop_per_s": 2.85e12, "byte_per_s": 2.85e12},
                  {"name": "flops/x/dram/float/flops:64", "ai": 100.0, "flop_per_s": 50e12, "byte_per_s": 0.5e12},
                  {"name": "flops/x/cache/float/flops:1", "ai": 1.0, "flop_per_s": 9.5e12, "byte_per_s": 9.5e12}]
        rows, acc = rl.roof_check(points, compute, bw, cache, [])
        by = {r["benchmark"]: r for r in rows}
        self.assertAlmostEqual(by["flops/x/dram/float/flops:1"]["ratio"], 0.95)
        self.assertEqual(by["flops/x/dram/float/flops:1"]["bound"], "memory")
        self.assertAlmostEqual(by["flops/x/dram/float/flops:64"]["ratio"], 50 / 60)
        self.assertEqual(by["flops/x/dram/float/flops:64"]["bound"], "compute")
        self.assertEqual(by["flops/x/cache/float/flops:1"]["ceiling"], "L2")
        self.assertAlmostEqual(by["flops/x/cache/float/flops:1"]["ratio"], 0.95)
        self.assertEqual(acc["memory_bound"], {"points": 2, "within": 2, "worst_ratio": 0.95})
        self.assertEqual(acc["compute_bound"]["within"], 0)
        self.assertFalse(acc["met"])

    def test_peak_option(self):
        name, value = rl.parse_peak("fp32=66.9T")
        self.assertEqual(name, "fp32")
        self.assertAlmostEqual(value, 66.9e12, delta=1)
        self.assertEqual(rl.parse_peak("dram=3352e9"), ("dram", 3352e9))
        for bad in ("fp33=1", "fp32", "fp32=abc", "dram=0"):
            with self.assertRaises(Exception):
                rl.parse_peak(bad)


class ToolTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, name):
        return os.path.join(self.d, name)

    def test_end_to_end(self):
        res = write(self.p("run/cuda.json"), synthetic_rows())
        code, out, err = run(os.path.dirname(res), "--svg", self.p("r.svg"), "--json", self.p("r.json"),
                             "--png", self.p("r.png"))
        self.assertEqual(code, 0, err)
        text = svg_text(self.p("r.svg"))
        for label in ("L1 (4 KiB - 64 KiB)", "L2 (", "device memory (", "float FMA 66", "float no FMA 33",
                      "local/shared 30", "triad 2.", "textbook float 66.9", "textbook device memory 3.35",
                      "flops dram/float", "flops cache/float"):
            self.assertIn(label, text)
        with open(self.p("r.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["tolerance"], 0.15)
        self.assertEqual(doc["device"], CONTEXT["device"])
        levels = doc["carm"]["levels"]
        self.assertEqual([lv["name"] for lv in levels], ["local/shared", "L1", "L2", "device memory"])
        self.assertAlmostEqual(doc["orm"]["device_memory"]["value"] / DRAM, 1, delta=0.06)
        self.assertEqual(doc["orm"]["device_memory"]["source"], "cache family plateau")
        triad = doc["bandwidth"]["memory"]["triad"]
        self.assertEqual(triad["benchmarks"], ["memory/cuda/triad/double"])
        self.assertAlmostEqual(doc["orm"]["device_memory"]["triad_ratio"], triad["value"] / doc["orm"]["device_memory"]["value"])
        self.assertAlmostEqual(doc["orm"]["compute"]["float"]["fma"]["value"], PEAK_FLOAT, delta=PEAK_FLOAT * 0.02)
        self.assertEqual(doc["orm"]["compute"]["float"]["fma"]["benchmarks"], ["compute/cuda/mad/float4"])
        dm = doc["orm"]["device_memory"]["value"]
        self.assertAlmostEqual(doc["orm"]["ridges"]["float"]["fma"],
                               doc["orm"]["compute"]["float"]["fma"]["value"] / dm)
        self.assertIn("mma/fp16", doc["tensor"])
        self.assertIn("cache/cuda/rmw", doc["bandwidth"]["curves"])
        self.assertEqual(len(doc["bandwidth"]["curves"]["cache/cuda/rmw"]["levels"]), 3)
        self.assertIsNotNone(doc["textbook"])
        self.assertAlmostEqual(doc["textbook"]["ridges"]["float"]["dram"], 66.9e12 / 3352e9)
        self.assertEqual(len(doc["roof_check"]), 24)
        self.assertTrue(doc["acceptance"]["met"])
        self.assertEqual({r["ceiling"] for r in doc["roof_check"] if r["source"] == "cache"}, {"L2"})
        for r in doc["roof_check"]:
            self.assertAlmostEqual(r["ratio"], 0.95, delta=0.06)
        self.assertIn("acceptance: met", out)
        self.assertIn("a level's ceiling is its plateau's median", out)
        self.assertIn("L1", out)

    def test_flops_miss_the_roof(self):
        rows = synthetic_rows(flops=False)
        rows += bench_rows("flops/cuda/dram/float/flops:1", 1000, {"flop_per_s": 1e12, "byte_per_s": 4e12})
        rows += bench_rows("flops/cuda/dram/float/flops:1024", 1000, {"flop_per_s": 60e12, "byte_per_s": 0.2e12})
        code, out, err = run(write(self.p("r.json"), rows), "--svg", self.p("r.svg"))
        self.assertEqual(code, 0, err)
        self.assertIn("acceptance: NOT met", out)
        self.assertIn("memory-bound 0/1 within 10%", out)

    def test_knee_points_are_reported_not_judged(self):
        # The ridge of 66 TFLOP/s over ~2.9 TB/s is at ~23 FLOP/byte: a point at AI 16 is in the
        # knee (within 4x), far below the roof, and must not fail the acceptance; the arms pass.
        rows = synthetic_rows(flops=False)
        rows += bench_rows("flops/cuda/dram/float/flops:1", 1000, {"flop_per_s": 0.35e12, "byte_per_s": 2.8e12})
        rows += bench_rows("flops/cuda/dram/float/flops:128", 1000, {"flop_per_s": 30e12, "byte_per_s": 1.9e12})
        rows += bench_rows("flops/cuda/dram/float/flops:1024", 1000, {"flop_per_s": 63e12, "byte_per_s": 0.25e12})
        code, out, err = run(write(self.p("r.json"), rows), "--svg", self.p("r.svg"), "--json", self.p("m.json"))
        self.assertEqual(code, 0, err)
        doc = json.load(open(self.p("m.json")))
        knee = [r for r in doc["roof_check"] if r.get("knee")]
        self.assertEqual([r["benchmark"].split("/manual_time")[0] for r in knee], ["flops/cuda/dram/float/flops:128"])
        self.assertLess(knee[0]["ratio"], 0.9)
        self.assertTrue(doc["acceptance"]["met"])
        self.assertTrue(doc["acceptance"]["by_source"]["dram"]["met"])
        self.assertIn("(1 knee points not judged)", out)

    def test_malformed_file(self):
        path = self.p("bad.json")
        with open(path, "w") as f:
            f.write("{not json")
        code, out, err = run(path, "--svg", self.p("r.svg"))
        self.assertEqual(code, 2)
        self.assertIn("malformed JSON", err)
        self.assertFalse(os.path.exists(self.p("r.svg")))

    def test_two_devices(self):
        a = write(self.p("a/run.json"), synthetic_rows())
        b = write(self.p("b/run.json"), synthetic_rows(), device="AMD Instinct MI300X")
        code, out, err = run(a, b, "--svg", self.p("r.svg"))
        self.assertEqual(code, 2)
        self.assertIn("2 devices", err)
        self.assertIn("AMD Instinct MI300X", err)

    def test_unknown_device_and_peak_override(self):
        path = write(self.p("r.json"), synthetic_rows(), device="Some GPU")
        code, out, err = run(path, "--svg", self.p("r.svg"), "--json", self.p("o.json"))
        self.assertEqual(code, 0, err)
        self.assertIn("no published peaks known for 'Some GPU'", out)
        with open(self.p("o.json")) as f:
            self.assertIsNone(json.load(f)["textbook"])
        code, out, err = run(path, "--svg", self.p("r.svg"), "--peak", "fp32=50T", "--peak", "dram=2e12")
        self.assertEqual(code, 0, err)
        self.assertIn("textbook float 50 TFLOP/s", svg_text(self.p("r.svg")))
        code, out, err = run(path, "--peak", "bogus=1")
        self.assertEqual(code, 2)

    def test_no_png_without_matplotlib(self):
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            why = rr.write_png(self.p("r.png"), None, None, [], "float", "t")
        self.assertIn("matplotlib is not importable", why)
        self.assertFalse(os.path.exists(self.p("r.png")))

    def test_energy(self):
        rows = synthetic_rows(flops=False)
        rows += bench_rows("memory/cuda/triad/float", 1000,
                           {"flop_per_s": 2e11, "byte_per_s": 2.4e12, "flop_per_joule": 4e8})
        path = write(self.p("r.json"), rows)
        code, out, err = run(path, "--svg", self.p("r.svg"), "--energy-svg", self.p("e.svg"))
        self.assertEqual(code, 0, err)
        self.assertIn("1 points", out)
        ET.parse(self.p("e.svg"))
        code, out, err = run(write(self.p("s.json"), synthetic_rows(flops=False)), "--svg", self.p("r.svg"),
                             "--energy-svg", self.p("e2.svg"))
        self.assertIn("no energy roofline", out)
        self.assertFalse(os.path.exists(self.p("e2.svg")))

    def test_real_h100_without_cache_family(self):
        files = [os.path.join(H100, f) for f in ("cuda-quick.json", "cuda-quick-memory-bus.json",
                                                 "cuda-quick-builtins-image-local.json")]
        if not all(os.path.exists(f) for f in files):
            self.skipTest("recorded H100 results not present")
        code, out, err = run(*files, "--svg", self.p("r.svg"), "--json", self.p("r.json"))
        self.assertEqual(code, 0, err)
        self.assertIn("no cache family", out)
        self.assertIn("device memory ceiling: 3.07 TB/s from memory/*/triad", out)
        text = svg_text(self.p("r.svg"))
        for label in ("float FMA", "float no FMA", "device memory", "local/shared", "textbook float 66.9"):
            self.assertIn(label, text)
        with open(self.p("r.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["orm"]["device_memory"]["source"], "memory/*/triad")
        self.assertGreater(doc["orm"]["compute"]["float"]["fma"]["value"], 6e13)
        self.assertEqual(doc["roof_check"], [])


if __name__ == "__main__":
    unittest.main()
