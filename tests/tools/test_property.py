"""Property test (issue 40): the tools fed random and mutated results files (any text in any string
field, lone surrogates and control characters included; huge, tiny and non-finite numbers; missing
fields; wrong types; broken JSON) never crash and never hang, and never damage a previous output.
Every run ends within seconds with exit 0 or 2 (or the finding its tool exists for: compare's 3,
variability's 4, and 1 where merge or variability read a run marked failed), without "internal
error", and where it exits 2 its output file is the previous one, byte for byte.

A fixed seed and a bounded number of cases; the tools run in this process (their main(argv)), so
the test stays well under a minute. Run from the repository root:
python3 -m unittest discover -s tests/tools -v
"""

import contextlib
import io
import json
import os
import random
import signal
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from archbench.commands import compare, history, merge, report, roofline, variability  # noqa: E402

SEED = 40
CASES = 150         # mutated files; each is read by the six tools
SECONDS = 10        # one run's limit ("within seconds": a run takes well under one)
PREVIOUS = b"previous output \x00\xff kept byte for byte\n"
NASTY = ["", "\ud800", "\udfff", "\x00", "\x1b[2J", "\r\n", "\u202e", "\u2028", "{", "}", "{family}",
         "{family.__class__}", "{family:>99999999}", "{0}", "$\\frac{$", "<svg>", "&amp;", "../../x", "/",
         "a" * 5000, "\U0001f600", "NaN", "1e309", "-0"]
FLOATS = [0.0, -0.0, 1e-320, 5e-324, 1e-30, 1e308, -1e308, 1.7976931348623157e308, float("nan"), float("inf"),
          -float("inf"), -1.0, 3.5]
NUMBERS = FLOATS + [0, 10 ** 30, -1, 2 ** 63, 10 ** 400, True, None, "12", [], {}]


class Hang(BaseException):
    """Raised by the alarm: a run over SECONDS (a BaseException, so no tool can catch it)."""


