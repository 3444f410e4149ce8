#!/usr/bin/env python3
"""The full sweep in parts on a machine that lends a GPU for a few minutes at a time: lists the
sweep, cuts it into parts of at most --part benchmarks (a family's benchmarks of the same kernel
and type together, in the order the binary lists them), runs each part as its own archbench
process with its own JSON (OUT/<backend>-full-<family>-NN.json) until DEADLINE (seconds since
the epoch), and appends each finished part's name to OUT/done.txt. Run it again with --done
OUT/done.txt on the next machine to go on where it stopped. A part cut off by the deadline is
run again whole.

  ci/full_sweep.py [--device cuda] [--done FILE] [--part 150] RUNNER OUT DEADLINE [ARCHBENCH ARGS...]

RUNNER is the archbench binary or a bundle's run.sh; ARCHBENCH ARGS go to every part (for example
--topdown=0 --benchmark_repetitions=1)."""
import argparse
import os
import re
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--done", help="parts already recorded (one name a line)")
    ap.add_argument("--part", type=int, default=150, help="at most this many benchmarks a part")
    ap.add_argument("runner")
    ap.add_argument("out")
    ap.add_argument("deadline", type=float)
    a, extra = ap.parse_known_args()
    done = set(open(a.done).read().split()) if a.done and os.path.exists(a.done) else set()
    os.makedirs(a.out, exist_ok=True)
    base = [a.runner, f"--device={a.device}", "--sweep=full"]
    p = subprocess.run(base + ["--benchmark_list_tests"], capture_output=True, text=True)
    names = [line.strip() for line in p.stdout.splitlines() if "/" in line]
    if not names:
        sys.exit(f"full_sweep: the runner listed no benchmark: {p.stderr.strip()}")
    backend = names[0].split("/")[1]
    groups = {}
    for n in names:
        groups.setdefault("/".join(n.split("/")[:4]), []).append(n)
    parts, cur, fam = [], [], None
    for g, ns in groups.items():
        f = g.split("/")[0]
        if cur and (f != fam or sum(len(groups[x]) for x in cur) + len(ns) > a.part):
            parts.append((fam, cur))
            cur = []
        cur.append(g)
        fam = f
    if cur:
        parts.append((fam, cur))
    seen, named = {}, []
    for fam, gs in parts:
        seen[fam] = seen.get(fam, 0) + 1
        named.append((f"{fam}-{seen[fam]:02d}", gs))
    print(f"{len(names)} benchmarks in {len(named)} parts", flush=True)
    for pid, gs in named:
        if pid in done:
            continue
        left = a.deadline - time.time()
        if left < 45:
            print(f"stopped before {pid}: {left:.0f} s left", flush=True)
            return 0
        flt = "^(" + "|".join(re.escape(g) + "(/|$)" for g in gs) + ")"
        t = time.time()
        with open(os.path.join(a.out, f"{pid}.log"), "w") as log:
            try:
                rc = subprocess.run(base + [f"--benchmark_filter={flt}",
                                            f"--benchmark_out={a.out}/{backend}-full-{pid}.json", *extra],
                                    stdout=log, stderr=subprocess.STDOUT, timeout=left - 10).returncode
            except subprocess.TimeoutExpired:
                rc = "cut off by the deadline"
        print(f"{pid}: {sum(len(groups[g]) for g in gs)} benchmarks, exit {rc}, {time.time() - t:.0f} s", flush=True)
        if rc == 0:
            with open(os.path.join(a.out, "done.txt"), "a") as f:
                f.write(pid + "\n")
    print("every part recorded", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
