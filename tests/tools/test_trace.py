"""Tests for tools/archbench_trace.py on synthetic raw files (tools/analysis/trace/FORMAT.md); stdlib unittest.

Run from the repository root: python3 -m unittest discover -s tests/tools -v
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "archbench_trace.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from archbench.analysis.trace import analyse, function_name  # noqa: E402
from archbench.records.trace import TraceError, load  # noqa: E402
from archbench.render.trace import chrome_trace  # noqa: E402

MS = 1000000


def proc(pid=1, end=1000 * MS, **extra):
    return dict({"type": "process", "api": "opencl", "pid": pid, "command": "synthetic", "start_ns": 0,
                 "end_ns": end, "clock": "aligned at enqueue", "sample_rate_hz": 1000}, **extra)


def kernel(i, name, start_ms, end_ms, buffers=(), queue="q1"):
    return {"type": "kernel", "id": i, "name": name, "queue": queue, "global": [64], "local": None,
            "queued_ns": start_ms * MS, "submit_ns": start_ms * MS, "start_ns": start_ms * MS, "end_ns": end_ms * MS,
            "buffers": [{"id": b, "access": a} for b, a in buffers], "tid": 1, "path": ["f", "main"]}


def copy(i, kind, start_ms, end_ms, hash_, buffer="b1", nbytes=4096):
    return {"type": "copy", "id": i, "kind": kind, "bytes": nbytes, "host_memory": "pageable", "buffer": buffer,
            "hash": hash_, "queue": "q1", "queued_ns": start_ms * MS, "start_ns": start_ms * MS, "end_ns": end_ms * MS,
            "blocking": False, "tid": 1, "path": ["g", "main"]}


BASE = [proc(), {"type": "device", "id": "d0", "name": "gpu A", "used": True},
        {"type": "queue", "id": "q1", "device": "d0", "in_order": True, "profiling_added": True}]


class TraceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, recs, name="p-1.jsonl"):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            for r in recs:
                f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
        return path

    def analyse(self, recs):
        return analyse(load([self.write(BASE + recs)]))

    def cli(self, *args):
        return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)

    def test_busy_idle_and_gaps(self):
        s = self.analyse([kernel(1, "a", 100, 200), kernel(2, "b", 400, 500), copy(3, "h2d", 450, 600, "aa")])
        self.assertEqual(s["span_ns"], 1000 * MS)
        self.assertEqual(s["device_busy_ns"], 300 * MS)  # 100-200 and 400-600, the overlap counted once
        self.assertEqual(s["device_idle_ns"], 700 * MS)
        self.assertEqual(s["idle_gaps"][0]["ns"], 200 * MS)
        self.assertEqual(s["idle_gaps"][0]["host"], {"samples": [], "parked": [], "builds": []})
        self.assertEqual(s["devices"][0]["busy_ns"], 300 * MS)
        k = {r["name"]: r for r in s["kernels"]}
        self.assertEqual((k["a"]["count"], k["a"]["total_ns"], k["a"]["share"]), (1, 100 * MS, 0.5))

    def test_memset_occupies_the_device(self):
        memset = {"type": "memset", "id": 9, "bytes": 64, "queue": "q1", "start_ns": 300 * MS, "end_ns": 350 * MS}
        s = self.analyse([kernel(1, "a", 100, 200), memset])
        self.assertEqual(s["device_busy_ns"], 150 * MS)
        json.dumps(chrome_trace(load([self.write(BASE + [memset])])))

    def test_cpu_idle_split_over_the_work_waited_for(self):
        sync = {"type": "sync", "kind": "finish", "start_ns": 150 * MS, "end_ns": 250 * MS, "queue": "q1",
                "tid": 1, "path": ["main"]}
        s = self.analyse([kernel(1, "a", 100, 200), sync])
        ci = s["cpu_idle"]
        self.assertEqual(ci["total_ns"], 100 * MS)
        self.assertEqual(ci["by_path"][0]["path"], "finish: main")
        work = {r["name"]: r["ns"] for r in ci["by_work"]}
        self.assertEqual(work, {"a": 50 * MS, "(no device work)": 50 * MS})

    def test_gpu_idle_cause_counts_samples_with_no_device_work(self):
        # 1 kHz: each sample stands for the time since its thread's previous one, at most 10 ms.
        samples = [{"type": "sample", "tid": 1, "t_ns": t * MS, "path": path}
                   for t, path in ((150, ["wait", "main"]), (300, ["work(int)", "main"]), (303, ["work(int)", "main"]))]
        g = self.analyse([kernel(1, "a", 100, 200)] + samples)["gpu_idle_cause"]
        self.assertEqual((g["samples"], g["idle_samples"], g["ns"]), (3, 2, 13 * MS))
        self.assertEqual(g["by_path"], [{"path": "main > work", "samples": 2, "ns": 13 * MS}])
        self.assertIn({"function": "work(int)", "samples": 2, "ns": 13 * MS}, g["by_function"])

    def test_waiting_samples_name_their_own_stack_or_where_the_thread_last_ran(self):
        # A sleeping thread's sample: its own stack (path_from own) is where it waits; one whose
        # stack could not be walked carries where the thread last ran (path_from last_run, or
        # nothing in older files).
        samples = [{"type": "sample", "tid": 1, "t_ns": t * MS, "ns": MS, "wait": "clock_nanosleep", "path": path, **extra}
                   for t, path, extra in ((300, ["clock_nanosleep", "nap(double)", "main"], {"path_from": "own"}),
                                          (301, ["clock_nanosleep", "nap(double)", "main"], {"path_from": "own"}),
                                          (302, ["work(int)", "main"], {"path_from": "last_run"}),
                                          (303, ["work(int)", "main"], {}))]
        s = self.analyse([kernel(1, "a", 100, 200), kernel(2, "b", 400, 500)] + samples)
        paths = {r["path"]: r["samples"] for r in s["gpu_idle_cause"]["by_path"]}
        self.assertEqual(paths, {"waiting in clock_nanosleep: main > nap > clock_nanosleep": 2,
                                 "waiting in clock_nanosleep (last ran in main > work)": 2})
        self.assertIn({"function": "nap(double)", "samples": 2, "ns": 2 * MS}, s["gpu_idle_cause"]["by_function"])
        gap = s["idle_gaps"][0]
        self.assertEqual(gap["ns"], 200 * MS)
        self.assertEqual(gap["host"]["samples"][0], {"path": "waiting in clock_nanosleep: main > nap > clock_nanosleep", "count": 2})

    def test_blame_comes_from_the_threads_that_drive_the_device(self):
        # Issue 38 (PyTorch, JAX): thread 1 launches both kernels; thread 2 launched one kernel
        # earlier and now waits on its condition variable (an autograd pool); thread 3 never touches
        # the device (a BLAS pool). In the 200 ms gap thread 1 compiles: it is blamed; thread 2's
        # wait is parked, listed apart; thread 3 is not a driver at all. Thread 1 waiting before its
        # own next launch (its input) is blamed too.
        def sample(tid, t, path, wait=None):
            return dict({"type": "sample", "tid": tid, "t_ns": t * MS, "ns": MS, "path": path, "path_from": "own"},
                        **({"wait": wait} if wait else {}))
        early = dict(kernel(9, "z", 10, 20), tid=2)
        samples = ([sample(1, t, ["compile", "main"]) for t in (250, 260, 270)] + [sample(1, 380, ["get", "main"], "futex")]
                   + [sample(2, t, ["pthread_cond_wait", "worker"], "futex") for t in range(210, 400, 10)]
                   + [sample(3, t, ["pthread_cond_wait", "blas"], "futex") for t in range(210, 400, 10)])
        s = self.analyse([early, kernel(1, "a", 100, 200), kernel(2, "b", 400, 500)] + samples)
        g = s["gpu_idle_cause"]
        self.assertEqual({r["path"]: r["samples"] for r in g["by_path"]},
                         {"main > compile": 3, "waiting in futex: main > get": 1})
        self.assertEqual(g["parked_samples"], 19)  # thread 2, all in the gap
        self.assertEqual(g["parked"][0]["path"], "waiting in futex: worker > pthread_cond_wait")
        self.assertEqual(g["runtime_thread_samples"], 19)
        gap = next(x for x in s["idle_gaps"] if x["start_ns"] == 200 * MS)
        self.assertEqual(gap["host"]["samples"][0], {"path": "main > compile", "count": 3})
        self.assertEqual(gap["host"]["parked"][0]["path"], "waiting in futex: worker > pthread_cond_wait")

    def test_dropped_records_are_said_first(self):
        import io
        from archbench.render.trace import print_summary
        s = self.analyse([kernel(1, "a", 100, 200)])
        s["processes"][0]["records_dropped"] = 143953
        out = io.StringIO()
        print_summary(s, out)
        self.assertTrue(out.getvalue().startswith("INCOMPLETE: 143953 records were dropped"), out.getvalue()[:200])

    def test_redundant_round_trip(self):
        s = self.analyse([copy(1, "d2h", 10, 11, "cafe"), copy(2, "h2d", 20, 21, "cafe", buffer="b2"),
                          copy(3, "h2d", 30, 31, "beef"), copy(4, "d2h", 40, 41, "beef")])
        rt = s["detectors"]["redundant_round_trip"]
        # Only the read that went back; a write before a read of the same bytes is no round trip.
        self.assertEqual(len(rt), 1)
        self.assertEqual((rt[0]["read"]["id"], rt[0]["written"]["id"], rt[0]["written"]["buffer"]), (1, 2, "b2"))

    def test_round_trip_needs_the_same_size(self):
        s = self.analyse([copy(1, "d2h", 10, 11, "cafe"), copy(2, "h2d", 20, 21, "cafe", nbytes=8)])
        self.assertEqual(s["detectors"]["redundant_round_trip"], [])

    def test_repeated_jit(self):
        def build(prog, ctx, opts=""):
            return {"type": "build", "kind": "build", "program": prog, "source_hash": "ab", "options": opts,
                    "context": ctx, "start_ns": 0, "end_ns": 5 * MS, "tid": 1, "path": ["main"]}
        s = self.analyse([build("p1", "c1"), build("p2", "c2"), build("p3", "c1", "-O0"),
                          kernel(1, "a", 1, 2), kernel(2, "a", 20, 21)])
        self.assertEqual(s["idle_gaps"][0]["host"]["builds"], [{"program": "p1", "ns": 3 * MS},
                                                               {"program": "p2", "ns": 3 * MS},
                                                               {"program": "p3", "ns": 3 * MS}])
        jit = s["detectors"]["repeated_jit"]
        self.assertEqual(len(jit), 1)  # -O0 is another program
        self.assertEqual((jit[0]["count"], jit[0]["contexts"], jit[0]["total_ns"]), (2, ["c1", "c2"], 10 * MS))

    def test_in_order_independent(self):
        ks = [kernel(1, "produce", 1, 2, [("b1", "w")]), kernel(2, "consume", 3, 4, [("b1", "r"), ("b2", "w")]),
              kernel(3, "other", 5, 6, [("b3", "rw")]), kernel(4, "nobuf", 7, 8)]
        io = self.analyse(ks)["detectors"]["in_order_independent"]
        self.assertEqual(len(io), 1)
        self.assertEqual((io[0]["independent_pairs"], io[0]["pairs_without_buffer_info"]), (1, 1))
        self.assertEqual(io[0]["examples"][0]["first"]["name"], "consume")

    def test_out_of_order_queue_is_not_reported(self):
        recs = [proc(), {"type": "queue", "id": "q1", "device": "d0", "in_order": False},
                kernel(1, "a", 1, 2, [("b1", "w")]), kernel(2, "b", 3, 4, [("b2", "w")])]
        s = analyse(load([self.write(recs)]))
        self.assertEqual(s["detectors"]["in_order_independent"], [])

    def test_not_aliased_with_sub_buffers(self):
        bufs = [{"type": "buffer", "id": "b1", "bytes": 200, "parent": None, "offset": 0},
                {"type": "buffer", "id": "b2", "bytes": 100, "parent": "b1", "offset": 0},
                {"type": "buffer", "id": "b3", "bytes": 100, "parent": "b1", "offset": 100}]
        ks = [kernel(1, "halves", 1, 2, [("b2", "r"), ("b3", "w")]), kernel(2, "whole_and_half", 3, 4, [("b1", "r"), ("b2", "w")])]
        na = self.analyse(bufs + ks)["detectors"]["kernel_params_not_aliased"]
        self.assertEqual([k["name"] for k in na], ["halves"])

    def test_unused_devices(self):
        s = self.analyse([{"type": "device", "id": "d1", "name": "gpu B", "used": False}])
        self.assertEqual(s["detectors"]["unused_devices"], [{"id": "d1", "name": "gpu B"}])

    def test_two_files_keep_their_ids_apart(self):
        a = self.write(BASE + [kernel(1, "a", 1, 2, [("b1", "w")])], "p-1.jsonl")
        b = self.write([proc(pid=2)] + BASE[1:] + [kernel(1, "a", 3, 4, [("b1", "w")])], "p-2.jsonl")
        s = analyse(load([a, b]))
        self.assertEqual(sorted(d["id"] for d in s["devices"]), ["1:d0", "2:d0"])
        self.assertEqual(s["detectors"]["in_order_independent"], [])  # one kernel per queue

    def test_chrome_trace_fields(self):
        sync = {"type": "sync", "kind": "finish", "start_ns": 5 * MS, "end_ns": 6 * MS, "queue": "q1", "tid": 1, "path": []}
        trace = chrome_trace(load([self.write(BASE + [kernel(1, "a", 1, 2), sync])]))
        json.dumps(trace)
        for e in trace["traceEvents"]:
            for k in ("ph", "ts", "pid", "tid", "name"):
                self.assertIn(k, e)
            if e["ph"] == "X":
                self.assertGreaterEqual(e["dur"], 0)
        names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
        self.assertIn("queue q1 (in-order)", names)
        self.assertIn("main thread", names)
        kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
        self.assertEqual((kernels[0]["ts"], kernels[0]["dur"]), (1000.0, 1000.0))  # microseconds from the start

    def test_malformed_files_exit_2_with_file_and_line(self):
        bad = self.write([proc(), "{not json"])
        r = self.cli("report", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{bad}:2: not JSON", r.stderr)
        missing = self.write([proc(), {"type": "kernel", "name": "k", "queue": "q1", "start_ns": 1}], "m-1.jsonl")
        r = self.cli("report", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{missing}:2: kernel record without int field 'end_ns'", r.stderr)
        r = self.cli("report", self.write([{"type": "device", "id": "d0"}], "n-1.jsonl"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("0 process records", r.stderr)
        r = self.cli("report", os.path.join(self.tmp.name, "absent.jsonl"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read", r.stderr)

    def test_path_table(self):
        recs = BASE + [{"type": "path", "id": 7, "frames": ["work", "main"]},
                       {"type": "sample", "tid": 1, "t_ns": 5 * MS, "path_id": 7}]
        s = analyse(load([self.write(recs)]))
        self.assertEqual(s["gpu_idle_cause"]["by_path"][0]["path"], "main > work")
        bad = self.write(BASE + [{"type": "sample", "tid": 1, "t_ns": 5, "path_id": 3}], "bad-1.jsonl")
        with self.assertRaisesRegex(TraceError, "bad-1.jsonl:4: path_id 3 has no path record"):
            load([bad])

    def test_report_writes_summary_and_trace(self):
        raw = self.write(BASE + [kernel(1, "a", 1, 2)])
        js, tr = os.path.join(self.tmp.name, "s.json"), os.path.join(self.tmp.name, "t.json")
        r = self.cli("report", raw, "--json", js, "--trace", tr)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("a: 1 x", r.stdout)
        with open(js) as f:
            self.assertEqual(json.load(f)["kernels"][0]["name"], "a")
        with open(tr) as f:
            self.assertTrue(json.load(f)["traceEvents"])

    def test_run_without_the_program(self):
        r = self.cli("run", "--out", self.tmp.name, "--", "/nonexistent/program")
        self.assertEqual(r.returncode, 127)  # as the shell (and env) report a missing program
        self.assertIn("program not found", r.stderr)

    def test_run_reports_a_crash_and_what_the_trace_kept(self):
        # A program that writes a raw trace as it goes, then dies of SIGSEGV (the tracer itself
        # is a stand-in: --api cuda only names it in CUDA_INJECTION64_PATH, which sh ignores).
        lib = os.path.join(self.tmp.name, "lib")
        os.makedirs(lib)
        open(os.path.join(lib, "libarchbench_trace_cuda.so"), "w").close()
        recs = BASE + [kernel(1, "a", 1, 2), kernel(2, "a", 3, 4), {"type": "end", "end_ns": 5 * MS, "signal": 11}]
        prog = os.path.join(self.tmp.name, "crasher")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\ncat > \"$ARCHBENCH_TRACE_DIR/crasher-1.jsonl\" <<'EOF'\n" +
                    "".join(json.dumps(r) + "\n" for r in recs) + "EOF\necho before the crash\nkill -SEGV $$\n")
        os.chmod(prog, 0o755)
        out = os.path.join(self.tmp.name, "out")
        r = self.cli("run", "--api", "cuda", "--lib-dir", lib, "--out", out, "--", prog)
        self.assertEqual(r.returncode, -11, r.stderr)  # died of the same signal, as the shell sees it
        self.assertEqual(r.stdout, "before the crash\n")
        self.assertIn("crashed (SIGSEGV, signal 11; the shell shows exit status 139)", r.stderr)
        self.assertIn("the process ended by signal SIGSEGV", r.stderr)
        self.assertIn("the trace keeps what was recorded until the program ended (records: device 1, kernel 2, queue 1)",
                      r.stderr)

    def test_run_says_a_daemon_still_writes_its_records(self):
        # The program's process exits at once; the child it leaves (a daemon) keeps the tracer and
        # writes later: the report must not say the program made no call.
        lib = os.path.join(self.tmp.name, "lib")
        os.makedirs(lib)
        open(os.path.join(lib, "libarchbench_trace_cuda.so"), "w").close()
        prog = os.path.join(self.tmp.name, "daemon")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\nsleep 5 > /dev/null 2>&1 &\necho $! > \"$ARCHBENCH_TRACE_DIR/../child\"\nexit 0\n")
        os.chmod(prog, 0o755)
        out = os.path.join(self.tmp.name, "out")
        r = self.cli("run", "--api", "cuda", "--lib-dir", lib, "--out", out, "--", prog)
        with open(os.path.join(self.tmp.name, "child")) as f:
            child = int(f.read())
        os.kill(child, 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"process {child} that the program left running still carries the tracer", r.stderr)
        self.assertNotIn("made no OpenCL/CUDA call", r.stderr)

    def test_function_name(self):
        self.assertEqual(function_name("ns::f(int) const"), "ns::f")
        self.assertEqual(function_name("a::(anonymous namespace)::B::g(std::function<void (int)>)"),
                         "a::(anonymous namespace)::B::g")
        self.assertEqual(function_name("libx.so+0x12"), "libx.so+0x12")


if __name__ == "__main__":
    unittest.main()
