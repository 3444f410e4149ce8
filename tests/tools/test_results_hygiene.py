"""Every results file committed under results/: no benchmark whose output check failed, and the
device, driver and date in its context (issue 21's results hygiene); and results only: no program
(its place is tests/probes/, where it is built)."""
import glob
import gzip
import json
import os
import unittest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "results")
SOURCE = (".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp", ".py", ".sh")


def archbench_records():
    """(path, document) of every committed archbench results JSON (Google Benchmark layout)."""
    paths = glob.glob(os.path.join(ROOT, "**", "*.json"), recursive=True)
    for path in sorted(paths + glob.glob(os.path.join(ROOT, "**", "*.json.gz"), recursive=True)):
        try:
            with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
                doc = json.load(f)
        except (ValueError, UnicodeDecodeError):
            continue  # not JSON: another tool's file (the test of each tool reads its own)
        if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list) and isinstance(doc.get("context"), dict):
            yield path, doc


class ResultsHygiene(unittest.TestCase):
    def test_no_committed_record_holds_a_failed_check(self):
        records = list(archbench_records())
        self.assertGreater(len(records), 10, "results/ should hold the committed records")
        bad = [f"{os.path.relpath(p, ROOT)}: {b['name']}" for p, d in records for b in d["benchmarks"]
               if "output check failed" in str(b.get("error_message", ""))]
        self.assertEqual(bad, [], "committed records with failed output checks (re-take them)")

    def test_each_record_names_its_device_and_date(self):
        for path, doc in archbench_records():
            ctx = doc["context"]
            if "device" not in ctx and "devices" not in ctx and "runs" not in ctx:
                continue  # a merged or tool-made file: its parts carry the context
            with self.subTest(path=os.path.relpath(path, ROOT)):
                self.assertTrue(ctx.get("date"), "no date in the context")

    def test_no_program(self):
        found = [os.path.relpath(os.path.join(d, n), ROOT) for d, dirs, names in os.walk(ROOT) for n in names
                 if n.endswith(SOURCE) and os.path.relpath(d, ROOT).split(os.sep)[0] != "local"]  # local: not committed
        self.assertEqual(found, [], "programs under results/: move them to tests/probes/<topic>/")


if __name__ == "__main__":
    unittest.main()
