"""Hostile and huge inputs and the tools' own outputs (issue 40): every output is written whole or
not at all (a late failure leaves the previous file intact; a symlink is written through), the
plateau finder is not cubic, name_format takes plain {axis} fields only, a lone surrogate is bad
input naming the file, control characters never reach an SVG, and compare and history pair only
runs of one device model. Inputs that every tool must refuse are in tests/data/bad/.

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import base64
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

from test_bad_inputs import BAD, GOOD_CONTEXT, TOOLS, good_results, tool

sys.path.insert(0, TOOLS)
from archbench import cli  # noqa: E402
from archbench.analysis.roofline import find_plateaus  # noqa: E402

PREVIOUS = "<html>the previous page, complete</html>\n"


def latency_results(path, points, device=GOOD_CONTEXT["device"]):
    """A results file (schema 1) of one latency sweep of `points` working sets, three levels."""
    rows = []
    for i in range(points):
        ws = 1024 + 64 * i
        ns = 1.0 if ws < 32768 else 5.0 if ws < 1 << 20 else 20.0
        name = f"latency/opencl/chase/bytes:{ws}/manual_time"
        rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                     "repetition_index": 0, "iterations": 1, "real_time": ns * 100, "cpu_time": 1.0,
                     "time_unit": "ns", "ns_per_access": ns * (1 + (i % 7) / 100)})
    with open(path, "w") as f:
        json.dump({"context": dict(GOOD_CONTEXT, device=device), "benchmarks": rows}, f)
    return path


def limited_write(size):
    """For preexec_fn: files larger than size bytes cannot be written (EFBIG, as a full disk)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return limit


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.good = good_results(self.p("good.json"))

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, name):
        return os.path.join(self.tmp.name, name)

    def previous(self, name, text=PREVIOUS):
        with open(self.p(name), "w") as f:
            f.write(text)
        return self.p(name)

    def assertBad(self, result, named):
        code, out, err = result
        self.assertEqual(code, 2, out + err)
        self.assertNotIn("Traceback", err)
        self.assertIn(named, err)


class AtomicOutputTest(Case):
    """1. An output is replaced only when complete."""

    def test_writer_keeps_previous_on_failure_and_writes_through_symlink(self):
        target = self.previous("target.html")
        link = self.p("link.html")
        os.symlink(target, link)
        cli.write_file(link, "new")
        self.assertTrue(os.path.islink(link))
        with open(target) as f:
            self.assertEqual(f.read(), "new")
        os.chmod(self.tmp.name, 0o500)  # no temporary file can be made beside it
        try:
            if os.access(self.tmp.name, os.W_OK):
                self.skipTest("running as root: a read-only folder is writable")
            with self.assertRaises(cli.InputError):
                cli.write_file(target, "newer")
        finally:
            os.chmod(self.tmp.name, 0o700)
        with open(target) as f:
            self.assertEqual(f.read(), "new")
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["good.json", "link.html", "target.html"])

    def test_devices_are_written_in_place(self):
        cli.write_file(os.devnull, "x")
        self.assertTrue(os.path.exists(os.devnull))

    def test_full_disk_leaves_previous_output(self):
        """Each tool's output under a file-size limit (a full disk): exit 2, the old file intact."""
        big = latency_results(self.p("lat.json"), 300)
        cases = {
            "report -o": (["report", "-o", "{out}", big], "page.html"),
            "compare --markdown": (["compare", self.good, self.good, "--markdown", "{out}"], "c.md"),
            "merge -o": (["merge", "-o", "{out}", big], "m.json"),
            "roofline --json": (["roofline", big, "--svg", self.p("r.svg"), "--json", "{out}"], "r.json"),
            "history --plot": (["history", "--results", self.p("one"), "--plot", "{out}"], "h.svg"),
        }
        os.makedirs(self.p("one"))
        latency_results(os.path.join(self.p("one"), "a.json"), 300)
        for what, (argv, name) in cases.items():
            out = self.previous(name, PREVIOUS * 20)
            argv = [a.replace("{out}", out) for a in argv]
            p = subprocess.run([sys.executable, os.path.join(TOOLS, f"archbench_{argv[0]}.py"), *argv[1:]],
                               capture_output=True, text=True, preexec_fn=limited_write(200))
            with open(out) as f:
                self.assertEqual(f.read(), PREVIOUS * 20, f"{what}: previous output changed\n{p.stderr}")
            self.assertEqual(p.returncode, 2, f"{what}: {p.stderr}")
            self.assertIn("cannot write: File too large", p.stderr, what)
            self.assertEqual([n for n in os.listdir(self.tmp.name) if n.endswith(".tmp")], [], what)


