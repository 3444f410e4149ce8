"""Measured traffic (archbench --traffic): the agreement table, the roofline placement arithmetic,
the measured charts' labels and precisions, and --program from a recorded raw file; synthetic
JSON only (stdlib unittest). Run from the repository root:
python3 -m unittest discover -s tests/tools -v
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from archbench.analysis import traffic as tf  # noqa: E402
from archbench.records import results as ar  # noqa: E402
from test_compare import CONTEXT  # noqa: E402

GIB = 1 << 30


def traffic(l1=0.0, l2=0.0, dram=0.0, fp32=0.0, fp64=0.0, fp16=None, shared=0.0):
    """Counters of one launch: bytes per level (split 2:1 into reads and writes) and flops."""
    c = {}
    for level, total in (("l1", l1), ("l2", l2), ("dram", dram)):
        c[f"traffic_{level}_read_bytes"], c[f"traffic_{level}_write_bytes"] = total * 2 / 3, total / 3
    c["traffic_shared_read_bytes"], c["traffic_shared_write_bytes"] = shared, 0.0
    c["exec_flops_fp32"], c["exec_flops_fp64"] = fp32, fp64
    if fp16 is not None:
        c["exec_flops_fp16"] = fp16
    return c


def entry(name, seconds, cost, counters):
    """One schema-2 iteration row: a launch of `seconds` doing `cost`, with its traffic counters."""
    axes, fmt = ar.axes_of_name(name)
    moved = cost.get("bytes_read", 0) + cost.get("bytes_written", 0)
    rates = {"flop_per_s": cost["flops"] / seconds} if cost.get("flops") else {}
    if moved:
        rates["byte_per_s"] = moved / seconds
    full = name + "/manual_time"
    return dict({"name": full, "run_name": full, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
                 "threads": 1, "iterations": 10, "real_time": seconds * 1e9, "cpu_time": 1.0, "time_unit": "ns",
                 "axes": axes, "name_format": fmt, "cost": cost}, **rates, **counters)


N = 1 << 27  # triad elements (doubles): 2 GiB read, 1 GiB written
ROWS = [
    # name, seconds, cost, counters
    ("compute/cuda/mad/float4", 1e-3, {"flops": 6.4e10}, traffic(l1=4e6, l2=4e6, dram=4e6, fp32=6.4e10)),
    ("compute/cuda/mad/double", 2e-3, {"flops": 6.4e10}, traffic(l1=4e6, l2=4e6, dram=4e6, fp64=6.4e10)),
    ("compute/cuda/mad/half2", 1e-3, {"flops": 6.4e10}, traffic(l1=4e6, l2=4e6, dram=4e6, fp16=3.2e10)),
    ("memory/cuda/triad/double", 1e-3, {"flops": 2 * N, "bytes_read": 16 * N, "bytes_written": 8 * N},
     traffic(l1=24 * N, l2=24 * N, dram=24 * N * 1.02, fp64=2 * N)),
    ("memory/cuda/copy/double", 1e-3, {"flops": 0, "bytes_read": 8 * N, "bytes_written": 8 * N},
     traffic(l1=16 * N, l2=16 * N, dram=16 * N * 0.8)),
    ("cache/cuda/read/bytes:65536", 1e-4, {"flops": 0, "bytes_read": 64 * GIB}, traffic(l1=64 * GIB, l2=1e7, dram=1e5)),
    ("flops/cuda/dram/float/flops:8", 1e-3, {"flops": 8 * N, "bytes_read": 4 * N, "bytes_written": 4 * N},
     traffic(l1=8 * N, l2=8 * N, dram=8 * N, fp32=8 * N + 1000)),
]


def load(path):
    with open(path) as f:
        return json.load(f)


def write_run(path, rows=ROWS, **context):
    ctx = dict(CONTEXT, backend="cuda", schema_version="2", cache_bytes=str(50 << 20),
               traffic="CUPTI range profiler", traffic_missing="none")
    ctx.update(context)
    with open(path, "w") as f:
        json.dump({"context": ctx, "benchmarks": [entry(*r) for r in rows]}, f)


class Arithmetic(unittest.TestCase):
    def test_levels_flops_and_intensities_from_counters(self):
        p = tf.placement(traffic(l1=400.0, l2=200.0, dram=100.0, fp64=800.0, fp32=10.0, shared=100.0), 2.0)
        self.assertEqual(p["precision"], "fp64")
        self.assertEqual(p["bytes"], {"L1": 500.0, "L2": 200.0, "DRAM": 100.0})  # shared counts at L1
        self.assertEqual(p["ai"], {"L1": 1.6, "L2": 4.0, "DRAM": 8.0})
        self.assertEqual(p["flop_per_s"], 400.0)
        self.assertEqual(p["byte_per_s"]["DRAM"], 50.0)

    def test_a_level_not_measured_is_absent_and_tensor_ops_are_a_precision(self):
        c = {"traffic_l1_read_bytes": 10.0, "exec_tensor_ops_src_fp16_dst_fp32": 300.0,
             "exec_tensor_ops_src_bf16_dst_fp32": 100.0, "exec_flops_fp32": 5.0}
        p = tf.placement(c, 1.0)
        self.assertEqual(set(p["bytes"]), {"L1"})
        self.assertEqual((p["precision"], p["flops"]), ("tensor", 400.0))

    def test_the_bound_is_the_ceiling_used_most(self):
        p = tf.placement(traffic(l1=3e12, l2=2e12, dram=1.5e12, fp32=1e12), 1.0)
        name, use, every = tf.bound(p, {"fp32": 60e12}, {"L1": 30e12, "L2": 10e12, "DRAM": 3e12})
        self.assertEqual(name, "DRAM")
        self.assertAlmostEqual(use, 0.5)
        self.assertAlmostEqual(every["L2"], 0.2)
        # With no flops the kernel is still judged by its bytes; with nothing known, not at all.
        self.assertEqual(tf.bound(tf.placement(traffic(dram=1e12), 1.0), {}, {"DRAM": 2e12})[:2], ("DRAM", 0.5))
        self.assertEqual(tf.bound(tf.placement({}, 1.0), {}, {}), (None, None, {}))


class WithRun(unittest.TestCase):
    """A synthetic run with traffic counters in a temporary folder (self.run)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run = os.path.join(self.tmp.name, "run.json")
        write_run(self.run)

    def tearDown(self):
        self.tmp.cleanup()


