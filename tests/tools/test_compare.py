"""Tests for tools/archbench_compare.py and tools/archbench_history.py (stdlib unittest).

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
COMPARE = os.path.join(TOOLS, "archbench_compare.py")
HISTORY = os.path.join(TOOLS, "archbench_history.py")
sys.path.insert(0, TOOLS)
from archbench.analysis import compare as ac, stats  # noqa: E402
from archbench.commands import compare as cc  # noqa: E402
from archbench.records import results  # noqa: E402
from archbench.render import charts  # noqa: E402

CONTEXT = {
    "date": "2024-05-01T10:00:00+00:00", "host_name": "box", "executable": "./archbench", "num_cpus": 16,
    "mhz_per_cpu": 3000, "library_build_type": "release", "archbench_version": "0.1.0", "host": "box",
    "backend": "opencl", "device": "NVIDIA H100 80GB HBM3", "device_selector": "opencl:0.0",
    "device_vendor": "NVIDIA", "device_type": "gpu", "platform": "NVIDIA CUDA", "platform_version": "OpenCL 3.0",
    "driver_version": "550.54", "runtime_version": "12.4", "kernel_language": "OpenCL C 1.2",
    "compute_units": "132", "max_clock_mhz": "1980", "global_mem_bytes": "85000000000", "sweep": "quick",
}


def bench_rows(name, time_ns, counters, reps=5, cv=0.01, seed=0, error=None):
    """Google-Benchmark-shaped rows of one benchmark: repetitions plus aggregates (or one error row)."""
    full = name + "/manual_time"
    if error:
        return [{"name": full, "run_name": full, "run_type": "iteration", "repetitions": reps,
                 "repetition_index": 0, "threads": 1, "error_occurred": True, "error_message": error}]
    rng = random.Random(seed)
    rows = []
    for i in range(reps):
        f = 1 + rng.gauss(0, cv)
        row = {"name": full, "run_name": full, "run_type": "iteration", "repetitions": reps,
               "repetition_index": i, "threads": 1, "iterations": 100, "real_time": time_ns * f,
               "cpu_time": 1000.0, "time_unit": "ns"}
        row.update({k: v / f for k, v in counters.items()})
        rows.append(row)
    for agg, fn in (("mean", statistics.fmean), ("median", statistics.median), ("stddev", statistics.stdev)):
        if reps < 2 and agg == "stddev":
            continue
        row = {"name": f"{full}_{agg}", "run_name": full, "run_type": "aggregate", "repetitions": reps,
               "threads": 1, "aggregate_name": agg, "iterations": reps, "time_unit": "ns", "cpu_time": 1000.0,
               "real_time": fn([r["real_time"] for r in rows[:reps]])}
        row.update({k: fn([r[k] for r in rows[:reps]]) for k in counters})
        rows.append(row)
    return rows


def write_results(path, rows, **context):
    """Write a results file with CONTEXT (updated by context) and the given rows."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"context": {**CONTEXT, **context}, "benchmarks": rows}, f)
    return path


def run(tool, *args, env=None):
    """Run a tool; returns (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


MAD = "compute/opencl/mad/float4"
TRIAD = "memory/opencl/triad"


def standard(scale_mad=1.0, cv=0.01, seed=0, reps=5):
    """Two benchmarks; the mad one's time scaled by scale_mad (its rate divided by it)."""
    return (bench_rows(MAD, 1000.0 * scale_mad, {"flop_per_s": 2e13 / scale_mad}, reps, cv, seed)
            + bench_rows(TRIAD, 5000.0, {"byte_per_s": 3e12}, reps, cv, seed + 1))


