"""The report (tools/archbench_report.py): pages from synthetic results (every family, an unknown
one, schema 1, several runs) and from committed results, their bad inputs, and each page loaded in
headless Chromium (the DevTools protocol over a pipe), the committed pages under results/ too: no
console error, no request leaves the page, and a screenshot of every chart section is non-blank
(decoded here, standard library only).

The ctest tools/test_report runs the page checks (the browser ones skip there); the ctest
tools/test_report_browser runs this file as a script, which runs the browser checks (ARCHBENCH_REPORT_BROWSER=1) and exits 77 (skip,
with the reason) where Chromium or matplotlib is missing. The report is drawn by a Python that has matplotlib: this one,
else /usr/bin/python3.
"""

import base64
import collections
import html as html_lib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "archbench_report.py")
H100 = os.path.join(ROOT, "results", "nvidia-h100-80gb-hbm3", "580-159-04")
POCL = os.path.join(ROOT, "results", "pthread-skylake-avx512-amd-epyc", "3-1-debian", "opencl-quick.json")
BROWSER_ENV = "ARCHBENCH_REPORT_BROWSER"
SKIP = 77


def python_with_matplotlib():
    """This Python where it imports matplotlib, else /usr/bin/python3 where that does, else None."""
    for py in dict.fromkeys((sys.executable, "/usr/bin/python3")):
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return py
    return None


PY = python_with_matplotlib()