class Agreement(WithRun):
    def test_verdicts(self):
        _, rows = tf.measured([self.run])
        table = {t["benchmark"]: t for t in tf.agreement(rows)[0]}
        self.assertEqual(table["compute/cuda/mad/float4"]["flops_verdict"], "exact")
        self.assertEqual(table["compute/cuda/mad/float4"]["dram_verdict"], "not claimed")
        self.assertEqual(table["compute/cuda/mad/half2"]["flops_verdict"], "explained")
        self.assertIn("HFMA2", table["compute/cuda/mad/half2"]["flops_reason"])
        self.assertEqual(table["memory/cuda/triad/double"]["flops_verdict"], "exact")
        self.assertEqual(table["memory/cuda/triad/double"]["dram_verdict"], "within 5%")
        self.assertAlmostEqual(table["memory/cuda/triad/double"]["dram_ratio"], 1.02)
        self.assertEqual(table["memory/cuda/copy/double"]["dram_verdict"], "FINDING")
        self.assertEqual(table["cache/cuda/read/bytes:65536"]["flops_verdict"], "exact")  # none, and none executed
        self.assertEqual(table["cache/cuda/read/bytes:65536"]["dram_verdict"], "not claimed")
        self.assertEqual(table["flops/cuda/dram/float/flops:8"]["flops_verdict"], "FINDING")
        self.assertEqual(table["flops/cuda/dram/float/flops:8"]["dram_verdict"], "within 5%")

    def test_hfma2_moves_and_the_dot_reduction(self):
        """H100 numbers: a float kernel's fp16 'flops' are ptxas' HFMA2 moves (2 per work-item),
        reported apart; the dot's tree reduction is exactly groups x 255 adds more than the model."""
        n = 1 << 27
        rows = [("compute/cuda/mul/float", 2e-3, {"flops": 70865676288}, traffic(fp32=70865676288, fp16=405504)),
                ("flops/cuda/dram/float/flops:1", 2e-4, {"flops": 67108864, "bytes_read": 1 << 28,
                                                         "bytes_written": 1 << 28},
                 traffic(dram=1 << 29, fp32=67108864, fp16=8388608)),
                ("memory/cuda/dot/double", 8e-4, {"flops": 2 * n, "bytes_read": 16 * n, "bytes_written": 8448},
                 traffic(dram=16 * n, fp64=2 * n + 1056 * 255)),
                ("memory/cuda/dot/float", 8e-4, {"flops": 2 * n, "bytes_read": 8 * n, "bytes_written": 4224},
                 traffic(dram=8 * n, fp32=2 * n + 1056 * 255 + 1)),
                ("compute/cuda/mul/double", 2e-3, {"flops": 1e9}, traffic(fp64=1e9, fp32=10.0))]
        write_run(self.run, rows=rows)
        _, measured = tf.measured([self.run])
        table = {t["benchmark"]: t for t in tf.agreement(measured)[0]}
        for name in ("compute/cuda/mul/float", "flops/cuda/dram/float/flops:1"):
            self.assertEqual(table[name]["flops_verdict"], "exact", table[name])
            self.assertIn("HFMA2", table[name]["other_reason"])
        self.assertEqual(table["flops/cuda/dram/float/flops:1"]["other_flops"], 8388608)
        self.assertEqual(table["memory/cuda/dot/double"]["flops_verdict"], "explained")
        self.assertIn("269280 flops", table["memory/cuda/dot/double"]["flops_reason"])
        self.assertEqual(table["memory/cuda/dot/float"]["flops_verdict"], "FINDING")  # one flop more
        self.assertEqual(table["compute/cuda/mul/double"]["flops_verdict"], "FINDING")  # fp32 is not a move
        from archbench.analysis import roofline as rl
        from archbench.render import roofline as rr
        by = {r["name"]: r for r in measured}
        self.assertEqual(rl.place(by["compute/cuda/mul/float"])["flops"], 70865676288)
        self.assertEqual(rl.place(by["compute/cuda/mul/float"])["precision"], "fp32")
        self.assertEqual(rr.short_name("void stencil_spmv<double>(double const*, double*, int)"),
                         "stencil_spmv<double>")

    def test_moves_without_a_precision_and_the_texel_centres(self):
        """H100 numbers: kernels with no precision axis (local read, constant chase, cache rmw)
        show fp16 moves only, reported apart (a half family's are not); image's CUDA read adds 2
        texel-centre adds a pixel read to the model's 4 a pixel and 6 a work-item, exactly."""
        items, pixels = 135168, 262144
        rows = [("local/cuda/read/stride:1", 1e-3, {"flops": items * 32768, "bytes_read": items * 32768 * 4},
                 traffic(fp32=items * 32768, fp16=2 * items)),
                ("constant/cuda/chase/stride:1", 1e-3, {"flops": 0, "bytes_read": 1107296256},
                 traffic(fp16=540672)),
                ("compute/cuda/mad/int", 1e-3, {"flops": 0}, traffic(fp16=540672)),
                ("image/cuda/read/square:4194304", 1e-4, {"flops": pixels * 70, "bytes_read": pixels * 256,
                                                          "bytes_written": pixels * 4},
                 traffic(fp32=pixels * 102, fp16=2 * pixels)),
                ("image/cuda/read/square:65536", 1e-4, {"flops": 4096 * 70, "bytes_read": 4096 * 256,
                                                        "bytes_written": 4096 * 4},
                 traffic(fp32=4096 * 101))]
        write_run(self.run, rows=rows)
        _, measured = tf.measured([self.run])
        table = {t["benchmark"]: t for t in tf.agreement(measured)[0]}
        self.assertEqual(table["local/cuda/read/stride:1"]["flops_verdict"], "exact")
        self.assertEqual(table["local/cuda/read/stride:1"]["other_flops"], 2 * items)
        self.assertEqual(table["constant/cuda/chase/stride:1"]["flops_verdict"], "exact")
        self.assertEqual(table["compute/cuda/mad/int"]["other_flops"], 0)  # a half family: not moves
        self.assertEqual(table["image/cuda/read/square:4194304"]["flops_verdict"], "explained")
        self.assertIn(f"{2 * 16 * pixels} flops", table["image/cuda/read/square:4194304"]["flops_reason"])
        self.assertEqual(table["image/cuda/read/square:65536"]["flops_verdict"], "FINDING")  # one add short

    def test_command_text_and_json(self):
        out = os.path.join(self.tmp.name, "agreement.json")
        p = subprocess.run([sys.executable, "-m", "archbench", "agreement", self.run, "--json", out],
                           capture_output=True, text=True, cwd=TOOLS)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("FINDING: memory/cuda/copy/double: DRAM bytes", p.stdout)
        self.assertIn("FINDING: flops/cuda/dram/float/flops:8: executed", p.stdout)
        self.assertIn("flops: 1 FINDING, 5 exact, 1 explained", p.stdout)
        doc = load(out)
        self.assertEqual(doc["summary"]["dram_verdict"], {"FINDING": 1, "not claimed": 4, "within 5%": 2})

    def test_a_run_without_traffic_counters_is_bad_input(self):
        plain = os.path.join(self.tmp.name, "plain.json")
        write_run(plain, rows=[(n, s, c, {}) for n, s, c, _ in ROWS], traffic="none: --traffic not given")
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_agreement.py"), plain],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("none: --traffic not given", p.stderr)


