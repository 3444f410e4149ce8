"""Every tool's command line on every malformed file of tests/data/bad/ that it reads: exit 2, one
line on stderr that names the file, no traceback; and outputs that cannot be written (issue 23).

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
BAD = os.path.join(ROOT, "tests", "data", "bad")
RESULTS = sorted(glob.glob(os.path.join(BAD, "*.json")))
RAW = sorted(glob.glob(os.path.join(BAD, "*.jsonl"))) + [os.path.join(BAD, n) for n in ("empty.json", "truncated.json")]
GOOD_CONTEXT = {"device": "pthread-skylake-avx512-AMD EPYC", "driver_version": "3.1+debian", "backend": "opencl"}


def tool(name, *args):
    """(exit code, stdout, stderr) of tools/archbench_NAME.py ARGS."""
    p = subprocess.run([sys.executable, os.path.join(TOOLS, f"archbench_{name}.py"), *args],
                       capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def good_results(path, device=GOOD_CONTEXT["device"]):
    """A small valid results file (schema 1): two benchmarks, three repetitions."""
    rows = [{"name": f"{n}/manual_time", "run_name": f"{n}/manual_time", "run_type": "iteration",
             "repetitions": 3, "repetition_index": i, "iterations": 10, "real_time": t * (1 + i / 100),
             "cpu_time": 1.0, "time_unit": "ns", key: rate}
            for n, t, key, rate in (("compute/opencl/mad/float", 1000.0, "flop_per_s", 1e9),
                                    ("memory/opencl/triad/double", 2000.0, "byte_per_s", 1e10)) for i in range(3)]
    with open(path, "w") as f:
        json.dump({"context": dict(GOOD_CONTEXT, device=device), "benchmarks": rows}, f)
    return path


class BadInputsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.good = good_results(os.path.join(self.tmp.name, "good.json"))

    def tearDown(self):
        self.tmp.cleanup()

    def assertRefused(self, result, path, what):
        code, out, err = result
        self.assertEqual(code, 2, f"{what}: exit {code}\n{out}{err}")
        self.assertNotIn("Traceback", err, what)
        self.assertEqual(len(err.strip().splitlines()), 1, f"{what}: stderr not one line:\n{err}")
        self.assertIn(path, err, f"{what}: the file is not named:\n{err}")

    def commands(self, path):
        """The command lines that read a results file, by name."""
        folder = os.path.join(self.tmp.name, "folder-" + os.path.basename(path))
        os.makedirs(folder, exist_ok=True)
        with open(path, "rb") as src, open(os.path.join(folder, os.path.basename(path)), "wb") as dst:
            dst.write(src.read())
        in_folder = os.path.join(folder, os.path.basename(path))
        return {
            "compare BASE": (lambda: tool("compare", path, self.good), path),
            "compare NEW": (lambda: tool("compare", self.good, path), path),
            "history": (lambda: tool("history", "--results", folder), in_folder),
            "roofline": (lambda: tool("roofline", path, "--svg", os.path.join(self.tmp.name, "r.svg")), path),
            "variability": (lambda: tool("variability", path), path),
            "peer": (lambda: tool("peer", path), path),
            "merge": (lambda: tool("merge", "-o", os.path.join(self.tmp.name, "m.json"), path), path),
        }

    def test_results_files(self):
        self.assertGreaterEqual(len(RESULTS), 10)
        nothing_compared = {"all-nan.json": ("compare BASE", "compare NEW", "variability", "peer")}
        for path in RESULTS:
            name = os.path.basename(path)
            for what, (command, named) in self.commands(path).items():
                if name == "all-nan.json" and what not in nothing_compared[name]:
                    continue  # NaN figures are valid JSON: only a comparison must refuse them
                with self.subTest(file=name, command=what):
                    result = command()
                    if name == "all-nan.json":
                        self.assertEqual(result[0], 2, result)
                        self.assertNotIn("Traceback", result[2])
                        continue
                    self.assertRefused(result, named, f"{what} {name}")

    def test_raw_record_files(self):
        for path in RAW:
            name = os.path.basename(path)
            with self.subTest(file=name, command="trace report"):
                self.assertRefused(tool("trace", "report", path, "--no-symbolize"), path, f"trace report {name}")
            with self.subTest(file=name, command="topdown --report"):
                self.assertRefused(tool("topdown", "--report", path), path, f"topdown --report {name}")
            with self.subTest(file=name, command="topdown --timeline --report"):
                self.assertRefused(tool("topdown", "--timeline", "--report", path), path,
                                   f"topdown --timeline --report {name}")
            with self.subTest(file=name, command="pcsample --report"):
                self.assertRefused(tool("pcsample", "--report", path), path, f"pcsample --report {name}")

    def test_unwritable_outputs(self):
        nowhere = os.path.join(self.tmp.name, "no-such-folder", "out")
        merged = os.path.join(self.tmp.name, "merged.json")
        with open(self.good) as f:
            doc = json.load(f)
        doc["benchmarks"] = [dict(r, device_selector=f"opencl:0.{gpu}") for gpu in range(3) for r in doc["benchmarks"]]
        with open(merged, "w") as f:
            json.dump(doc, f)
        raw = os.path.join(self.tmp.name, "raw.jsonl")
        with open(raw, "w") as f:
            f.write('{"type": "process", "pid": 1, "start_ns": 0, "end_ns": 10, "command": "prog"}\n')
        for what, args in (("compare", ("compare", self.good, self.good, "--markdown", nowhere)),
                           ("roofline", ("roofline", self.good, "--svg", nowhere)),
                           ("merge", ("merge", "-o", nowhere, self.good)),
                           ("variability", ("variability", merged, "--json", nowhere)),
                           ("trace report", ("trace", "report", raw, "--no-symbolize", "--json", nowhere))):
            with self.subTest(command=what):
                self.assertRefused(tool(*args), nowhere, what)

    def test_control_characters_never_reach_the_terminal(self):
        raw = os.path.join(self.tmp.name, "evil.jsonl")
        with open(raw, "w") as f:
            f.write('{"type": "process", "pid": 1, "start_ns": 0, "end_ns": 100, "command": "p"}\n'
                    '{"type": "queue", "id": "q"}\n'
                    '{"type": "kernel", "name": "k\\u001b[31mRED\\u202e", "queue": "q", "start_ns": 1, "end_ns": 50}\n')
        code, out, err = tool("trace", "report", raw, "--no-symbolize")
        self.assertEqual(code, 0, err)
        self.assertIn("k\\x1b[31mRED\\u202e", out)
        self.assertNotIn("\x1b", out + err)
        self.assertNotIn("\u202e", out + err)

    def test_debug_shows_the_traceback(self):
        code, _, err = tool("compare", os.path.join(BAD, "truncated.json"), self.good, "--debug")
        self.assertEqual(code, 2)
        self.assertIn("Traceback", err)


if __name__ == "__main__":
    unittest.main()
