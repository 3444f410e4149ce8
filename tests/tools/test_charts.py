"""The chart renderer (tools/archbench/render/charts.py): matplotlib where importable, the plain SVG
where not (forced here with ARCHBENCH_CHARTS=svg); each path writes a non-empty valid file.
Stdlib unittest; the matplotlib tests skip where it is not importable (/usr/bin/python3 has it).

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import os
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tools"))
from archbench.render import charts  # noqa: E402

MODEL = {"orm": {"compute": {"float": {"fma": {"value": 60e12}}}, "device_memory": {"value": 3e12}},
         "carm": {"levels": [{"name": "device memory", "value": 3e12}]}, "textbook": None}
BW = {"memory": {}}
POINTS = [{"name": "flops/cuda/dram/float/flops:1", "ai": 0.25, "flop_per_s": 0.7e12, "byte_per_s": 2.8e12}]


def chart(path):
    from archbench.render import roofline
    return roofline.write_chart(path, MODEL, BW, POINTS, "float", "test chart")


class ChartsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, name):
        return os.path.join(self.tmp.name, name)

    def test_svg_fallback(self):
        with mock.patch.dict(os.environ, {charts.FORCE_ENV: "svg"}):
            self.assertIsNone(chart(self.p("r.svg")))
            self.assertIn("ARCHBENCH_CHARTS=svg", chart(self.p("r.png")))
        self.assertGreater(os.path.getsize(self.p("r.svg")), 0)
        root = ET.parse(self.p("r.svg")).getroot()
        self.assertTrue(root.findall(".//{http://www.w3.org/2000/svg}line"))
        self.assertFalse(os.path.exists(self.p("r.png")))

    def test_matplotlib(self):
        if charts.pyplot()[0] is None:
            self.skipTest("matplotlib is not importable")
        self.assertIsNone(chart(self.p("r.png")))
        with open(self.p("r.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertIsNone(chart(self.p("r.svg")))
        text = " ".join("".join(e.itertext()) for e in ET.parse(self.p("r.svg")).getroot().iter()
                        if e.tag.endswith("text"))
        self.assertIn("float FMA", text)


if __name__ == "__main__":
    unittest.main()