class Charts(WithRun):
    """The roofline tool on a run with traffic counters: the three measured charts (plain SVG)."""

    def roofline(self, *args):
        env = dict(os.environ, ARCHBENCH_CHARTS="svg")
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_roofline.py"), *args],
                           capture_output=True, text=True, env=env, cwd=self.tmp.name)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def texts(self, path):
        return [t.text or "" for t in ET.parse(path).iter("{http://www.w3.org/2000/svg}text")]

    def test_three_charts_labelled_by_level_and_precision(self):
        out = self.roofline(self.run, "--svg", "r.svg", "--json", "r.json")
        for kind in ("dram", "l1", "hierarchical"):
            self.assertIn(f"wrote r-{kind}.svg", out)
        dram, hier = self.texts(os.path.join(self.tmp.name, "r-dram.svg")), \
            self.texts(os.path.join(self.tmp.name, "r-hierarchical.svg"))
        # Ceilings labelled on their lines: the textbook roof of the H100 beside the empirical one.
        self.assertTrue(any(t.startswith("textbook device memory") for t in dram))
        self.assertTrue(any(t.startswith("textbook float") for t in dram))
        self.assertFalse(any("L1/shared" in t for t in dram))  # the original model: device memory only
        self.assertTrue(any("textbook L1/shared" in t for t in hier))
        self.assertTrue(any("levels measured: L1, L2, DRAM" in t for t in hier))
        self.assertFalse(any("L3" in t for t in hier))  # no level the H100 does not have
        with open(os.path.join(self.tmp.name, "r-hierarchical.svg")) as f:
            svg = f.read()
        titles = [t.text for t in ET.parse(os.path.join(self.tmp.name, "r-hierarchical.svg"))
                  .iter("{http://www.w3.org/2000/svg}title")]
        self.assertIn("memory/cuda/triad/double DRAM (fp64)", titles)
        self.assertIn("compute/cuda/mad/float4 L1 (fp32)", titles)
        self.assertIn(tf_color("fp64"), svg)
        self.assertIn('fill="none" stroke="#d62728"', svg)  # fp64 on a float chart: hollow
        # Points that cannot be placed (no flops executed) are counted, not drawn.
        self.assertTrue(any("2 not placed" in t for t in hier))
        doc = load(os.path.join(self.tmp.name, "r.json"))
        triad = next(m for m in doc["measured"] if m["name"] == "memory/cuda/triad/double")
        self.assertAlmostEqual(triad["ai"]["DRAM"], 2 / (24 * 1.02))

    def test_without_traffic_the_chart_says_no_level_was_measured(self):
        plain = os.path.join(self.tmp.name, "plain.json")
        write_run(plain, rows=[(n, s, c, {}) for n, s, c, _ in ROWS])
        out = self.roofline(plain, "--svg", "p.svg")
        self.assertIn("levels measured: none", out)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "p-dram.svg")))
        self.assertTrue(any("levels measured: none" in t for t in self.texts(os.path.join(self.tmp.name, "p.svg"))))


