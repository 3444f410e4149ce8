"""archbench sass: the timed loops of a recorded cuobjdump -sass listing (the pointer chase)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
DATA = os.path.join(HERE, "..", "data", "sass")


def sass(*args):
    return subprocess.run([sys.executable, "-m", "archbench", "sass", *args], cwd=TOOLS, capture_output=True, text=True)


class SassLoops(unittest.TestCase):
    def test_chase_loop_is_loads_only(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "loops.json")
            r = sass(DATA, "--json", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            loops = json.load(open(out))
        self.assertTrue(loops and all(l["function"] == "chase_ptr" for l in loops))
        main = max(loops, key=lambda l: l["instructions"])
        # The unrolled walk: 16 dependent 64-bit loads and the loop's own three instructions,
        # no address arithmetic between loads.
        self.assertEqual(main["opcodes"].get("LD.E.64"), 16)
        self.assertEqual(main["instructions"] - 16, 3)
        self.assertNotIn("IMAD.WIDE.U32", main["opcodes"])
        self.assertIn("UNUSED=1", main["options"])
        self.assertIn("chase_ptr [UNUSED=1] loop", r.stdout)

    def test_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            r = sass(d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no SASS listing", r.stderr)
            bogus = os.path.join(d, "x.sass")
            open(bogus, "w").write("not a listing\n")
            r = sass(bogus)
            self.assertEqual(r.returncode, 2)
            self.assertIn("not a cuobjdump -sass listing", r.stderr)


if __name__ == "__main__":
    unittest.main()