class MannWhitneyTest(unittest.TestCase):
    def test_exact_small(self):
        self.assertAlmostEqual(stats.mann_whitney_p([1, 2, 3], [4, 5, 6]), 0.1)
        self.assertAlmostEqual(stats.mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]), 2 / 252)
        self.assertAlmostEqual(stats.mann_whitney_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]), 2 / 252)

    def test_exact_interleaved_and_symmetric(self):
        # [1,3] vs [2,4]: U1 = 1 of 4; counts of U = 0..4 over 6 arrangements: 1,1,2,1,1 -> p = 2*2/6.
        self.assertAlmostEqual(stats.mann_whitney_p([1, 3], [2, 4]), 4 / 6)
        # 3 vs 3, U1 = 3: counts of U = 0..9 are 1,1,2,3,3,3,3,2,1,1 (of 20) -> p = 2*7/20.
        self.assertAlmostEqual(stats.mann_whitney_p([1, 2, 3], [1.5, 2.5, 3.5]), 0.7)
        self.assertAlmostEqual(stats.mann_whitney_p([1.5, 2.5, 3.5], [1, 2, 3]), 0.7)

    def test_ties_use_normal_approximation(self):
        p = stats.mann_whitney_p([1, 1, 2, 2, 3], [3, 4, 4, 5, 5])
        self.assertTrue(0 < p < 0.05, p)
        self.assertEqual(stats.mann_whitney_p([2, 2, 2], [2, 2, 2]), 1.0)


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_identical_runs(self):
        a = write_results(self.path("a.json"), standard())
        code, out, err = run(COMPARE, a, a)
        self.assertEqual(code, 0, out + err)
        self.assertIn("0 regression(s)", out)
        self.assertIn("2 benchmark(s) unchanged", out)
        self.assertNotIn("contexts differ", out)

    def test_regression_flagged(self):
        a = write_results(self.path("a.json"), standard(seed=1))
        b = write_results(self.path("b.json"), standard(scale_mad=1.2, seed=2))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 3, out + err)
        lines = [ln for ln in out.splitlines() if ln.startswith(MAD)]
        self.assertTrue(any("real_time" in ln and "regression" in ln for ln in lines), out)
        self.assertTrue(any(re.search(r"flop_per_s .* -1[5-9]\.\d% .* regression \(p < 0.05\)$", ln) for ln in lines),
                        out)
        self.assertIn("1 regression(s)", out)
        self.assertIn("0.00794", out)  # exact p for 5 vs 5 fully separated samples
        self.assertNotIn("/manual_time", out)

    def test_improvement(self):
        a = write_results(self.path("a.json"), standard(seed=1))
        b = write_results(self.path("b.json"), standard(scale_mad=1 / 1.2, seed=2))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("1 improvement(s)", out)
        self.assertTrue(any(ln.startswith(MAD) and "improvement" in ln for ln in out.splitlines()), out)

    def test_noisy_runs_not_flagged(self):
        a = write_results(self.path("a.json"), standard(cv=0.3, seed=3))
        b = write_results(self.path("b.json"), standard(scale_mad=1.1, cv=0.3, seed=4))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("0 regression(s), 0 improvement(s)", out)

    def test_noise_rule_alone(self):
        # Fully separated samples (p < alpha) but a change below noise-factor x CV is not flagged.
        base, new = results.Bench(), results.Bench()
        base.samples["real_time"] = [100, 101, 102, 103, 104]
        new.samples["real_time"] = [105, 106, 107, 108, 109]
        args = cc.parse_args(["x", "y", "--min-effect", "0.01", "--noise-factor", "5"])
        self.assertEqual(ac.compare_metric("real_time", base, new, args)["verdict"], "unchanged")
        args = cc.parse_args(["x", "y", "--min-effect", "0.01", "--noise-factor", "1"])
        self.assertEqual(ac.compare_metric("real_time", base, new, args)["verdict"], "regression")

    def test_single_sample_no_stats(self):
        a = write_results(self.path("a.json"), bench_rows(MAD, 1000.0, {"flop_per_s": 2e13}, reps=1))
        b = write_results(self.path("b.json"), bench_rows(MAD, 1300.0, {"flop_per_s": 2e13 / 1.3}, reps=1))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)  # one repetition, no noise record: 30% cannot be told from noise
        self.assertIn("undecided (not enough repetitions to tell)", out)
        c = write_results(self.path("c.json"), bench_rows(MAD, 2000.0, {"flop_per_s": 1e13}, reps=1))
        code, out, err = run(COMPARE, a, c)
        self.assertEqual(code, 3, out + err)
        self.assertIn("regression (huge change, few repetitions)", out)

    def test_aggregates_only_use_median(self):
        rows = [r for r in standard() if r["run_type"] == "aggregate"]
        slow = [r for r in standard(scale_mad=1.6) if r["run_type"] == "aggregate"]
        a = write_results(self.path("a.json"), rows)
        b = write_results(self.path("b.json"), slow)
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 3, out + err)
        self.assertIn("few repetitions", out)

    def test_missing_new_skipped(self):
        a = write_results(self.path("a.json"), standard() + bench_rows("compute/opencl/add/int", 10.0, {"op_per_s": 1e12})
                          + bench_rows("compute/opencl/mad/half", 10.0, {"flop_per_s": 1e12}))
        b = write_results(self.path("b.json"), standard() + bench_rows("latency/opencl/chase/bytes:4096", 10.0,
                                                                       {"ns_per_access": 300.0})
                          + bench_rows("compute/opencl/mad/half", 0, {}, error="device has no fp16"))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertRegex(out, r"missing \(in BASE, not in NEW\):\n  compute/opencl/add/int")
        self.assertRegex(out, r"new \(in NEW, not in BASE\):\n  latency/opencl/chase/bytes:4096")
        self.assertIn("compute/opencl/mad/half: new: device has no fp16", out)

    def test_contexts_differ(self):
        a = write_results(self.path("a.json"), standard())
        b = write_results(self.path("b.json"), standard(), driver_version="555.42")
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("contexts differ", out)
        self.assertIn("driver_version: 550.54 -> 555.42", out)
        self.assertLess(out.index("contexts differ"), out.index("unchanged"))

    def test_folder_merging(self):
        # NEW: the slow mad benchmark's repetitions split over two files in nested folders.
        rows = standard(scale_mad=1.2, seed=5)
        mad_iters = [r for r in rows if r["name"].startswith(MAD) and r["run_type"] == "iteration"]
        write_results(self.path("new/x/one.json"), mad_iters[:3])
        write_results(self.path("new/y/two.json"), mad_iters[3:] + bench_rows(TRIAD, 5000.0, {"byte_per_s": 3e12}))
        write_results(self.path("base/all.json"), standard(seed=6))
        code, out, err = run(COMPARE, self.path("base"), self.path("new"))
        self.assertEqual(code, 3, out + err)
        self.assertIn("0.00794", out)  # all 5 repetitions were merged
        _, benches = results.load_side(self.path("new"))
        self.assertEqual(len(benches[MAD].samples["real_time"]), 5)

    def test_markdown(self):
        a = write_results(self.path("a.json"), standard(seed=1))
        b = write_results(self.path("b.json"), standard(scale_mad=1.2, seed=2), driver_version="555.42")
        md = self.path("report.md")
        code, out, err = run(COMPARE, a, b, "--markdown", md)
        self.assertEqual(code, 3, out + err)
        with open(md) as f:
            text = f.read()
        self.assertIn("| benchmark | metric | base median | new median | change | noise band | p-value | verdict |",
                      text)
        self.assertIn(f"| {MAD} | real\\_time |", text)
        self.assertIn("- driver\\_version: 550.54 -> 555.42", text)
        code, out2, _ = run(COMPARE, a, b, "--format", "markdown")
        self.assertEqual(code, 3)
        self.assertEqual(out2, text)

    def test_filter(self):
        a = write_results(self.path("a.json"), standard(seed=1))
        b = write_results(self.path("b.json"), standard(scale_mad=1.2, seed=2))
        code, out, err = run(COMPARE, a, b, "--filter", "^memory/")
        self.assertEqual(code, 0, out + err)
        self.assertNotIn(MAD, out)

    def assertBadInput(self, code, out, err, needle):
        self.assertEqual(code, 2, out + err)
        self.assertIn(needle, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_malformed_json(self):
        a = write_results(self.path("a.json"), standard())
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write('{"context": {}, "benchmarks": [')
        self.assertBadInput(*run(COMPARE, a, bad), bad + ": malformed JSON")

    def test_not_benchmark_json(self):
        a = write_results(self.path("a.json"), standard())
        other = self.path("other.json")
        with open(other, "w") as f:
            json.dump({"foo": 1}, f)
        self.assertBadInput(*run(COMPARE, other, a), other + ": not a Google Benchmark results file")

    def test_entries_without_names(self):
        a = write_results(self.path("a.json"), standard())
        nameless = write_results(self.path("nameless.json"), [{"real_time": 1.0}])
        self.assertBadInput(*run(COMPARE, a, nameless), nameless + ": benchmark entry 0 has no name")

    def test_missing_file(self):
        a = write_results(self.path("a.json"), standard())
        gone = self.path("gone.json")
        self.assertBadInput(*run(COMPARE, a, gone), gone + ": no such file")

    def test_binary_file_and_empty_folder(self):
        a = write_results(self.path("a.json"), standard())
        binary = self.path("bin.json")
        with open(binary, "wb") as f:
            f.write(b"\xff\xfe\x00\x80")
        self.assertBadInput(*run(COMPARE, a, binary), binary)
        os.makedirs(self.path("empty"))
        self.assertBadInput(*run(COMPARE, a, self.path("empty")), "no *.json")


class BelievableTest(unittest.TestCase):
    """Issue 23: verdicts that say what the data can tell, definitions, invalid times, escaping."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = lambda name: os.path.join(self.tmp.name, name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_three_repetitions_2x_is_flagged(self):
        a = write_results(self.path("a.json"), standard(reps=3, seed=1))
        b = write_results(self.path("b.json"), standard(scale_mad=2.0, reps=3, seed=2))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 3, out + err)
        self.assertIn("regression (huge change, few repetitions)", out)

    def test_three_repetitions_small_change_says_it_cannot_tell(self):
        a = write_results(self.path("a.json"), standard(reps=3, seed=1, cv=0.003))
        b = write_results(self.path("b.json"), standard(scale_mad=1.08, reps=3, seed=2, cv=0.003))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("undecided (not enough repetitions to tell)", out)
        self.assertIn("1 benchmark(s): not enough repetitions to tell", out)
        self.assertIn("1 unchanged, 1 undecided", out)

    def test_noise_runs_widen_the_band(self):
        # Tight repetitions, but repeated runs of the base build differ by 10%: a 15% change is noise.
        for i, scale in enumerate((1.0, 1.1, 0.95)):
            write_results(self.path(f"noise/run{i}.json"), standard(scale_mad=scale, seed=10 + i, cv=0.002))
        a = write_results(self.path("a.json"), standard(seed=1, cv=0.002))
        b = write_results(self.path("b.json"), standard(scale_mad=1.15, seed=2, cv=0.002))
        self.assertEqual(run(COMPARE, a, b)[0], 3)
        code, out, err = run(COMPARE, a, b, "--noise", self.path("noise"))
        self.assertEqual(code, 0, out + err)
        self.assertIn("0 regression(s)", out)

    def test_definition_change_is_not_a_regression(self):
        # Schema 2: the cost per launch is in the file (here the mad benchmark does twice the work).
        def schema2(rows, flops):
            for r in rows:
                name = r["run_name"][: -len("/manual_time")]
                r.update(axes={"family": name.split("/")[0], "backend": "opencl"}, name_format=name,
                         cost={"flops": flops if name == MAD else 0, "bytes": 1e6})
            return rows
        a = write_results(self.path("a.json"), schema2(standard(seed=1), 2e7), schema_version="2")
        b = write_results(self.path("b.json"), schema2(standard(scale_mad=2.0, seed=2), 4e7), schema_version="2")
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("definition changed (cost per launch differs: not compared):\n  " + MAD + ": flops 2e+07 -> 4e+07",
                      out)
        self.assertIn("0 regression(s)", out)

    def test_schema1_recovered_cost_change_is_a_definition_change(self):
        # The same time, twice the op_per_s: archbench counted twice the work (a cost-model change).
        a = write_results(self.path("a.json"), bench_rows("compute/opencl/add/int", 1000.0, {"op_per_s": 1e12})
                          + standard(seed=1))
        b = write_results(self.path("b.json"), bench_rows("compute/opencl/add/int", 1000.0, {"op_per_s": 2e12})
                          + standard(seed=2), archbench_version="0.2.0")
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 0, out + err)
        self.assertIn("compute/opencl/add/int: int_ops", out)
        self.assertIn("0 regression(s), 0 improvement(s)", out)

    def test_zero_time_is_an_error_not_two_verdicts(self):
        zero = bench_rows("compute/opencl/add/int", 0.0, {}, reps=3)
        a = write_results(self.path("a.json"), standard(seed=1) + bench_rows("compute/opencl/add/int", 10.0, {}, reps=3))
        b = write_results(self.path("b.json"), standard(seed=2) + zero)
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 2, out + err)
        self.assertIn("compute/opencl/add/int: new: a time of 0 ns", out)
        self.assertIn("0 regression(s), 0 improvement(s)", out)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_nothing_in_common_or_all_nan_is_an_error(self):
        a = write_results(self.path("a.json"), bench_rows(MAD, 1000.0, {}))
        b = write_results(self.path("b.json"), bench_rows(TRIAD, 1000.0, {}))
        code, out, err = run(COMPARE, a, b)
        self.assertEqual(code, 2, out + err)
        self.assertIn("nothing was compared", err)
        nan = [dict(r, real_time=float("nan"), flop_per_s=float("nan")) for r in bench_rows(MAD, 1000.0, {"flop_per_s": 1.0})]
        c = write_results(self.path("c.json"), nan)
        code, out, err = run(COMPARE, c, c)
        self.assertEqual(code, 2, out + err)
        self.assertIn("nothing was compared", err)

    def test_foreign_google_benchmark_file(self):
        a = write_results(self.path("a.json"), standard())
        other = self.path("other.json")
        with open(other, "w") as f:
            json.dump({"context": {"date": "x", "host_name": "h", "executable": "./bench"},
                       "benchmarks": bench_rows("BM_memcpy/8", 10.0, {})}, f)
        code, out, err = run(COMPARE, other, a)
        self.assertEqual(code, 2, out + err)
        self.assertIn("another program", err)

    def test_names_stay_text(self):
        evil = "compute/opencl/mad/x\x1b[31mRED`|\n| fake | row |<img src=x>$y$"
        a = write_results(self.path("a.json"), bench_rows(evil, 1000.0, {}, reps=3, seed=1),
                          driver_version="1\x1b[2J`x`")
        b = write_results(self.path("b.json"), bench_rows(evil, 3000.0, {}, reps=3, seed=2), driver_version="2")
        md = self.path("r.md")
        code, out, err = run(COMPARE, a, b, "--markdown", md)
        self.assertEqual(code, 3, out + err)
        self.assertNotIn("\x1b", out + err)
        self.assertIn("x\\x1b[31mRED", out)
        with open(md) as f:
            text = f.read()
        self.assertNotIn("\x1b", text)
        row = next(line for line in text.splitlines() if "RED" in line)
        self.assertEqual(row.count("|") - row.count("\\|"), 9, row)  # 8 cells: no pipe of the name splits it
        self.assertNotIn("\n| fake", text)
        self.assertIn("\\`", row)
        self.assertIn("\\<img", row)


class HistoryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write_run(self, name, driver, date, factor):
        rows = (bench_rows("compute/opencl/mad/float4", 1000.0, {"flop_per_s": 2e13 * factor}, cv=0.0)
                + bench_rows("compute/opencl/mad/float", 1000.0, {"flop_per_s": 1e13 * factor}, cv=0.0)
                + bench_rows("compute/opencl/add/int2", 1000.0, {"op_per_s": 1.5e13 * factor}, cv=0.0)
                + bench_rows("memory/opencl/triad", 1000.0, {"byte_per_s": 3e12 * factor}, cv=0.0)
                + bench_rows("memory/opencl/copy", 1000.0, {"byte_per_s": 2.5e12 * factor}, cv=0.0)
                + bench_rows("memory/opencl/read", 1000.0, {"byte_per_s": 3.2e12 * factor}, cv=0.0)
                + bench_rows("latency/opencl/chase/bytes:4KiB", 1000.0, {"ns_per_access": 30.0 / factor}, cv=0.0)
                + bench_rows("latency/opencl/chase/bytes:64MiB", 1000.0, {"ns_per_access": 600.0 / factor}, cv=0.0))
        write_results(os.path.join(self.dir, "results", name), rows, driver_version=driver, date=date)

    def test_table_and_svg(self):
        # Written in reverse date order: rows must still come out sorted by date.
        self.write_run("b/new.json", "555.42", "2024-06-01T10:00:00+00:00", 1.1)
        self.write_run("a/old.json", "550.54", "2024-05-01T10:00:00+00:00", 1.0)
        write_results(os.path.join(self.dir, "results", "other.json"),
                      bench_rows("memory/opencl/triad", 1.0, {"byte_per_s": 1.0}), device="AMD MI300X")
        svg = os.path.join(self.dir, "history.svg")
        # The plain SVG renderer (what a machine without matplotlib gets).
        code, out, err = run(HISTORY, "--device", "h100", "--results", os.path.join(self.dir, "results"),
                             "--plot", svg, env={"ARCHBENCH_CHARTS": "svg"})
        self.assertEqual(code, 0, out + err)
        lines = out.strip().splitlines()
        self.assertEqual(len(lines), 3, out)
        self.assertIn("compute float (flop/s)", lines[0])
        self.assertIn("latency largest ws (ns)", lines[0])
        self.assertTrue(lines[1].startswith("550.54"), out)
        self.assertTrue(lines[2].startswith("555.42"), out)
        old, new = lines[1].split(), lines[2].split()
        # old: int 15 T, float 20 T, triad 3 T, copy 2.5 T, max 3.2 T, latency 30 and 600 ns.
        self.assertIn("20 T", lines[1])
        self.assertIn("22 T", lines[2])
        self.assertIn("3.2 T", lines[1])
        self.assertEqual(old[-2:], ["30", "600"])
        self.assertEqual(new[-2:], ["27.27", "545.5"])
        root = ET.parse(svg).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        self.assertTrue(root.findall(".//{http://www.w3.org/2000/svg}polyline"))
        # The same charts through matplotlib, where it is importable.
        png = os.path.join(self.dir, "history.png")
        code, _, err = run(HISTORY, "--device", "h100", "--results", os.path.join(self.dir, "results"), "--plot", png)
        if charts.pyplot()[0] is None:
            self.assertEqual(code, 2, err)  # a PNG needs matplotlib: said, not a traceback
        else:
            self.assertEqual(code, 0, err)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

        code, md, _ = run(HISTORY, "--device", "H100", "--results", os.path.join(self.dir, "results"),
                          "--format", "markdown")
        self.assertEqual(code, 0)
        self.assertTrue(md.startswith("| driver_version | runtime_version | archbench | date | runs |"), md)

    def test_archbench_versions_are_separate_rows(self):
        # The same driver measured by two archbench versions: the benchmarks themselves may have
        # changed, so the runs are not merged into one row.
        self.write_run("a/one.json", "550.54", "2024-05-01T10:00:00+00:00", 1.0)
        rows = bench_rows("memory/opencl/triad", 1000.0, {"byte_per_s": 9e12}, cv=0.0)
        write_results(os.path.join(self.dir, "results", "b", "two.json"), rows, driver_version="550.54",
                      date="2024-05-02T10:00:00+00:00", archbench_version="0.2.0")
        code, out, err = run(HISTORY, "--device", "h100", "--results", os.path.join(self.dir, "results"))
        self.assertEqual(code, 0, out + err)
        lines = out.strip().splitlines()
        self.assertEqual(len(lines), 3, out)
        self.assertIn("0.2.0", lines[2])
        self.assertIn("9 T", lines[2])
        self.assertNotIn("9 T", lines[1])

    def test_no_matching_device(self):
        self.write_run("a.json", "550.54", "2024-05-01T10:00:00+00:00", 1.0)
        code, out, err = run(HISTORY, "--device", "MI300", "--results", os.path.join(self.dir, "results"))
        self.assertEqual(code, 2)
        self.assertIn("no results for a device matching", err)
        self.assertNotIn("Traceback", err)


if __name__ == "__main__":
    unittest.main()