def tf_color(precision):
    from archbench.render import roofline
    return roofline.PREC_COLORS[precision]


class Program(unittest.TestCase):
    """--program --report: kernels of a recorded raw file placed on the textbook roof."""

    def test_kernels_placed_with_their_bound(self):
        with tempfile.TemporaryDirectory() as tmp:
            raw = os.path.join(tmp, "raw.jsonl")
            lines = [{"type": "process", "pid": 1, "command": "cg", "start_ns": 0, "date": "2026"},
                     {"type": "profiler", "chip": "GH100", "passes": 3, "metrics": 20, "device": 0,
                      "device_name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0", "metric_set": "traffic",
                      "traffic_counters": "...", "traffic_missing": ""}]
            # stencil: 1 ms, DRAM-bound at 2.5 TB/s; dot: fp64 at 10 TFLOP/s from L1; two launches each.
            for seq, (name, c) in enumerate([("stencil", traffic(l1=4e9, l2=3e9, dram=2.5e9, fp64=1e9)),
                                             ("dot", traffic(l1=1e9, l2=1e8, dram=1e7, fp64=1e10))] * 2):
                lines.append({"type": "kernel", "name": name, "mangled": name, "seq": seq, "invocation": seq // 2,
                              "grid": [1, 1, 1], "block": [1, 1, 1], "host_ns": 0, "context": 1,
                              "duration_ns": 1e6, "metrics": {}, "topdown": {}, "traffic": c})
            lines.append({"type": "shape", "name": "stencil", "mangled": "stencil", "grid": [1, 1, 1],
                          "block": [1, 1, 1], "launches": 10, "profiled": 2, "unreplayable": 0,
                          "unprofiled_records": 8, "unprofiled_ns": 8e6})
            lines.append({"type": "shape", "name": "dot", "mangled": "dot", "grid": [1, 1, 1], "block": [1, 1, 1],
                          "launches": 2, "profiled": 2, "unreplayable": 0, "unprofiled_records": 0,
                          "unprofiled_ns": 0})
            with open(raw, "w") as f:
                f.write("\n".join(json.dumps(r) for r in lines) + "\n")
            env = dict(os.environ, ARCHBENCH_CHARTS="svg")
            p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_roofline.py"), "--program", "--report",
                                raw, "--svg", os.path.join(tmp, "cg"), "--json", os.path.join(tmp, "cg.json")],
                               capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = load(os.path.join(tmp, "cg.json"))
            k = {r["kernel"]: r for r in doc["kernels"]}
            self.assertEqual(doc["roof"]["source"], "textbook")
            self.assertAlmostEqual(k["stencil"]["time_share"], 10 / 12)
            self.assertEqual((k["stencil"]["bound"], k["dot"]["bound"]), ("DRAM", "fp64 peak"))
            self.assertAlmostEqual(k["stencil"]["of_bound"], 2.5e12 / 3352e9)
            self.assertAlmostEqual(k["dot"]["of_bound"], 1e13 / 33.5e12)
            self.assertAlmostEqual(k["stencil"]["bytes"]["DRAM"], 25e9)  # 10 launches' worth
            self.assertIn("stencil", p.stdout)
            names = [t.text for t in ET.parse(os.path.join(tmp, "cg-hierarchical.svg"))
                     .iter("{http://www.w3.org/2000/svg}text")]
            self.assertIn("stencil", names)
            self.assertIn("dot", names)


if __name__ == "__main__":
    unittest.main()
