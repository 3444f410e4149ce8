"""tools/archbench_pcsample.py on recorded sample buffers (tests/data/pcsample): attribution of PC
samples to kernels, lines and instructions, and seed 003's metrics (stall shares, latency
coverage, warp efficiency), host only."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from archbench.analysis import pcsample  # noqa: E402
from archbench.records import raw as raw_records  # noqa: E402
from archbench.render import pcsample as pc_render  # noqa: E402
from archbench.run import pcsampling as pc_run  # noqa: E402

TOOL = os.path.join(HERE, "..", "..", "tools", "archbench_pcsample.py")
DATA = os.path.join(HERE, "..", "data", "pcsample")
RAW, SASS = os.path.join(DATA, "raw.jsonl"), os.path.join(DATA, "raw.sass.jsonl")


def fake_program(d, script):
    """A shell script standing in for a CUDA program under the injection libraries (it writes what
    they would, from the environment the command gives it), and the empty files passed as the
    libraries: (program, libarchbench_pcsampling.so, libarchbench_topdown.so)."""
    prog, lib, tdlib = os.path.join(d, "prog.sh"), os.path.join(d, "libfake.so"), os.path.join(d, "libtd.so")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\n" + script)
    os.chmod(prog, 0o755)
    for path in (lib, tdlib):
        open(path, "w").close()
    return prog, lib, tdlib


class Arithmetic(unittest.TestCase):
    def test_stall_shares_leave_out_issued_samples(self):
        s = pcsample.stall_shares({"selected": 40, "not_selected": 5, "long_scoreboard": 100, "wait": 15,
                                   "math_pipe_throttle": 10})
        self.assertEqual(list(s), ["long_scoreboard", "wait", "math_pipe_throttle"])
        self.assertAlmostEqual(s["long_scoreboard"], 0.8)
        self.assertAlmostEqual(sum(s.values()), 1.0)
        self.assertEqual(pcsample.stall_shares({"selected": 3}), {})

    def test_latency_seed_003(self):
        # LAT 170, C 40 (issued), U 130: 1 + U/C = 4.25 warps needed; 2 held cover (2-1)*40 of U.
        lat = pcsample.latency({"selected": 40, "not_selected": 5, "long_scoreboard": 100, "wait": 15,
                                "math_pipe_throttle": 10}, warps=2.0)
        self.assertEqual((lat["lat"], lat["covered_issue"], lat["u"]), (170, 40, 130))
        self.assertAlmostEqual(lat["warps_needed"], 4.25)
        self.assertAlmostEqual(lat["covered"], 40)
        self.assertAlmostEqual(lat["uncovered"], 90)
        self.assertAlmostEqual(lat["issue_utilization"], 2 / 4.25)
        self.assertEqual(set(lat["latency_bound"]), {"long_scoreboard", "wait"})  # throttles are throughput
        self.assertAlmostEqual(lat["latency_bound"]["long_scoreboard"]["share"], 100 / 170)
        self.assertAlmostEqual(lat["latency_bound"]["long_scoreboard"]["uncovered_share"], 100 / 170 * 90 / 130)
        # Enough warps: everything covered; no issue at all: nothing to divide by.
        self.assertEqual(pcsample.latency({"selected": 10, "wait": 30}, warps=16)["uncovered"], 0)
        self.assertIsNone(pcsample.latency({"long_scoreboard": 7})["warps_needed"])

    def test_warp_efficiency_and_scalar_loss(self):
        m = pcsample.sass_metrics([(100, 3200), (100, 3200), (50, 50)])
        self.assertEqual((m["inst_executed"], m["act"], m["tot"], m["wast"]), (250, 6450, 8000, 1550))
        self.assertAlmostEqual(m["warp_efficiency"], 6450 / 8000)
        self.assertEqual(m["scalar_loss"], 31 * 50)  # the one-lane instruction's 31 idle lanes
        self.assertIsNone(pcsample.sass_metrics([])["warp_efficiency"])

    def test_reason_names(self):
        self.assertEqual(pcsample.reason("smsp__pcsamp_warps_issue_stalled_no_instructions"), "no_instruction")
        self.assertEqual(pcsample.reason("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"), "")
        self.assertEqual(pcsample.reason("smsp__pcsamp_warps_issue_stalled_new_reason"), "new_reason")  # shown, not dropped

    def test_disassembly(self):
        text = ("\t.text._Z9hot_chasePKiPfi:\n"
                "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
                "        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;   /* 0x... */\n"
                "\t.text._Z5lanesILi4EEvPfi:\n        /*0000*/                   EXIT ;\n")
        d = pc_run.parse_disassembly(text)
        self.assertEqual(d["_Z9hot_chasePKiPfi"][0x10], "LDG.E R2, desc[UR4][R2.64]")
        self.assertEqual(d["_Z5lanesILi4EEvPfi"], {0: "EXIT"})


class Attribution(unittest.TestCase):
    def kernels(self):
        return {k["kernel"]: k for k in pcsample.analyse(raw_records.load_pc(RAW), raw_records.load_pc(SASS))}

    def test_kernels_lines_pcs(self):
        ks = self.kernels()
        a = ks["hot_chase(int const*, float*, int)"]
        self.assertEqual(a["samples"], 170)  # the *_not_issued variant is not counted twice
        self.assertAlmostEqual(a["time_share"], 170 / 195)
        self.assertAlmostEqual(a["stalls"]["long_scoreboard"], 0.8)
        self.assertEqual(a["launches"], 3)
        top = a["lines"][0]
        self.assertEqual((top["file"], top["line"], top["samples"]), ("planted_src.cu", 20, 115))  # two PCs, two drains
        self.assertEqual(list(top["stalls"]), ["long_scoreboard"])
        pc10 = next(p for p in a["pcs"] if p["pc"] == 0x10)
        self.assertEqual(pc10["reasons"], {"long_scoreboard": 80, "selected": 10, "not_selected": 5})
        self.assertAlmostEqual(a["sass"]["warp_efficiency"], 6450 / 8000)
        self.assertAlmostEqual(a["latency"]["warps_needed"], 4.25)
        b = ks["void lanes<4>(float*, int)"]
        self.assertEqual(b["stalls"], {"no_instruction": 1.0})
        self.assertEqual(b["sass"]["inst_executed"], 1010)  # an instruction never sampled still counts
        self.assertEqual(next(l for l in b["lines"] if l["line"] == 40)["sass"]["warp_efficiency"], 0.25)

    def test_command_writes_text_json_and_html(self):
        d = tempfile.mkdtemp()
        j, h = os.path.join(d, "out.json"), os.path.join(d, "out.html")
        p = subprocess.run([sys.executable, TOOL, "--report", RAW, "--sass-report", SASS, "--source-dir", DATA,
                            "--json", j, "--html", h], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("p = next[p];  // the planted chase", p.stdout)  # the source beside its line
        self.assertLess(p.stdout.index("hot_chase "), p.stdout.index("lanes "))  # short names in the tables
        doc = json.load(open(j))
        self.assertEqual(doc["context"]["period_log2"], 12)
        self.assertEqual(doc["kernels"][0]["lines"][0]["source"], "p = next[p];  // the planted chase")
        page = open(h).read()
        self.assertIn("the planted chase", page)
        self.assertNotIn("<script", page)
        self.assertNotIn("http", page.replace("http-equiv", ""))

    def test_bad_input(self):
        d = tempfile.mkdtemp()
        bad = os.path.join(d, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"type": "process", "pid": 1}\n{"type": "pc", "name": "k", "pc": 1, "stalls": {"x": -1}}\n')
        p = subprocess.run([sys.executable, TOOL, "--report", bad], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad.jsonl:2", p.stderr)
        with open(bad, "w") as f:
            f.write('{"type": "kernel"}\n')
        self.assertEqual(subprocess.run([sys.executable, TOOL, "--report", bad], capture_output=True).returncode, 2)
        p = subprocess.run([sys.executable, TOOL, "--period", "3", "--report", RAW], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)

    def test_overflow_names_the_samples_lost(self):
        # CUPTI's hardware buffer overflowed (the families run on the H100: 44 drains failed): the
        # report says how many drains failed and about how many samples were lost.
        d = tempfile.mkdtemp()
        raw = os.path.join(d, "full.jsonl")
        with open(raw, "w") as f:
            for line in open(RAW):
                r = json.loads(line)
                if r["type"] == "end":
                    r.update({"hardware_buffer_full": True, "overflow_drains": 44, "overflow_s": 2.2,
                              "lost_samples_estimate": 31000000})
                    line = json.dumps(r) + "\n"
                f.write(line)
        j = os.path.join(d, "full.json")
        p = subprocess.run([sys.executable, TOOL, "--report", raw, "--json", j], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("hardware buffer overflowed: 44 drains failed over 2.20 s; about 31000000 samples lost", p.stdout)
        self.assertEqual(json.load(open(j))["context"]["lost_samples_estimate"], 31000000)

    def test_cut_short_run_says_so(self):
        # A run killed before its end record (the first H100 run hung): the drained samples count
        # and the report names what went wrong, with the watchdog's records.
        d = tempfile.mkdtemp()
        raw = os.path.join(d, "cut.jsonl")
        with open(raw, "w") as f:
            for line in open(RAW):
                if json.loads(line)["type"] not in ("end", "launch"):
                    f.write(line)
            f.write('{"type":"drain","context":1,"pcs":0,"total_samples":7,"dropped_samples":1}\n')
            f.write('{"type":"watchdog","stuck":"program","call":"cuStreamSynchronize","seconds":10.5,'
                    '"library_call":""}\n')
            f.write('{"type":"watchdog","stuck":"library","call":"cuptiPCSamplingDisable","seconds":10.2,'
                    '"at_exit":true}\n')
        j = os.path.join(d, "cut.json")
        p = subprocess.run([sys.executable, TOOL, "--report", raw, "--json", j], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Problems:", p.stdout)
        self.assertIn("no end record", p.stdout)
        self.assertIn("waited in cuStreamSynchronize for 10 s", p.stdout)
        self.assertIn("stuck in cuptiPCSamplingDisable for 10 s at exit", p.stdout)
        ctx = json.load(open(j))["context"]
        self.assertTrue(ctx["incomplete"])
        self.assertGreaterEqual(ctx["total_samples"], 7)

    def test_run_timeout_stops_a_hung_program(self):
        # --timeout: a program that never ends is stopped (status 124) and what it wrote is reported.
        d = tempfile.mkdtemp()
        prog = os.path.join(d, "hang.sh")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\ncp %s \"$ARCHBENCH_PCSAMPLE_OUT\" 2>/dev/null; sleep 60\n" % RAW)
        os.chmod(prog, 0o755)
        lib = os.path.join(d, "libfake.so")
        open(lib, "w").close()
        p = subprocess.run([sys.executable, TOOL, "--lib", lib, "--timeout", "1", "--no-native", "--no-sass",
                            "--raw", os.path.join(d, "raw.jsonl"), "--", prog], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.returncode, 124, p.stderr)
        self.assertIn("ran past 1 s", p.stderr)
        self.assertIn("hot_chase", p.stdout)



class SassRun(unittest.TestCase):
    def test_functions_without_counts_are_a_problem(self):
        # The third H100 run: only the first function launched was patched; the report says which are missing.
        recs = {"end": [{"type": "end", "sass_ranges": 3, "sass_deferred_ranges": 1, "sass_dropped_records": 0}],
                "sass": [{"function": "hot"}], "launch": [{"function": "hot"}, {"function": "b"}, {"function": "a"}]}
        context = {}
        pcsample.sass_context(recs, context)
        self.assertEqual(context["sass_missing"], ["a", "b"])
        self.assertEqual(context["sass_ranges"], 3)
        self.assertIn("no counts for 2 of the 3 launched functions: a, b", context["problems"][0])
        context = {}
        pcsample.sass_context({"end": [], "sass": [{"function": "a"}], "launch": [{"function": "a"}]}, context)
        self.assertNotIn("problems", context)

    def test_flush_log_and_strategy(self):
        # The library's sass_flush records: each flush's functions and records, in order; the
        # strategy names the Problem; a failed flush and the late functions are kept.
        recs = {"end": [{"type": "end", "sass_strategy": "deferred", "sass_enables": 1, "sass_flushes": 2}],
                "sass_flush": [{"type": "sass_flush", "where": "range switch", "records": 0, "functions": {}, "error": ""},
                               {"type": "sass_flush", "where": "exit", "records": 5,
                                "functions": {"hot": {"records": 3, "inst_executed": 9}, "b": {"records": 2}},
                                "error": ""},
                               {"type": "sass_flush", "where": "module unload", "records": 0, "functions": {},
                                "error": "CUPTI_ERROR_INVALID_OPERATION"}],
                "sass_late": [{"type": "sass_late", "function": "late"}],
                "sass": [{"function": "hot"}, {"function": "b"}],
                "launch": [{"function": "hot"}, {"function": "b"}, {"function": "late"}]}
        flushes, counted = pcsample.sass_flushes(recs)
        self.assertEqual([f["where"] for f in flushes], ["range switch", "exit", "module unload"])
        self.assertEqual(flushes[1]["functions"], {"hot": 3, "b": 2})
        self.assertEqual(counted, {"hot", "b"})
        context = {}
        pcsample.sass_context(recs, context)
        self.assertEqual(context["sass_strategy"], "deferred")
        self.assertEqual(context["sass_late"], ["late"])
        self.assertEqual(context["sass_counted"], 2)
        self.assertEqual(context["sass_missing"], ["late"])
        self.assertIn("flush failed: CUPTI_ERROR_INVALID_OPERATION", context["problems"][0])
        self.assertIn("SASS metrics (strategy deferred): no counts for 1 of the 3 launched functions: late",
                      context["problems"][1])
        text = pc_render.text_report([], context)
        self.assertIn("SASS metrics (strategy deferred): counts for 2 of 3 launched functions, 3 flushes", text)
        # An older raw file (no flush records, no strategy): as before.
        context = {}
        pcsample.sass_context({"end": [{"sass_ranges": 1}], "sass": [], "launch": []}, context)
        self.assertNotIn("sass_flush_log", context)
        self.assertNotIn("SASS metrics (strategy", pc_render.text_report([], context))

    def run_env(self, options, knobs=None):
        """The environment of each run of the program under the given options and debugging knobs
        (ARCHBENCH_PC_* variables): the sampled run's, and a list of the SASS runs'."""
        with tempfile.TemporaryDirectory() as d:
            prog = os.path.join(d, "prog.sh")
            with open(prog, "w") as f:
                f.write("#!/bin/sh\necho --- >> %s/env.txt\nenv | grep -E '^(CUDA_MODULE_LOADING|ARCHBENCH_PCSAMPLE_"
                        "(MODE|PERIOD|HW_BUFFER_MB|PC_ENABLE|SASS_RANGE|SASS_STRATEGY|SASS_LAZY|SASS_TARGET))=' | sort >> %s/env.txt\n"
                        "cp %s \"$ARCHBENCH_PCSAMPLE_OUT\"\n" % (d, d, RAW))
            os.chmod(prog, 0o755)
            lib = os.path.join(d, "libfake.so")
            open(lib, "w").close()
            env = {k: v for k, v in os.environ.items()
                   if k != "CUDA_MODULE_LOADING" and not k.startswith(("ARCHBENCH_PCSAMPLE_", "ARCHBENCH_PC_"))}
            env.update(knobs or {})
            env["ARCHBENCH_PCSAMPLE_SASS_LAZY"] = "1"  # the command's choice replaces what the caller had
            env["ARCHBENCH_PCSAMPLE_SASS_TARGET"] = "7"
            p = subprocess.run([sys.executable, TOOL, "--lib", lib, "--sass", "--warp-pass", "never",
                                "--raw", os.path.join(d, "raw.jsonl")] + options + ["--", prog],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(d, "env.txt")) as f:
                blocks = [b.split() for b in f.read().split("---") if b.strip()]
        self.assertEqual(blocks[0].count("ARCHBENCH_PCSAMPLE_MODE=pc"), 1)  # the sampled run first, then SASS
        self.assertTrue(all("ARCHBENCH_PCSAMPLE_MODE=sass" in b for b in blocks[1:]))
        return blocks[0], blocks[1:]

    def test_sass_run_environment(self):
        # Default (each): a SASS run per sampled kernel, hottest first, each strategy target with the
        # function's mangled name, eager module loading and the library's own patching choice; the
        # sampled run the library's automatic period (no --period), a 32 MB hardware buffer and the
        # enable on the library's thread (async: CG 18-56 ms faster).
        pc, runs = self.run_env([])
        self.assertIn("ARCHBENCH_PCSAMPLE_PERIOD=auto", pc)
        self.assertIn("ARCHBENCH_PCSAMPLE_HW_BUFFER_MB=32", pc)
        self.assertIn("ARCHBENCH_PCSAMPLE_PC_ENABLE=async", pc)
        self.assertFalse(any(l.startswith("CUDA_MODULE_LOADING=") for l in pc))
        self.assertEqual([[l for l in b if l.startswith("ARCHBENCH_PCSAMPLE_SASS_TARGET=")] for b in runs],
                         [["ARCHBENCH_PCSAMPLE_SASS_TARGET=_Z9hot_chasePKiPfi"],
                          ["ARCHBENCH_PCSAMPLE_SASS_TARGET=_Z5lanesILi4EEvPfi"]])
        for sass in runs:
            self.assertIn("CUDA_MODULE_LOADING=EAGER", sass)
            self.assertIn("ARCHBENCH_PCSAMPLE_SASS_STRATEGY=target", sass)
            self.assertFalse(any(l.startswith(("ARCHBENCH_PCSAMPLE_SASS_LAZY=", "ARCHBENCH_PCSAMPLE_SASS_RANGE="))
                                 for l in sass))
        self.assertEqual(len(self.run_env(["--sass-kernels", "1"])[1]), 1)  # the hottest only
        # An older strategy: one SASS run, the caller's target not passed on.
        _, runs = self.run_env([], {"ARCHBENCH_PC_SASS_STRATEGY": "deferred"})
        self.assertEqual(len(runs), 1)
        self.assertIn("ARCHBENCH_PCSAMPLE_SASS_STRATEGY=deferred", runs[0])
        self.assertFalse(any(l.startswith("ARCHBENCH_PCSAMPLE_SASS_TARGET=") for l in runs[0]))

    def test_sass_strategy_options(self):
        pc, (sass,) = self.run_env([], {"ARCHBENCH_PC_SASS_STRATEGY": "reconfig", "ARCHBENCH_PC_SASS_LAZY_PATCHING": "0",
                                        "ARCHBENCH_PC_ENABLE": "sync", "ARCHBENCH_PC_SASS_LOADING": "lazy"})
        self.assertIn("ARCHBENCH_PCSAMPLE_PC_ENABLE=sync", pc)
        self.assertIn("ARCHBENCH_PCSAMPLE_SASS_STRATEGY=reconfig", sass)
        self.assertIn("ARCHBENCH_PCSAMPLE_SASS_LAZY=0", sass)
        self.assertIn("CUDA_MODULE_LOADING=LAZY", sass)
        _, (sass,) = self.run_env(["--sass-range", "one"])  # the older option: one range
        self.assertIn("ARCHBENCH_PCSAMPLE_SASS_STRATEGY=once", sass)
        _, (sass,) = self.run_env(["--sass-target", "lanes<8>"], {"ARCHBENCH_PC_SASS_STRATEGY": "target"})  # one kernel a run
        self.assertIn("ARCHBENCH_PCSAMPLE_SASS_STRATEGY=target", sass)
        self.assertIn("ARCHBENCH_PCSAMPLE_SASS_TARGET=lanes<8>", sass)
        p = subprocess.run([sys.executable, TOOL, "--sass-target", "2", "--report", RAW], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)  # a target without the target strategy
        self.assertIn("--sass-target goes with ARCHBENCH_PC_SASS_STRATEGY=target", p.stderr)
        for bad, knobs in ((["--sass-kernels", "2"], {"ARCHBENCH_PC_SASS_STRATEGY": "once"}),
                           (["--sass-kernels", "0"], {}), (["--sass-kernels", "some"], {}),
                           ([], {"ARCHBENCH_PC_DRAIN": "never"}), ([], {"ARCHBENCH_PC_WATCHDOG": "soon"})):
            p = subprocess.run([sys.executable, TOOL, "--report", RAW] + bad, capture_output=True, text=True,
                               env=dict(os.environ, **knobs))
            self.assertEqual(p.returncode, 2, bad)
            for var in knobs:  # a knob's bad value: the variable named
                self.assertIn(var, p.stderr)

    def test_dropped_records_and_target(self):
        # CUPTI's dropped records are a Problem with or without late functions; the target is named.
        recs = {"end": [{"type": "end", "sass_strategy": "target", "sass_target": "2", "sass_dropped_records": 8}],
                "sass": [{"function": "b"}], "launch": [{"function": "a"}, {"function": "b"}]}
        context = {}
        pcsample.sass_context(recs, context)
        self.assertIn("SASS metrics: CUPTI dropped 8 instruction records at a range's end", context["problems"])
        self.assertIn("SASS metrics (strategy target, target 2): counts for 1 of 2 launched functions",
                      pc_render.text_report([], context))
        pcsample.sass_context({"end": [], "sass": [], "launch": []}, {})  # no end record: no error


class Coverage(unittest.TestCase):
    """The report says plainly which kernels have per-line counts (SASS metrics), which only per-kernel
    ones (warp pass), which none; and the sampled run's fixed costs."""

    def kernel(self, name, source):
        return {"kernel": name, "efficiency": {"source": source}, "samples": 0, "time_share": 0.0, "latency": {},
                "stalls": {}, "lines": []}

    def test_coverage_statement(self):
        ks = [self.kernel("hot_chase(unsigned int const*, float*)", "sass_metrics"),
              self.kernel("void lanes<1>(float*, int)", "counters"), self.kernel("void lanes<2>(float*, int)", "counters"),
              self.kernel("mystery()", "unavailable")]
        cov = pcsample.count_coverage(ks)
        self.assertEqual(cov["per_line"], ["hot_chase(unsigned int const*, float*)"])
        self.assertEqual(cov["per_kernel_only"], ["void lanes<1>(float*, int)", "void lanes<2>(float*, int)"])
        self.assertEqual(cov["none"], ["mystery()"])
        text = pc_render.text_report(ks, {})
        self.assertIn("Per-line instruction counts and warp efficiency (SASS metrics): 1 of 4 kernels: hot_chase(", text)
        self.assertIn("Per-kernel counts only, no per-line figures (warp pass counters): void lanes<1>(float*, int), "
                      "void lanes<2>(float*, int)", text)
        self.assertIn("No instruction counts: mystery()", text)
        # No SASS run and no warp pass: nothing claimed either way.
        self.assertNotIn("Per-line instruction counts", pc_render.text_report([self.kernel("k", "unavailable")], {}))
        # Every kernel counted per line: the one line.
        text = pc_render.text_report([self.kernel("k", "sass_metrics")], {})
        self.assertIn("(SASS metrics): 1 of 1 kernels: k", text)
        self.assertNotIn("Per-kernel counts only", text)

    def test_fixed_costs(self):
        recs = {"config": [], "error": [], "end": [{"type": "end", "pc_enable": "async", "enable_s": 0.08, "first_launch_s": 0.084,
                                                    "exit_drain_s": 0.002, "disable_s": 0.043}],
                "pc_enable_wait": [{"type": "pc_enable_wait", "waited_s": 0.047}]}
        context = pcsample.context_of(recs, {})
        line = pc_render.fixed_costs_line(context)
        self.assertEqual(line, "PC sampling's fixed costs: enable 0.080 s (async: the first launch waited 0.047 s), "
                               "first launch 0.084 s, drain at exit 0.002 s, disable 0.043 s")
        self.assertIn(line, pc_render.text_report([], context))
        # Not measured (-1, as a SASS run writes) or an older file: no line.
        context = pcsample.context_of({"config": [], "error": [], "end": [{"type": "end", "enable_s": -1}]}, {})
        self.assertEqual(pc_render.fixed_costs_line(context), "")