def valid_results(rng):
    """A valid schema-2 results file of a few families and repetitions."""
    rows = []

    def add(axes, name_format, cost, metric, value):
        name = name_format.format(**axes)
        for i in range(3):
            t = 1000.0 * (1 + rng.random() / 20)
            rows.append({"name": name + "/manual_time", "run_name": name + "/manual_time", "run_type": "iteration",
                         "repetitions": 3, "repetition_index": i, "iterations": 10, "real_time": t,
                         "cpu_time": t, "time_unit": "ns", "axes": axes, "name_format": name_format,
                         "cost": cost, metric: value * (1 + rng.random() / 20)})
    for width in (1, 4):
        add({"family": "compute", "backend": "opencl", "op": "mad", "type": f"float{width}", "scalar": "float",
             "width": width}, "{family}/{backend}/{op}/{type}", {"flops": 1e6}, "flop_per_s", 1e12 * width)
    add({"family": "memory", "backend": "opencl", "op": "triad", "type": "double"},
        "{family}/{backend}/{op}/{type}", {"bytes": 1e6}, "byte_per_s", 5e11)
    for k, ws in enumerate((4096, 8192, 65536, 1 << 20, 1 << 24)):
        add({"family": "latency", "backend": "opencl", "op": "chase", "bytes": ws},
            "{family}/{backend}/{op}/bytes:{bytes}", {"accesses": 1e4}, "ns_per_access", 10.0 * (1 + k // 2))
        add({"family": "cache", "backend": "opencl", "op": "read", "bytes": ws},
            "{family}/{backend}/{op}/bytes:{bytes}", {"bytes": ws}, "byte_per_s", 1e12 / (1 + k // 2))
    context = {"device": "pthread-test-device", "driver_version": "1.0", "runtime_version": "1.0",
               "backend": "opencl", "archbench_version": "v0-test", "date": "2026-11-28T00:00:00+00:00",
               "schema_version": "2", "cache_bytes": "4194304"}
    return {"context": context, "benchmarks": rows}


def paths(doc, prefix=()):
    """Every (path, value) of a document, containers included."""
    yield prefix, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from paths(value, prefix + (key,))


def random_text(rng):
    if rng.random() < 0.5:
        return rng.choice(NASTY)
    return "".join(chr(rng.choice([rng.randrange(0, 0x80), rng.randrange(0, 0x110000), rng.randrange(0xd800, 0xe000)]))
                   for _ in range(rng.randrange(0, 12)))


def mutate(doc, rng):
    """One to four mutations of a document, most of the kinds a reader accepts (any text in a string
    field or a key, any finite or non-finite float in a number field), the rest anything (a value of
    another type, a field removed, a row duplicated, a container replaced)."""
    for _ in range(rng.randrange(1, 5)):
        kind = rng.random()
        leaves = [(p, v) for p, v in paths(doc) if p and (isinstance(v, str) if kind < 0.5 else
                                                          type(v) in (int, float) if kind < 0.75 else True)]
        if not leaves:
            continue
        path, value = rng.choice(leaves)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if kind < 0.4:
            parent[path[-1]] = random_text(rng)
        elif kind < 0.5 and isinstance(parent, dict):  # the key itself
            parent[random_text(rng)] = parent.pop(path[-1])
        elif kind < 0.75:
            parent[path[-1]] = rng.choice(FLOATS)
        elif kind < 0.85:
            parent[path[-1]] = rng.choice(NUMBERS + [random_text(rng)])
        elif kind < 0.9 and isinstance(parent, dict):
            del parent[path[-1]]
        elif kind < 0.95 and isinstance(parent, list):
            parent.append(json.loads(json.dumps(parent[path[-1]])))
        else:
            parent[path[-1]] = rng.choice([[], {}, [value], {"x": value}])
    return doc


def serialized(doc, rng):
    """The document as bytes: JSON (NaN and Infinity as Python writes them), sometimes cut or damaged."""
    text = json.dumps(doc, indent=rng.choice([None, 1]))
    data = text.encode("utf-8", "surrogatepass")  # a raw (invalid) surrogate now and then
    if rng.random() < 0.5:
        data = text.encode("ascii", "backslashreplace") if rng.random() < 0.5 else json.dumps(doc).encode()
    if rng.random() < 0.1:
        data = data[:rng.randrange(len(data))]
    elif rng.random() < 0.05:
        i = rng.randrange(len(data))
        data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
    return data


def commands(tmp, good, bad, out):
    """(tool, main, argv, output path, exit codes of its findings)."""
    folder = os.path.join(tmp, "history")
    return [("compare", compare.main, [good, bad, "--markdown", out + ".md"], out + ".md", {3}),
            ("compare", compare.main, [bad, good, "--markdown", out + ".md"], out + ".md", {3}),
            ("history", history.main, ["--results", folder, "--plot", out + ".svg"], out + ".svg", set()),
            ("report", report.main, ["-o", out + ".html", bad], out + ".html", set()),
            ("roofline", roofline.main, [bad, "--svg", out + ".r.svg", "--json", out + ".json"], out + ".json", set()),
            ("variability", variability.main, [bad, "--json", out + ".v.json"], out + ".v.json", {1, 4}),
            ("merge", merge.main, ["-o", out + ".m.json", bad, good], out + ".m.json", {1})]


def on_alarm(signum, frame):
    raise Hang()


class PropertyTest(unittest.TestCase):
    def test_random_and_mutated_results(self):
        rng = random.Random(SEED)
        old = signal.signal(signal.SIGALRM, on_alarm)
        charts = os.environ.get("ARCHBENCH_CHARTS")
        try:
            with tempfile.TemporaryDirectory() as tmp:
                good = os.path.join(tmp, "good.json")
                with open(good, "w") as f:
                    json.dump(valid_results(rng), f)
                os.makedirs(os.path.join(tmp, "history"))
                for case in range(CASES):
                    doc = mutate(valid_results(rng), rng) if case % 10 else {"context": random_text(rng)}
                    bad = os.path.join(tmp, "history", "case.json")
                    with open(bad, "wb") as f:
                        f.write(serialized(doc, rng))
                    # matplotlib (where importable) in one case of four: it is slow to draw
                    os.environ["ARCHBENCH_CHARTS"] = "" if case % 4 == 0 else "svg"
                    for name, main, argv, out, findings in commands(tmp, good, bad, os.path.join(tmp, "out")):
                        with open(out, "wb") as f:
                            f.write(PREVIOUS)
                        self.check(case, name, main, argv, out, findings)
        finally:
            signal.signal(signal.SIGALRM, old)
            if charts is None:
                os.environ.pop("ARCHBENCH_CHARTS", None)
            else:
                os.environ["ARCHBENCH_CHARTS"] = charts

    def check(self, case, name, main, argv, out, findings):
        stdout, stderr = io.StringIO(), io.StringIO()
        signal.alarm(SECONDS)
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = main(argv)
        except Hang:
            self.fail(f"case {case}: {name} {argv}: over {SECONDS} s")
        except SystemExit as e:  # argparse
            code = e.code
        finally:
            signal.alarm(0)
        err = stderr.getvalue()
        what = f"case {case}: {name} exit {code}: {err[-500:]}"
        self.assertIn(code, {0, 2} | findings, what)
        self.assertNotIn("internal error", err, what)
        if code == 2:
            with open(out, "rb") as f:
                self.assertEqual(f.read(), PREVIOUS, f"{what}: the previous output was changed")
        for text in (stdout.getvalue(), err):
            self.assertFalse(any(0xd800 <= ord(c) < 0xe000 for c in text), what)


if __name__ == "__main__":
    unittest.main()
