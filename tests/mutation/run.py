#!/usr/bin/env python3
"""Mutation check (issue 22): plants each mutation of mutations.py in a scratch copy of the
repository, one at a time, rebuilds incrementally only what its tests need, runs only those tests,
and records caught / survived / not applicable (GPU-only without --gpu).

  tests/mutation/run.py [--work /tmp/bmut] [--rev HEAD] [--only ID,...] [--gpu] [--json OUT]

A run of every mutation writes its score, with the commit it checked, to tests/mutation/LAST.json
(--json OUT writes elsewhere; a run of some, --only, writes only there).

The scratch copy is `git archive REV` under WORK/src (kept while REV is the same commit) and the
build is WORK/build, configured once (Release; CUDA only with --gpu) and kept across mutations,
so each mutation costs one incremental build of its targets and its tests. Before any mutation
the same tests run on the unmutated copy: a test that already fails there makes its mutations
"invalid", not caught. A mutation whose old text is not found exactly once, or that names a
ctest the build does not have, stops the run (exit 2, as does a copy that does not configure or
build). Exit 0 when every applicable mutation was caught, 1 when some survived. Not run in CI (slow).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mutations import MUTATIONS  # noqa: E402

TARGETS = {"unit": ["archbench_unit"], "conformance": ["archbench_conformance"],
           "ctest:e2e/smoke": ["archbench"], "ctest:e2e/safety": ["archbench"], "ctest:e2e/regression": ["archbench"],
           "ctest:e2e/roofline_e2e": ["archbench"], "ctest:analysis/topdown/topdown_gpu": ["archbench_topdown"]}
LAST = os.path.join(HERE, "LAST.json")


def log(*a):
    print(*a, flush=True)


def stop(why):
    """The check cannot run (a stale table, a build that fails): exit 2, not 1 (some survived)."""
    print(why, file=sys.stderr, flush=True)
    sys.exit(2)


def sh(cmd, cwd=None, env=None, timeout=None):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + "\n[timed out]", time.time() - t0


def targets_of(tests):
    out = []
    for t in tests:
        kind = t.split(":", 1)[0]
        for tg in TARGETS.get(kind, TARGETS.get(t, [])):
            if tg not in out:
                out.append(tg)
    return out


def run_test(t, src, build, timeout):
    """Runs one test spec; returns (status, seconds, tail) with status pass / fail / skip."""
    kind, arg = t.split(":", 1)
    env = dict(os.environ)
    if kind in ("unit", "conformance"):
        binary = os.path.join(build, "tests", "archbench_" + kind)
        rc, out, dt = sh([binary, "--gtest_filter=" + arg, "--gtest_brief=1"], cwd=build, env=env, timeout=timeout)
        if rc == 0 and "0 tests" in out and "PASSED" in out and "[  PASSED  ] 0 tests" in out:
            rc = 77  # the filter matched nothing: not evidence either way
    elif kind == "ctest":
        rc, out, dt = sh(["ctest", "--test-dir", build, "-R", "^" + arg + "$", "--output-on-failure",
                          "--timeout", str(timeout)], env=env, timeout=timeout + 30)
        if rc == 0 and ("Skipped" in out or "Not Run" in out or "No tests were found" in out):
            rc = 77
    elif kind == "py":
        rc, out, dt = sh([sys.executable, "-m", "unittest", "discover", "-s", os.path.join(src, "tests", "tools"),
                          "-p", arg], cwd=src, env=env, timeout=timeout)
    else:
        stop(f"unknown test kind {t!r}")
    status = "pass" if rc == 0 else "skip" if rc == 77 else "fail"
    return status, dt, out[-1500:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--work", default="/tmp/bmut")
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--only", default="", help="comma-separated mutation ids")
    ap.add_argument("--gpu", action="store_true", help="also the GPU-only mutations (CUDA build, a CUDA GPU)")
    ap.add_argument("--timeout", type=int, default=600, help="per test, seconds")
    ap.add_argument("--json", default="", help="write the results here (default: LAST.json after a run of every mutation)")
    args = ap.parse_args()

    muts = [m for m in MUTATIONS if not args.only or m["id"] in args.only.split(",")]
    ids = [m["id"] for m in muts]
    if len(set(ids)) != len(ids):
        stop("duplicate mutation ids")
    commit = subprocess.check_output(["git", "-C", args.repo, "rev-parse", args.rev], text=True).strip()
    src, build = os.path.join(args.work, "src"), os.path.join(args.work, "build")
    stamp = os.path.join(args.work, "commit")
    os.makedirs(args.work, exist_ok=True)
    if not (os.path.exists(stamp) and open(stamp).read().strip() == commit and os.path.isdir(src)):
        if os.path.isdir(src):
            shutil.rmtree(src)
        os.makedirs(src)
        subprocess.run(f"git -C {args.repo} archive {commit} | tar -x -C {src}", shell=True, check=True)
        # git archive dates every file at its commit: older than objects a previous run built (maybe
        # from a mutated file), so ninja would keep them. Dated now, everything rebuilds once.
        now = time.time()
        for d, _, files in os.walk(src):
            for f in files:
                os.utime(os.path.join(d, f), (now, now))
        with open(stamp, "w") as f:
            f.write(commit + "\n")
    log(f"mutation check at {commit} ({len(muts)} mutations), scratch copy {src}, build {build}")

    # Every mutation's old text, exactly once, before anything is built: a stale table stops here.
    originals = {}
    for m in muts:
        path = os.path.join(src, m["file"])
        if m["gpu"] and not args.gpu and not os.path.exists(path):
            continue
        text = originals.setdefault(m["file"], open(path).read())
        n = text.count(m["old"])
        if n != 1:
            stop(f"mutation {m['id']}: the old text is found {n} times in {m['file']} (must be once):\n{m['old']}")

    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        cfg = ["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
               "-DARCHBENCH_CUDA=" + ("ON" if args.gpu else "OFF")]
        rc, out, _ = sh(cfg)
        if rc:
            stop("configure failed:\n" + out[-3000:])

    applicable = [m for m in muts if args.gpu or not m["gpu"]]
    all_tests = []
    for m in applicable:
        all_tests += [t for t in m["tests"] if t not in all_tests]
    # Every ctest a mutation names is one this build has: a stale name stops here, not as "invalid".
    listed = sh(["ctest", "--test-dir", build, "-N"])[1]
    have = set(re.findall(r"^\s*Test\s+#\d+: (\S+)$", listed, re.M))
    unknown = [t for t in all_tests if t.startswith("ctest:") and t.split(":", 1)[1] not in have]
    if unknown:
        stop(f"mutations name ctests this build does not have: {unknown}")
    t0 = time.time()
    rc, out, dt = sh(["cmake", "--build", build, "-j", args.jobs, "--target"] + targets_of(all_tests))
    if rc:
        stop("the unmutated copy does not build:\n" + out[-3000:])
    log(f"unmutated build {dt:.0f} s")
    baseline = {}
    for t in all_tests:
        baseline[t], bdt, tail = run_test(t, src, build, args.timeout)
        log(f"  baseline {t}: {baseline[t]} ({bdt:.0f} s)")
        if baseline[t] == "fail":
            log(tail)

    results = []
    for m in muts:
        r = dict(id=m["id"], cls=m["cls"], file=m["file"], tests=m["tests"], gpu=m["gpu"])
        if m["gpu"] and not args.gpu:
            r["status"] = "not_applicable"
            r["why"] = "GPU-only: needs a CUDA build and a CUDA GPU (--gpu)"
            results.append(r)
            log(f"[n/a     ] {m['id']}: GPU-only")
            continue
        path = os.path.join(src, m["file"])
        original = originals[m["file"]]
        with open(path, "w") as f:
            f.write(original.replace(m["old"], m["new"], 1))
        try:
            tg = targets_of(m["tests"])  # none for the Python tools
            rc, out, bdt = sh(["cmake", "--build", build, "-j", args.jobs, "--target"] + tg) if tg else (0, "", 0.0)
            r["build_s"] = round(bdt, 1)
            if rc:
                r["status"] = "build_failed"
                r["why"] = "the mutated copy does not build (a bad mutation, fix its text): " + out[-800:]
            else:
                r["runs"] = []
                for t in m["tests"]:
                    if baseline.get(t) != "pass":
                        r["runs"].append(dict(test=t, status="unusable", why=f"unmutated: {baseline.get(t)}"))
                        continue
                    st, tdt, tail = run_test(t, src, build, args.timeout)
                    r["runs"].append(dict(test=t, status=st, seconds=round(tdt, 1),
                                          **({"tail": tail} if st == "fail" else {})))
                    if st == "fail":
                        break  # caught: the other tests need not run
                usable = [x for x in r["runs"] if x["status"] in ("pass", "fail")]
                if any(x["status"] == "fail" for x in usable):
                    r["status"] = "caught"
                    r["caught_by"] = next(x["test"] for x in usable if x["status"] == "fail")
                elif usable:
                    r["status"] = "survived"
                else:
                    r["status"] = "invalid"
                    r["why"] = "none of its tests runs or passes on the unmutated copy here"
        finally:
            with open(path, "w") as f:
                f.write(original)
        results.append(r)
        log(f"[{r['status']:8}] {m['id']}" + (f" by {r['caught_by']}" if r.get("caught_by") else "")
            + f" (build {r.get('build_s', 0):.0f} s)")

    caught = [r for r in results if r["status"] == "caught"]
    survived = [r for r in results if r["status"] == "survived"]
    na = [r for r in results if r["status"] == "not_applicable"]
    other = [r for r in results if r["status"] not in ("caught", "survived", "not_applicable")]
    ran = len(caught) + len(survived)
    log(f"\nmutation score: {len(caught)}/{ran} caught" + (f" ({100 * len(caught) / ran:.0f}%)" if ran else "")
        + f"; {len(na)} GPU-only not applicable; {len(other)} invalid or not built; {time.time() - t0:.0f} s")
    for r in survived:
        log(f"  survived: {r['id']} ({r['cls']})")
    for r in na:
        log(f"  GPU-only: {r['id']} ({r['cls']})")
    for r in other:
        log(f"  {r['status']}: {r['id']}: {r.get('why', '')[:300]}")
    out = args.json or ("" if args.only else LAST)
    if out:
        doc = dict(commit=commit, caught=len(caught), ran=ran, total=len(results),
                   not_applicable=[r["id"] for r in na], survived=[r["id"] for r in survived],
                   other=[r["id"] for r in other], baseline=baseline, seconds=round(time.time() - t0),
                   host=os.uname().nodename, results=results)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0 if not survived and not other else 1


if __name__ == "__main__":
    sys.exit(main())