def warp_raw(d, kernels):
    """A synthetic warp pass file (libarchbench_topdown.so, ARCHBENCH_TOPDOWN_METRICS=warp): one
    kernel record per (name, mangled, inst, thread_inst, pred_on) launch."""
    path = os.path.join(d, "raw.warp.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"type": "process", "pid": 9, "command": "planted"}) + "\n")
        f.write(json.dumps({"type": "profiler", "chip": "GH100", "passes": 1, "metric_set": "warp",
                            "warp_counters": "smsp__inst_executed.sum; smsp__thread_inst_executed.sum"}) + "\n")
        for seq, (name, mangled, inst, thread, pred) in enumerate(kernels):
            f.write(json.dumps({"type": "kernel", "name": name, "mangled": mangled, "seq": seq, "duration_ns": 1000,
                                "metrics": {}, "topdown": {},
                                "warp": {"smsp__inst_executed.sum": inst, "smsp__thread_inst_executed.sum": thread,
                                         "smsp__thread_inst_executed_pred_on.sum": pred,
                                         "sm__cycles_elapsed.avg": 5000}}) + "\n")
        f.write(json.dumps({"type": "end"}) + "\n")
    return path


class WarpPass(unittest.TestCase):
    """The H100's SASS metrics counted only the first function launched: the per-kernel counters
    (the TopDown injection's warp set) stand in for the kernels without records."""
    LANES = ("void lanes<4>(float*, int)", "_Z5lanesILi4EEvPfi")

    def sass_without_lanes(self, d):
        path = os.path.join(d, "raw.sass.jsonl")
        with open(path, "w") as f:
            for line in open(SASS):
                if "lanes" not in line:
                    f.write(line)
            f.write(json.dumps({"type": "launch", "function": "_Z9hot_chasePKiPfi", "name": "hot_chase(int const*, float*, int)",
                                "launches": 3, "warps_per_scheduler": 2.0}) + "\n")
            f.write(json.dumps({"type": "launch", "function": self.LANES[1], "name": self.LANES[0],
                                "launches": 1, "warps_per_scheduler": 0.25}) + "\n")
        return path

    def test_counters_arithmetic(self):
        # Two launches: 1000 + 3000 warp-instructions, 8000 + 24000 thread-instructions: ACT 8 of 32.
        w = pcsample.warp_counters([{"smsp__inst_executed.sum": 1000, "smsp__thread_inst_executed.sum": 8000,
                                     "smsp__thread_inst_executed_pred_on.sum": 7000},
                                    {"smsp__inst_executed.sum": 3000, "smsp__thread_inst_executed.sum": 24000,
                                     "smsp__thread_inst_executed_pred_on.sum": 21000}])
        self.assertEqual((w["inst_executed"], w["act"], w["tot"], w["wast"]), (4000, 8.0, 32, 24.0))
        self.assertAlmostEqual(w["warp_efficiency"], 0.25)
        self.assertAlmostEqual(w["act_pred_on"], 7.0)
        self.assertEqual((w["source"], w["launches_profiled"]), ("counters", 2))
        self.assertIsNone(w["scalar_loss"])  # needs per-instruction counts
        self.assertIsNone(pcsample.warp_counters([])["warp_efficiency"])

    def test_kernel_without_sass_records_gets_the_counters(self):
        with tempfile.TemporaryDirectory() as d:
            sass = self.sass_without_lanes(d)
            warp, _ = raw_records.load_warp(warp_raw(d, [self.LANES + (1000, 8000, 8000), self.LANES + (1000, 8000, 8000),
                                                      ("k_only_here", "_Z11k_only_herev", 10, 320, 320)]))
            ks = {k["kernel"]: k for k in pcsample.analyse(raw_records.load_pc(RAW), raw_records.load_pc(sass), warp)}
        hot, lanes = ks["hot_chase(int const*, float*, int)"], ks[self.LANES[0]]
        self.assertEqual(hot["efficiency"]["source"], "sass_metrics")  # per instruction where CUPTI counted it
        self.assertAlmostEqual(hot["efficiency"]["warp_efficiency"], 6450 / 8000)
        self.assertEqual(hot["efficiency"]["lines"], "sass_metrics")
        self.assertEqual(lanes["efficiency"]["source"], "counters")
        self.assertAlmostEqual(lanes["efficiency"]["warp_efficiency"], 0.25)
        self.assertEqual(lanes["efficiency"]["inst_executed"], 2000)
        self.assertEqual(lanes["efficiency"]["lines"], "unavailable")
        self.assertNotIn("sass", lanes["lines"][0])  # no per-line figure made up
        self.assertEqual(lanes["samples"], 25)  # the samples still attributed
        self.assertAlmostEqual(ks["k_only_here"]["efficiency"]["warp_efficiency"], 1.0)  # counted, never sampled

    def test_pass_needed_only_for_missing_functions(self):
        with tempfile.TemporaryDirectory() as d:
            sass = self.sass_without_lanes(d)
            a = lambda mode, no_sass=False: type("A", (), {"warp_pass": mode, "no_sass": no_sass})  # noqa: E731
            sass, full = raw_records.load_pc(sass), raw_records.load_pc(SASS)
            self.assertEqual(pcsample.warp_pass_needed(a("auto"), sass), [self.LANES[1]])
            self.assertIsNone(pcsample.warp_pass_needed(a("auto"), full))  # every launched function counted
            self.assertIsNone(pcsample.warp_pass_needed(a("never"), sass))
            self.assertEqual(pcsample.warp_pass_needed(a("always"), full), [])
            self.assertEqual(pcsample.warp_pass_needed(a("auto"), None), [])  # no SASS records at all
            self.assertIsNone(pcsample.warp_pass_needed(a("auto", True), None))

    def test_command_runs_the_warp_pass_and_says_the_source(self):
        with tempfile.TemporaryDirectory() as d:
            sass = self.sass_without_lanes(d)
            warp = warp_raw(d, [self.LANES + (1000, 8000, 8000)])
            prog, lib, tdlib = fake_program(
                d, "if [ -n \"$ARCHBENCH_TOPDOWN_OUT\" ]; then env | grep -E '^ARCHBENCH_TOPDOWN_' | sort > %s/warp.env;"
                   " cp %s \"$ARCHBENCH_TOPDOWN_OUT\"; exit 0; fi\n"
                   "if [ \"$ARCHBENCH_PCSAMPLE_MODE\" = sass ]; then cp %s \"$ARCHBENCH_PCSAMPLE_OUT\";"
                   " else cp %s \"$ARCHBENCH_PCSAMPLE_OUT\"; fi\n" % (d, warp, sass, RAW))
            j = os.path.join(d, "out.json")
            env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHBENCH_TOPDOWN")}
            p = subprocess.run([sys.executable, TOOL, "--lib", lib, "--topdown-lib", tdlib, "--sass",
                                "--raw", os.path.join(d, "run.jsonl"), "--json", j, "--", prog],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            wenv = open(os.path.join(d, "warp.env")).read().split()
            doc = json.load(open(j))
        self.assertIn("ARCHBENCH_TOPDOWN_METRICS=warp", wenv)
        self.assertIn("ARCHBENCH_TOPDOWN_KERNEL=^(_Z5lanesILi4EEvPfi)$", wenv)  # only the function SASS missed
        self.assertIn("ARCHBENCH_TOPDOWN_SAMPLE=1", wenv)
        lanes = next(k for k in doc["kernels"] if k["kernel"] == self.LANES[0])
        self.assertEqual(lanes["efficiency"]["source"], "counters")
        self.assertAlmostEqual(lanes["efficiency"]["warp_efficiency"], 0.25)
        self.assertEqual(doc["context"]["warp_functions"], [self.LANES[1]])
        row = next(l for l in p.stdout.splitlines() if l.startswith("lanes "))  # its short name
        self.assertIn("0.250", row)
        self.assertIn("ctr", row)
        self.assertIn("sass", next(l for l in p.stdout.splitlines() if l.startswith("hot_chase")))

    def test_report_mode_takes_a_warp_file(self):
        with tempfile.TemporaryDirectory() as d:
            sass = self.sass_without_lanes(d)
            warp = warp_raw(d, [self.LANES + (1000, 16000, 16000)])
            j = os.path.join(d, "out.json")
            p = subprocess.run([sys.executable, TOOL, "--report", RAW, "--sass-report", sass, "--warp-report", warp,
                                "--json", j], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            lanes = next(k for k in json.load(open(j))["kernels"] if k["kernel"] == self.LANES[0])
        self.assertAlmostEqual(lanes["warp"]["act"], 16.0)
        self.assertAlmostEqual(lanes["efficiency"]["warp_efficiency"], 0.5)


HOT, LANES, TINY = "_Z9hot_chasePKiPfi", "_Z5lanesILi4EEvPfi", "_Z4tinyv"


def text(path):
    with open(path) as f:
        return f.read()


def sampled_raw(d):
    """The planted sampled run (RAW: hot_chase 170 samples, lanes<4> 25) with a third kernel launched
    and never sampled (tiny)."""
    path = os.path.join(d, "pc.jsonl")
    with open(path, "w") as f:
        for line in text(RAW).splitlines(True):
            if json.loads(line)["type"] == "end":
                f.write(json.dumps({"type": "launch", "function": TINY, "name": "tiny()", "launches": 1,
                                    "warps_per_scheduler": 1.0}) + "\n")
            f.write(line)
    return path


def target_raw(path, target, stray):
    """A SASS metrics run of strategy target for `target` (the planted SASS file's records of it) with
    `stray` extra records of other functions [(function, pc, inst)] that must not count, and the
    launch records of all three kernels."""
    with open(path, "w") as f:
        f.write(json.dumps({"type": "process", "pid": 3, "mode": "sass", "sass_strategy": "target",
                            "sass_target": target}) + "\n")
        f.write(json.dumps({"type": "sass_range", "function": target, "strategy": "target"}) + "\n")
        for line in text(SASS).splitlines(True):
            if json.loads(line).get("function") == target:
                f.write(line)
        for fn, pc, inst in stray:
            f.write(json.dumps({"type": "sass", "function": fn, "name": fn, "pc": pc, "file": "planted_src.cu",
                                "line": 20, "smsp__sass_inst_executed": inst,
                                "smsp__sass_thread_inst_executed": 32 * inst}) + "\n")
        for fn in (HOT, LANES, TINY):
            f.write(json.dumps({"type": "launch", "function": fn, "name": fn, "launches": 1,
                                "warps_per_scheduler": 1.0}) + "\n")
        f.write(json.dumps({"type": "end", "mode": "sass", "sass_strategy": "target", "sass_target": target,
                            "sass_ranges": 1, "sass_dropped_records": 0}) + "\n")
    return path


class EachKernel(unittest.TestCase):
    """--sass-strategy each (the default): CUPTI counted one function a process on the H100, so a
    SASS run per chosen kernel, each keeping only its target's records, merged."""

    def two_runs(self, d):
        # Each run also has a stray record of the other kernel (and of tiny), far larger than the real ones.
        return (target_raw(os.path.join(d, "raw.sass.1.jsonl"), HOT, [(LANES, 8, 999999), (TINY, 0, 5)]),
                target_raw(os.path.join(d, "raw.sass.2.jsonl"), LANES, [(HOT, 16, 777777)]))

    def test_plan_hottest_or_all(self):
        with tempfile.TemporaryDirectory() as d:
            recs = raw_records.load_pc(sampled_raw(d))
        self.assertEqual(pcsample.sass_plan(recs, 5), [(HOT, "hot_chase(int const*, float*, int)"),
                                                       (LANES, "void lanes<4>(float*, int)")])  # sampled only
        self.assertEqual(pcsample.sass_plan(recs, 1), [(HOT, "hot_chase(int const*, float*, int)")])
        self.assertEqual([f for f, _ in pcsample.sass_plan(recs)], [HOT, LANES, TINY])  # all launched, hottest first
        self.assertEqual(pcsample.sass_plan({"pc": [], "sass": [], "launch": []}), [])

    def test_merge_keeps_each_runs_target_only(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = self.two_runs(d)
            merged = pcsample.sass_records([(None, a), (None, b)])  # the targets from the files
            ks = {k["function"]: k for k in pcsample.analyse(raw_records.load_pc(sampled_raw(d)), merged)}
        self.assertEqual(merged["sass_chosen"], [HOT, LANES])
        self.assertEqual({r["function"] for r in merged["sass"]}, {HOT, LANES})
        self.assertEqual(len(merged["sass"]), 5)  # 3 + 2: no stray, nothing twice
        hot, lanes = ks[HOT], ks[LANES]
        self.assertEqual(hot["sass"]["inst_executed"], 250)
        self.assertEqual({l["line"]: l["sass"]["inst_executed"] for l in hot["lines"]}, {20: 150, 21: 100})
        self.assertAlmostEqual(hot["sass"]["warp_efficiency"], 6450 / 8000)
        self.assertEqual({l["line"]: l["sass"]["inst_executed"] for l in lanes["lines"]}, {40: 1000, 41: 10})
        self.assertEqual(next(l for l in lanes["lines"] if l["line"] == 40)["sass"]["warp_efficiency"], 0.25)
        self.assertNotIn(TINY, ks)  # only a stray record: no counts claimed
        context = {}
        pcsample.sass_context(merged, context)
        self.assertEqual((context["sass_strategy"], context["sass_runs"], context["sass_counted"]), ("each", 2, 2))
        self.assertEqual(context["sass_counted_functions"], [HOT, LANES])
        self.assertEqual(context["sass_uncounted"], [TINY])  # launched: per-kernel counts only
        self.assertNotIn("problems", context)  # every chosen function counted
        a_ = type("A", (), {"warp_pass": "auto", "no_sass": False})
        self.assertEqual(pcsample.warp_pass_needed(a_, merged), [TINY])
        # A chosen function whose run wrote nothing is missing against the chosen, not the launched.
        context = {}
        with tempfile.TemporaryDirectory() as d:
            pcsample.sass_context(pcsample.sass_records([(HOT, self.two_runs(d)[0])], [HOT, TINY]), context)
        self.assertEqual(context["sass_missing"], [TINY])
        self.assertIn("(strategy each): no counts for 1 of the 2 chosen functions: _Z4tinyv", context["problems"][0])
        self.assertIn("SASS metrics (strategy each, 1 run): counts for 1 of 2 chosen functions",
                      pc_render.text_report([], context))
        # A run of another strategy gives only the functions no run for one function gave.
        with tempfile.TemporaryDirectory() as d:
            merged = pcsample.sass_records([(None, SASS), (None, self.two_runs(d)[0])])
        self.assertEqual(sum(r["smsp__sass_inst_executed"] for r in merged["sass"]), 250 + 1010)
        self.assertIsNone(merged["sass_chosen"])

    def test_report_mode_merges_several_files(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = self.two_runs(d)
            j = os.path.join(d, "out.json")
            p = subprocess.run([sys.executable, TOOL, "--report", sampled_raw(d), "--sass-report", a, "--sass-report", b,
                                "--json", j], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(text(j))
        ks = {k["function"]: k for k in doc["kernels"]}
        self.assertEqual(ks[HOT]["efficiency"]["inst_executed"], 250)
        self.assertEqual(ks[LANES]["efficiency"]["inst_executed"], 1010)
        self.assertEqual(doc["context"]["counts"]["per_line"], ["hot_chase(int const*, float*, int)",
                                                                "void lanes<4>(float*, int)"])
        self.assertEqual(doc["context"]["sass_functions"], [HOT, LANES])
        self.assertIn("SASS metrics (strategy each, 2 runs): counts for 2 of 2 chosen functions", p.stdout)

    def test_run_counts_each_chosen_kernel_in_its_own_run(self):
        # A fake program standing in for the library: the sampled run writes the planted samples, a
        # SASS run the file of its target (none for tiny: it exits 3), the warp pass its counters.
        with tempfile.TemporaryDirectory() as d:
            self.two_runs(d)
            for k, fn in ((1, HOT), (2, LANES)):
                os.rename(os.path.join(d, f"raw.sass.{k}.jsonl"), os.path.join(d, f"sass-{fn}.jsonl"))
            warp = warp_raw(d, [("tiny()", TINY, 10, 160, 160)])
            prog, lib, tdlib = fake_program(
                d, "if [ -n \"$ARCHBENCH_TOPDOWN_OUT\" ]; then echo \"warp $ARCHBENCH_TOPDOWN_KERNEL\" >> %s/runs.txt;"
                   " cp %s \"$ARCHBENCH_TOPDOWN_OUT\"; exit 0; fi\n"
                   "echo \"$ARCHBENCH_PCSAMPLE_MODE $ARCHBENCH_PCSAMPLE_SASS_STRATEGY $ARCHBENCH_PCSAMPLE_SASS_TARGET "
                   "$CUDA_MODULE_LOADING $(basename $ARCHBENCH_PCSAMPLE_OUT)\" >> %s/runs.txt\n"
                   "if [ \"$ARCHBENCH_PCSAMPLE_MODE\" = pc ]; then cp %s \"$ARCHBENCH_PCSAMPLE_OUT\"; exit 0; fi\n"
                   "f=%s/sass-$ARCHBENCH_PCSAMPLE_SASS_TARGET.jsonl\n"
                   "[ -f \"$f\" ] || exit 3\ncp \"$f\" \"$ARCHBENCH_PCSAMPLE_OUT\"\n"
                   % (d, warp, d, sampled_raw(d), d))
            j = os.path.join(d, "out.json")
            env = {k: v for k, v in os.environ.items()
                   if k != "CUDA_MODULE_LOADING" and not k.startswith(("ARCHBENCH_PCSAMPLE_", "ARCHBENCH_TOPDOWN"))}
            p = subprocess.run([sys.executable, TOOL, "--lib", lib, "--topdown-lib", tdlib, "--no-native",
                                "--sass-kernels", "all", "--raw", os.path.join(d, "run.jsonl"), "--json", j, "--", prog],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            runs = text(os.path.join(d, "runs.txt")).splitlines()
            doc = json.loads(text(j))
            kept = sorted(f for f in os.listdir(d) if f.startswith("run."))
        self.assertEqual(runs, ["pc    run.jsonl",
                                f"sass target {HOT} EAGER run.sass.1.jsonl",
                                f"sass target {LANES} EAGER run.sass.2.jsonl",
                                f"sass target {TINY} EAGER run.sass.3.jsonl",
                                f"warp ^({TINY})$"])  # the warp pass for what the SASS runs missed
        self.assertEqual(kept, ["run.jsonl", "run.sass.1.jsonl", "run.sass.2.jsonl", "run.warp.jsonl"])
        self.assertIn("SASS metrics run 1/3: hot_chase(int const*, float*, int)", p.stderr)
        self.assertIn("SASS metrics run 3/3: tiny()", p.stderr)
        ctx = doc["context"]
        self.assertEqual((ctx["sass_strategy"], ctx["sass_runs"]), ("each", 3))
        self.assertGreater(ctx["sass_s"], 0)
        self.assertEqual(ctx["sass_functions"], [HOT, LANES, TINY])
        self.assertEqual(ctx["sass_counted_functions"], [HOT, LANES])
        self.assertEqual(ctx["sass_missing"], [TINY])
        self.assertIn("SASS metrics run 3/3: tiny(): the program exited with 3, no records written", ctx["problems"])
        self.assertEqual(ctx["counts"]["per_kernel_only"], ["tiny()"])
        ks = {k["function"]: k for k in doc["kernels"]}
        self.assertEqual({l["line"]: l["sass"]["inst_executed"] for l in ks[HOT]["lines"]}, {20: 150, 21: 100})
        self.assertEqual(ks[LANES]["efficiency"]["inst_executed"], 1010)
        self.assertAlmostEqual(ks[TINY]["efficiency"]["warp_efficiency"], 0.5)  # from the warp pass
        self.assertIn("SASS metrics (strategy each, 3 runs in ", p.stdout)
        self.assertIn("counts for 2 of 3 chosen functions", p.stdout)



class DefaultRun(unittest.TestCase):
    """The default is one sampled run (issue 38: the SASS runs of library kernels waited out the
    library's watchdog for minutes before anything was printed); --sass is opt-in, and CUPTI's first
    refusal ends that stage with its reason while the report is printed all the same."""

    def run_tool(self, d, options, sass_script, extra=""):
        prog, lib, tdlib = fake_program(
            d, "echo \"$ARCHBENCH_PCSAMPLE_MODE ${ARCHBENCH_TOPDOWN_OUT:+warp}\" >> %s/runs.txt\n"
               "if [ -n \"$ARCHBENCH_TOPDOWN_OUT\" ]; then exit 0; fi\n"
               "if [ \"$ARCHBENCH_PCSAMPLE_MODE\" = pc ]; then cp %s \"$ARCHBENCH_PCSAMPLE_OUT\"; %sexit 0; fi\n%s"
               % (d, sampled_raw(d), extra, sass_script))
        j = os.path.join(d, "out.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARCHBENCH_PCSAMPLE_", "ARCHBENCH_PC_"))}
        p = subprocess.run([sys.executable, TOOL, "--lib", lib, "--topdown-lib", tdlib, "--json", j,
                            "--raw", os.path.join(d, "run.jsonl")] + options + ["--", prog],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return text(os.path.join(d, "runs.txt")).split("\n")[:-1], json.loads(text(j)), p

    def test_one_sampled_run_by_default(self):
        with tempfile.TemporaryDirectory() as d:
            runs, doc, p = self.run_tool(d, [], "exit 9\n")
        self.assertEqual(runs, ["pc "])  # no native run, no SASS run, no warp pass
        self.assertNotIn("native_s", doc["context"])
        self.assertIn("hot_chase", p.stdout)

    def test_other_gpu_processes_are_named(self):
        # A worker the program started wrote its own file beside the raw one (the library's rule):
        # the report is the first process's and says where the others are.
        with tempfile.TemporaryDirectory() as d:
            _, doc, p = self.run_tool(d, [], "exit 9\n", extra="cp %s \"${ARCHBENCH_PCSAMPLE_OUT%%.jsonl}-4242.jsonl\"\n"
                                      % sampled_raw(d))
        self.assertEqual([os.path.basename(f) for f in doc["context"]["other_processes"]], ["run-4242.jsonl"])
        self.assertIn("1 other process of the program used the GPU under the library: left out of this report", p.stderr)

    def test_first_cupti_refusal_ends_the_sass_stage(self):
        refusal = ('{"type":"error","reason":"cuptiSassMetricsEnable: CUPTI_ERROR_INVALID_PARAMETER"}')
        with tempfile.TemporaryDirectory() as d:
            runs, doc, p = self.run_tool(d, ["--sass", "--warp-pass", "never"],
                                         "head -1 %s/pc.jsonl > \"$ARCHBENCH_PCSAMPLE_OUT\"\n"  # the process record
                                         "echo '%s' >> \"$ARCHBENCH_PCSAMPLE_OUT\"\n" % (d, refusal))
        self.assertEqual(runs, ["pc ", "sass "])  # the second chosen kernel's run is not made
        note = "SASS metrics stopped after run 1 of 2: cuptiSassMetricsEnable: CUPTI_ERROR_INVALID_PARAMETER"
        self.assertIn(note, doc["context"]["problems"])
        self.assertIn(note, p.stderr)
        self.assertIn("hot_chase", p.stdout)  # the report all the same

if __name__ == "__main__":
    unittest.main()
