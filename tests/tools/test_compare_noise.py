"""The compare tool's false alarms and detection on recorded back-to-back runs of one build (issue 23).

results/<device>/<driver>/compare-noise/ holds runs of one archbench build, one after the other, at
archbench's defaults (3 repetitions) on a shared 2-core machine running PoCL. For each of the 10
consecutive pairs (run i as BASE, run i+1 as NEW) at the compare tool's defaults: every benchmark
called a regression or an improvement is a false alarm; then run i+1 with every time multiplied by
1.2 (rates divided by it) is a planted 20% slowdown, caught where the verdict is "regression".
Two noise records: the folder itself (what `archbench_compare.py compare-noise/A compare-noise/B`
uses by default: in-sample) and the other runs only (leave-pair-out: the record does not hold the
pair, as for a future run). A benchmark's run-to-run spread is exp(stdev(log of its per-run
median times)) - 1. The rates are committed beside the runs as rates.json; this test recomputes
them and checks the goals: zero false alarms in-sample, the planted slowdown caught on every pair
of every benchmark whose spread is under 5%.

    python3 tests/tools/test_compare_noise.py --write    # rewrite rates.json from the runs
"""

import glob
import json
import os
import statistics
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from archbench.analysis import compare as ac, stats  # noqa: E402
from archbench.commands import compare as cc  # noqa: E402
from archbench.records import results  # noqa: E402

RECORDS = sorted(glob.glob(os.path.join(ROOT, "results", "*", "*", "compare-noise")))
SLOWDOWN = 1.2
GOAL_SPREAD = 0.05


def slowed(path, factor, out):
    """A copy of a results file with every time multiplied by factor (rates divided) at out."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    for entry in doc["benchmarks"]:
        if entry.get("aggregate_name") == "cv":
            continue
        for key, value in list(entry.items()):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if key in ("real_time", "cpu_time") or key.startswith("ns_per_") or key.startswith("cycles_per_"):
                entry[key] = value * factor
            elif results.is_higher_better(key):
                entry[key] = value / factor
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return out


def flagged(report):
    return [name for key in ("regression", "improvement") for name, _ in report[key]]


def rates(folder):
    """The false alarms and detections over the consecutive pairs of the runs in folder."""
    files = sorted(f for f in glob.glob(os.path.join(folder, "*.json")) if os.path.basename(f) != "rates.json")
    sides = [results.load_side(f)[1] for f in files]
    names = sorted(set.intersection(*(set(s) for s in sides)))
    args = cc.parse_args(["BASE", "NEW"])
    spread = {n: stats.relative_spread([statistics.median(results.values_of(s[n], "real_time")) for s in sides])
              for n in names}
    out = {"runs": len(files), "pairs": len(files) - 1, "benchmarks_compared": len(names),
           "defaults": {k: getattr(args, k) for k in ("alpha", "min_effect", "noise_factor", "huge_factor",
                                                      "huge_min")},
           "spread": {n: round(spread[n], 4) for n in names}}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("in_sample", "leave_pair_out"):
            alarms, caught, undecided = [], {n: 0 for n in names}, 0
            for i in range(len(files) - 1):
                record = files if mode == "in_sample" else [f for j, f in enumerate(files) if j not in (i, i + 1)]
                noise = results.load_side(record)[1]
                report = ac.compare(sides[i], sides[i + 1], args, noise)
                alarms += [f"{i}->{i + 1} {n}" for n in flagged(report)]
                undecided += len(report["undecided"])
                slow = results.load_side(slowed(files[i + 1], SLOWDOWN, os.path.join(tmp, "slow.json")))[1]
                for name, _ in ac.compare(sides[i], slow, args, noise)["regression"]:
                    caught[name] += 1
            out[mode] = {"comparisons": (len(files) - 1) * len(names), "false_alarms": len(alarms),
                         "false_alarm_list": alarms, "undecided": undecided,
                         "planted_20pct_caught": sum(caught.values()), "caught_per_benchmark": caught}
    out["goal_benchmarks"] = [n for n in names if spread[n] < GOAL_SPREAD]
    return out


class CompareNoiseTest(unittest.TestCase):
    def test_recorded_runs(self):
        self.assertTrue(RECORDS, "no results/*/*/compare-noise/ folder")
        for folder in RECORDS:
            with self.subTest(folder=os.path.relpath(folder, ROOT)):
                found = rates(folder)
                self.assertGreaterEqual(found["pairs"], 10)
                self.assertEqual(found["in_sample"]["false_alarms"], 0, found["in_sample"]["false_alarm_list"])
                for name in found["goal_benchmarks"]:
                    self.assertEqual(found["in_sample"]["caught_per_benchmark"][name], found["pairs"], name)
                with open(os.path.join(folder, "rates.json"), encoding="utf-8") as f:
                    self.assertEqual(json.load(f), json.loads(json.dumps(found)), "rates.json is stale: --write")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for folder in RECORDS:
            found = rates(folder)
            with open(os.path.join(folder, "rates.json"), "w", encoding="utf-8") as f:
                json.dump(found, f, indent=1)
                f.write("\n")
            print(f"wrote {os.path.join(folder, 'rates.json')}")
    else:
        unittest.main()