def chromium():
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def report(*args, py=None):
    p = subprocess.run([py or PY or sys.executable, TOOL, *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------- synthetic results

def entry(name, axes, fmt, counters, reps=3, cost=None, **extra):
    """Iteration rows and a median aggregate of one schema-2 benchmark."""
    rows = []
    for i in range(reps):
        rows.append(dict(name=name + "/manual_time", run_name=name + "/manual_time", run_type="iteration",
                         repetitions=reps, repetition_index=i, iterations=1, real_time=100.0 + i, cpu_time=1.0,
                         time_unit="us", axes=axes, name_format=fmt, cost=cost or {},
                         **{k: v * (1 + 0.01 * i) for k, v in counters.items()}, **extra))
    rows.append(dict(rows[1], name=name + "/manual_time_median", run_type="aggregate", aggregate_name="median"))
    return rows


def synthetic(device="Synthetic GPU", backend="opencl", scale=1.0, families=None):
    """A schema-2 results file with a few points of every family, td_* and energy counters, and an
    unknown family."""
    b = backend
    out = []

    def add(family, fmt, counters, **axes):
        axes = dict(family=family, backend=b, **axes)
        out.extend(entry(fmt.format(**axes), axes, fmt, {k: v * scale for k, v in counters.items()}))

    for w in (1, 2, 4):
        add("compute", "{family}/{backend}/{op}/{type}", {"flop_per_s": 1e12 * w, "watt": 100.0 + w,
                                                           "flop_per_joule": 1e10 * w,
                                                           "td_retire": 0.7, "td_memory_bound": 0.1,
                                                           "td_core_bound": 0.1, "td_frontend": 0.05,
                                                           "td_divergence": 0.05},
            op="mad", type=f"float{w if w > 1 else ''}", scalar="float", width=w)
        add("compute", "{family}/{backend}/{op}/{type}", {"op_per_s": 5e11 * w}, op="add",
            type=f"int{w if w > 1 else ''}", scalar="int", width=w)
    for g in (1, 2, 4, 8):
        add("compute", "{family}/{backend}/{op}/{type}/groups:{groups}", {"flop_per_s": 1e11 * g, "watt": 50.0 + g},
            op="mad", type="float", scalar="float", width=1, groups=g)
    for ws in (1024, 4096, 65536, 1 << 20, 1 << 24):
        add("latency", "{family}/{backend}/{op}/bytes:{bytes}", {"ns_per_access": 5 + ws ** 0.3}, op="chase",
            bytes=ws)
        add("cache", "{family}/{backend}/{op}/bytes:{bytes}", {"byte_per_s": 1e12 / (1 + ws / 65536)}, op="read",
            bytes=ws)
        add("bus", "{family}/{backend}/{op}/bytes:{bytes}", {"byte_per_s": 1e9 * (1 + ws / 1e6)},
            op="to_device_pinned", bytes=ws)
    for op in ("copy", "triad"):
        add("memory", "{family}/{backend}/{op}/{type}", {"byte_per_s": 5e11}, op=op, type="double",
            scalar="double", width=1)
    for s in (0, 1, 2, 4):
        add("memory", "{family}/{backend}/{op}/stride:{stride}", {"byte_per_s": 5e11 / (1 + s)}, op="stride_read",
            stride=s)
        add("local", "{family}/{backend}/{op}/stride:{stride}", {"byte_per_s": 1e12 / (1 + s)}, op="read", stride=s)
    for p in (1, 2, 4):
        add("divergence", "{family}/{backend}/{op}/paths:{paths}", {"flop_per_s": 1e12 / p, "slowdown": p},
            op="paths", paths=p)
    for n in (1, 16, 256):
        add("scalability", "{family}/{backend}/{op}/items:{items}", {"byte_per_s": 1e8 * n, "speedup": n},
            op="vector_add", items=n)
    for shape in ("16x1024", "128x128"):
        add("image", "{family}/{backend}/{op}/shape:{shape}", {"byte_per_s": 2e11}, op="read", shape=shape)
    for fn in ("sin", "cos", "exp"):
        add("builtins", "{family}/{backend}/{op}/{type}", {"call_per_s": 1e11}, op=fn, type="float",
            scalar="float", width=1)
    add("launch", "{family}/{backend}/{op}/{mode}/items:{items}", {}, op="empty", mode="dispatch", items=1)
    for n in (1, 8):
        add("flops", "{family}/{backend}/{source}/{type}/flops:{flops}", {"flop_per_s": 1e10 * n, "byte_per_s": 4e10},
            source="dram", type="float", flops=n, scalar="float", width=1)
    for items in (1024, 4096):  # issue 21's axes: the search, many-item chase, host threads
        add("compute", "{family}/{backend}/{op}/{type}/{study}/items:{items}/group:{group}",
            {"flop_per_s": items * 1e8},
            op="mad", type="float4", study="search", items=items, group=64, scalar="float", width=4)
        add("scalability", "{family}/{backend}/{op}/threads:{threads}", {"flop_per_s": items * 1e6},
            op="host_threads", threads=items // 1024)
    add("latency", "{family}/{backend}/{op}/bytes:{bytes}", {"byte_per_s": 1e11}, op="chase_load", bytes=1 << 20)
    for sm in (0, 3, 6, 131):
        add("latency", "{family}/{backend}/{op}/bytes:{bytes}/sm:{sm}",
            {"ns_per_access": 140.0 + sm / 10, "cycles_per_access": 270.0 + sm / 5}, op="chase_sm", bytes=1 << 22, sm=sm)
    for chains in (1, 4):
        add("parallelism", "{family}/{backend}/{op}/chains:{chains}/threads:{threads}", {"flop_per_s": 1e11 * chains},
            op="fma", chains=chains, threads=64)
    add("warp_shuffle", "{family}/{backend}/{op}/lanes:{lanes}", {"op_per_s": 3e12}, op="xor", lanes=32)
    out.append(dict(entry("compute/%s/mad/double" % b, {}, "", {})[0], name="compute/%s/mad/double/manual_time" % b,
                    axes={"family": "compute", "backend": b, "op": "mad", "type": "double"},
                    name_format="{family}/{backend}/{op}/{type}", error_occurred=True,
                    error_message="device has no fp64"))
    if families:
        out = [e for e in out if e["axes"]["family"] in families]
    context = {"schema_version": "2", "archbench_version": "test", "device": device, "backend": b,
               "device_type": "gpu", "driver_version": "1.0", "runtime_version": "rt 1", "compute_units": "4",
               "cache_bytes": str(1 << 22), "date": "2026-01-01T00:00:00+00:00", "host": "h"}
    return {"context": context, "benchmarks": out}


def html_unescape(text):
    return html_lib.unescape(text)


def write(folder, name, doc):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def sections(html):
    """(anchor, image data URI or None) of every chart section."""
    out = []
    for m in re.finditer(r'<section id="([^"]+)" class="chart">(.*?)</section>', html, re.S):
        img = re.search(r'<img src="(data:[^"]+)"', m.group(2))
        out.append((m.group(1), img.group(1) if img else None))
    return out


@unittest.skipIf(PY is None, "matplotlib is importable neither by this Python nor by /usr/bin/python3")
class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="archbench-report-")
        cls.a = write(cls.tmp, "a.json", synthetic())
        cls.b = write(cls.tmp, "b.json", synthetic(device="Other GPU", scale=0.5))
        cls.out = os.path.join(cls.tmp, "one.html")
        cls.code, cls.stdout, cls.stderr = report(cls.a, "-o", cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def page(self, path=None):
        with open(path or self.out, encoding="utf-8") as f:
            return f.read()

    def test_one_run(self):
        self.assertEqual(self.code, 0, self.stderr)
        html = self.page()
        anchors = [a for a, _ in sections(html)]
        for want in ("latency-staircase", "compute-per-type-and-width", "work-group-study", "stream-bandwidth",
                     "stride-sweep", "cache-bandwidth-over-working-set", "bank-conflicts-local-memory",
                     "divergence", "divergence-slowdown", "scalability", "speedup",
                     "host-transfers-by-size-and-memory-kind", "image-shapes", "builtins", "launch-latency",
                     "roofline-float", "topdown", "energy", "warp-shuffle", "work-item-and-work-group-search",
                     "host-thread-baseline", "pointer-chase-load-bandwidth",
                     "instruction-against-thread-level-parallelism", "work-group-study-power",
                     "load-to-use-latency-per-sm"):
            self.assertIn(want, anchors)
        self.assertTrue(all(uri for _, uri in sections(html)), "every chart drawn")
        self.assertIn("device has no fp64", html)  # a failed benchmark is said under its chart
        self.assertIn("Synthetic GPU", html)
        self.assertNotIn("<script", html)
        self.assertIsNone(re.search(r'(src|href)="(?!data:|#)', html), "nothing fetched")

    def test_seed002_table4(self):
        # Seed 002 Table 4 beside ours: the seed's and SHOC's numbers from seeds.json, ours the best
        # median of the matching benchmarks in the seed's unit, "not measured" where the run has none.
        html = self.page()
        m = re.search(r'<section id="seed-002-table-4"><h2>Seed 002 Table 4: our figures beside the seed&#39;s '
                      r'SHOC comparison</h2>(.*?)</section>', html, re.S)
        self.assertIsNotNone(m, "the seed 002 Table 4 section")
        self.assertIn('href="#seed-002-table-4"', html)
        self.assertIn("GTX 460 SE", m.group(1))
        cells = {}
        for tr in re.findall(r"<tr>(.*?)</tr>", m.group(1))[1:]:
            tds = [html_unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            cells[tds[0]] = tds
        self.assertEqual(list(cells), ["BUS speed (HtoD)", "BUS speed (DtoH)", "MaxFlops", "global memory read bw",
                                       "global memory write bw", "local memory read bw", "local memory write bw"])
        self.assertEqual(cells["BUS speed (HtoD)"][2:6], ["2.7166", "5.3704", "2.4672", "5.1282"])
        self.assertEqual(cells["local memory write bw"][2:6], ["354.21", "580.13", "353.408", "563.811"])
        # bus: 1e9 x (1 + bytes/1e6) B/s at 4 and 16 MiB, the best of 4 to 64 MiB (the 1 KiB..16 MiB sweep),
        # the median repetition (x 1.01).
        self.assertEqual(cells["BUS speed (HtoD)"][7], f"{1.01 * (1 + (1 << 24) / 1e6):.4g} "
                                                       "(bus/opencl/to_device_pinned/bytes:16777216)")
        # MaxFlops: the best of mad float at every width (float4: 4e12 x 1.01), the groups study (8e11) and
        # the search (4.1e11): 4,040 GFLOPS.
        self.assertEqual(cells["MaxFlops"][7], "4,040 (compute/opencl/mad/float4)")
        self.assertEqual(cells["global memory read bw"][7], "252.5 (memory/opencl/stride_read/stride:1)")
        self.assertEqual(cells["local memory read bw"][7], "505 (local/opencl/read/stride:1)")
        for row in ("BUS speed (DtoH)", "global memory write bw", "local memory write bw"):
            self.assertEqual(cells[row][7], "not measured", row)
        self.assertEqual(len(cells["MaxFlops"]), 8, "one column of ours per run")

    def test_seed002_table4_not_measured(self):
        out = os.path.join(self.tmp, "latency-only.html")
        code, _, err = report(write(self.tmp, "latency-only.json", synthetic(families=("latency",))), "-o", out)
        self.assertEqual(code, 0, err)
        m = re.search(r'<section id="seed-002-table-4">(.*?)</section>', self.page(out), re.S)
        self.assertEqual(m.group(1).count(">not measured</td>"), 7)

    def test_int_and_float_in_one_chart(self):
        html = self.page()
        uri = dict(sections(html))["compute-per-type-and-width"]
        svg = base64.b64decode(uri.split(",", 1)[1]).decode()
        self.assertTrue("throughput (op/s)" in svg and ">int<" in svg, "the int rows (op_per_s) are drawn")

    def test_schema1_converted(self):
        doc = synthetic(families=("latency",))
        doc["context"].pop("schema_version")
        for e in doc["benchmarks"]:
            for k in ("axes", "name_format", "cost"):
                e.pop(k, None)
        out = os.path.join(self.tmp, "v1.html")
        code, _, err = report(write(self.tmp, "v1.json", doc), "-o", out)
        self.assertEqual(code, 0, err)
        self.assertIn("latency-staircase", [a for a, _ in sections(self.page(out))])

    def test_several_runs(self):
        out = os.path.join(self.tmp, "two.html")
        code, _, err = report(self.a, self.b, "-o", out)
        self.assertEqual(code, 0, err)
        html = self.page(out)
        self.assertIn('id="compare"', html)
        self.assertIn('id="history"', html)
        self.assertIn("regression", html)  # half the rates: regressions by compare's verdicts
        self.assertIn("Other GPU", html)

    def test_comma_joined_run(self):
        part = write(self.tmp, "part.json", synthetic(families=("bus",)))
        rest = write(self.tmp, "rest.json", synthetic(families=("latency",)))
        out = os.path.join(self.tmp, "parts.html")
        code, _, err = report(f"{part},{rest}", "-o", out)
        self.assertEqual(code, 0, err)
        html = self.page(out)
        self.assertNotIn('id="compare"', html)
        self.assertIn("latency-staircase", html)

    def test_bad_inputs(self):
        cases = {"malformed.json": "{", "foreign.json": {"context": {}, "benchmarks": []},
                 "model.json": {"orm": {}}, "empty.json": dict(synthetic(), benchmarks=[]),
                 "future.json": dict(synthetic(), context={"schema_version": "9", "device": "x"})}
        for name, doc in cases.items():
            code, out, err = report(write(self.tmp, name, doc), "-o", os.path.join(self.tmp, "x.html"))
            self.assertEqual(code, 2, (name, out, err))
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertTrue(err.startswith("archbench_report: "), err)
        code, _, err = report(self.a, "-o", os.path.join(self.tmp, "no", "such", "dir.html"))
        self.assertEqual(code, 2, err)
        code, _, err = report(os.path.join(self.tmp, "missing.json"), "-o", os.path.join(self.tmp, "x.html"))
        self.assertEqual(code, 2, err)

    def test_without_matplotlib(self):
        out = os.path.join(self.tmp, "plain.html")
        env = dict(os.environ, ARCHBENCH_CHARTS="svg")
        p = subprocess.run([PY, TOOL, self.a, "-o", out], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("tables only", p.stderr)
        self.assertIn("chart not drawn", self.page(out))


# ---------------------------------------------------------------- the browser

def png_pixels(data):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), f"PNG depth {depth} color type {color}"
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def ink(data):
    """(fraction of pixels that are not the background colour, number of distinct colours) of a PNG."""
    width, height, rows, bpp = png_pixels(data)
    counts = collections.Counter(row[i:i + 3] for row in rows for i in range(0, len(row), bpp))
    background = counts.most_common(1)[0][1]
    return 1 - background / sum(counts.values()), len(counts)


class DevTools:
    """Headless Chromium driven by the DevTools protocol over --remote-debugging-pipe."""

    def __init__(self, exe, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--remote-debugging-pipe", f"--user-data-dir={profile}", "--hide-scrollbars",
                 "--window-size=1280,900", "--force-device-scale-factor=1"]
        # The pipe is fds 3 (commands in) and 4 (replies out): the shell moves them there.
        self.proc = subprocess.Popen(["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null', exe] + flags,
                                     stdin=to_chrome_r, stdout=from_chrome_w, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def send(self, method, session=None, timeout=120, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self.read(timeout)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def read(self, timeout):
        deadline = time.time() + timeout
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def wait_for(self, method, timeout=120):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self.read(timeout)
            if e.get("method") == method:
                return e
            self.events.append(e)

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)


def check_in_browser(test, exe, path):
    """Load the page: no console error, no request but data: URIs, every chart section's image
    decoded and its screenshot non-blank (the chart itself: the first image of the section)."""
    profile = tempfile.mkdtemp(prefix="archbench-chromium-")
    browser = DevTools(exe, profile)
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session)
        url = "file://" + os.path.abspath(path)
        browser.send("Page.navigate", session, url=url)
        browser.wait_for("Page.loadEventFired", timeout=180)
        anchors = browser.send("Runtime.evaluate", session, returnByValue=True, expression=(
            "Array.from(document.querySelectorAll('section.chart')).map(s => { const i = s.querySelector('img');"
            " const r = (i || s).getBoundingClientRect(); return [s.id, r.x, r.y + window.scrollY, r.width,"
            " r.height, i ? i.complete && i.naturalWidth > 0 : false]; })"))["result"]["value"]
        test.assertTrue(anchors, "no chart section in the page")
        blank = []
        for anchor, x, y, w, h, decoded in anchors:
            test.assertTrue(decoded, f"{anchor}: its image did not decode")
            shot = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                                clip={"x": x, "y": y, "width": w, "height": min(h, 4000), "scale": 0.25})
            covered, colours = ink(base64.b64decode(shot["data"]))
            if covered < 0.02 or colours < 8:
                blank.append(f"{anchor} ({covered:.1%} ink, {colours} colours)")
        test.assertFalse(blank, "blank chart sections: " + ", ".join(blank))
        errors = []
        for e in browser.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text"))
            elif method == "Network.requestWillBeSent" and not params["request"]["url"].startswith(("data:", url)):
                errors.append("request " + params["request"]["url"])
        test.assertFalse(errors, "console errors: " + "; ".join(map(str, errors)))
        return len(anchors)
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


class BrowserTest(unittest.TestCase):
    def setUp(self):
        if not os.environ.get(BROWSER_ENV):
            self.skipTest(f"the browser checks run in the ctest tools/test_report_browser ({BROWSER_ENV}=1)")
        if chromium() is None:
            self.skipTest("chromium is not installed (Debian package chromium; ci/deps.sh installs it)")
        if PY is None:
            self.skipTest("matplotlib is importable neither by this Python nor by /usr/bin/python3")
        self.tmp = tempfile.mkdtemp(prefix="archbench-report-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def render(self, *runs):
        out = os.path.join(self.tmp, "report.html")
        code, stdout, err = report(*runs, "-o", out)
        self.assertEqual(code, 0, err)
        return out

    def test_synthetic_two_runs(self):
        a = write(self.tmp, "a.json", synthetic())
        b = write(self.tmp, "b.json", synthetic(device="Other GPU", scale=0.5))
        n = check_in_browser(self, chromium(), self.render(a, b))
        self.assertGreater(n, 15)

    def test_committed_results(self):
        # A page drawn now from a committed record, and the committed pages of the H100 and PoCL.
        pages = [self.render(POCL), os.path.join(H100, "report.html"), os.path.join(os.path.dirname(POCL),
                                                                                    "report.html")]
        for page in pages:
            with self.subTest(page=os.path.relpath(page, ROOT)):
                self.assertGreater(check_in_browser(self, chromium(), page), 10)


def main():
    """As a script (the ctest tools/test_report_browser): the browser tests (or the tests named as arguments); 77 when
    one could not run (the reason printed), 1 on a failure."""
    os.environ[BROWSER_ENV] = "1"
    argv = sys.argv if len(sys.argv) > 1 else [sys.argv[0], "BrowserTest"]
    result = unittest.main(module=__name__, argv=argv, exit=False, verbosity=2).result
    if not result.wasSuccessful():
        return 1
    skipped = [reason for _, reason in result.skipped]
    if skipped:
        print("SKIP: " + "; ".join(dict.fromkeys(skipped)))
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