class PlateauTest(Case):
    """2. The report's plateau finder is not cubic in the sweep's length."""

    def test_long_sweep_is_fast(self):
        values = [lv * (1 + (i % 7) / 100) for lv in (1.0, 3.0, 10.0, 30.0) for i in range(10000)]
        start = time.monotonic()
        spans = find_plateaus(values, 0.15)
        self.assertLess(time.monotonic() - start, 20)  # cubic: days; under a second here
        self.assertEqual(spans, [(0, 10000), (10000, 20000), (20000, 30000), (30000, 40000)])

    def test_report_of_40000_points(self):
        path = latency_results(self.p("lat.json"), 40000)
        start = time.monotonic()
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "archbench_report.py"), "-o", self.p("p.html"),
                            path], capture_output=True, text=True, env=dict(os.environ, ARCHBENCH_CHARTS="svg"),
                           timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(time.monotonic() - start, 120)  # about 6 s; cubic cost: far over 600 s
        with open(self.p("p.html")) as f:
            self.assertIn("level 3 (1 MiB", f.read())


class NameFormatTest(Case):
    """3. name_format takes plain {axis} fields only."""

    def test_only_plain_fields(self):
        for name in ("name-format-attribute.json", "name-format-width.json"):
            path = os.path.join(BAD, name)
            start = time.monotonic()
            self.assertBad(tool("compare", path, self.good), path)
            self.assertLess(time.monotonic() - start, 20, name)


class UntrustedTextTest(Case):
    """4. Decoding errors are bad input; control characters never reach an output unescaped."""

    def test_lone_surrogate_is_bad_input(self):
        path = os.path.join(BAD, "lone-surrogate.json")
        page = self.previous("page.html")
        self.assertBad(tool("report", "-o", page, path), path)
        with open(page) as f:
            self.assertEqual(f.read(), PREVIOUS)
        self.assertBad(tool("compare", path, self.good), path)

    def test_control_characters_in_charts(self):
        device = "dev\x07\x1b[31m\x00\u202e\x0c<&>"
        run = latency_results(self.p("ctl.json"), 40, device=device)
        code, out, err = tool("report", "-o", self.p("page.html"), run, self.good)
        self.assertEqual(code, 0, err)
        with open(self.p("page.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertNotRegex(page, "[\x00-\x08\x0b\x0c\x0e-\x1f\u202e]")
        for data in re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", page):
            ET.fromstring(base64.b64decode(data))  # parses: no control character
        code, out, err = tool("roofline", run, "--svg", self.p("r.svg"))
        self.assertIn(code, (0, 2), err)
        if os.path.exists(self.p("r.svg")):
            ET.parse(self.p("r.svg"))
        self.assertNotRegex(out + err, "[\x00-\x08\x0b-\x1f]")

    def test_escape_helpers(self):
        for text in ("\ud800", "\x1b[2J", "a\u2028b", "$\\frac{$"):
            for escape in (cli.term, cli.md, cli.html, cli.label):
                escape(text).encode("utf-8")  # no lone surrogate left
                self.assertNotRegex(escape(text), "[\x00-\x1f\u2028\u202e]")
        self.assertEqual(cli.label("$x$"), r"\$x\$")


class DevicesTest(Case):
    """5. Compare and history pair runs of one device model only."""

    def test_compare_refuses_other_device(self):
        other = good_results(self.p("other.json"), device="NVIDIA H100 80GB HBM3")
        code, out, err = tool("compare", self.good, other)
        self.assertEqual(code, 2, out + err)
        self.assertIn("devices differ", err)
        code, out, err = tool("compare", self.good, other, "--across-devices")
        self.assertEqual(code, 0, out + err)
        self.assertTrue(out.startswith("devices differ"), out)
        self.assertIn("0 regression(s)", out)

    def test_history_does_not_join_two_models(self):
        folder = self.p("runs")
        os.makedirs(folder)
        good_results(os.path.join(folder, "a.json"), device="NVIDIA H100 80GB HBM3")
        good_results(os.path.join(folder, "b.json"), device="NVIDIA H100 PCIe")
        code, out, err = tool("history", "--results", folder, "--device", "H100")
        self.assertEqual(code, 2, out + err)
        self.assertIn("NVIDIA H100 80GB HBM3", err)
        self.assertIn("NVIDIA H100 PCIe", err)
        code, out, err = tool("history", "--results", folder, "--device", "nvidia h100 pcie")
        self.assertEqual(code, 0, err)
        code, out, err = tool("history", "--results", folder, "--device", "PCIe")
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
