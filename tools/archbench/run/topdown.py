"""Running a program under libarchbench_topdown.so (CUPTI's range profiler, kernel replay): the
TopDown command's run, and roofline's program mode with the traffic counter set."""

import os
import sys
import tempfile

from .inject import check_program, cupti_env, find_lib, fresh, other_processes, timed


def profile(a, cmd, context, tool, metric_set=""):
    """Runs the program natively (wall time; not with a.no_native), then under the injection with
    the options' filter and sampling (a: lib, raw, kernel, sample, max_launches, budget, prepare;
    and ARCHBENCH_TOPDOWN_METRICS=metric_set); puts the times, the overhead and the raw file's path
    in context; returns the profiled run's exit status."""
    lib = find_lib(a.lib)
    check_program(cmd)
    raw = a.raw or os.path.join(tempfile.mkdtemp(prefix="archbench-topdown-"), "raw.jsonl")
    context["command"] = " ".join(cmd)
    if not a.no_native:
        native_rc, native_s = timed(cmd, dict(os.environ))[:2]
        context["native_s"] = native_s
        if native_rc != 0:
            print(f"{tool}: the program exited with {native_rc} natively", file=sys.stderr)
    env = cupti_env(dict(os.environ))
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_TOPDOWN_OUT": raw,
                "ARCHBENCH_TOPDOWN_KERNEL": a.kernel or "", "ARCHBENCH_TOPDOWN_MAX": str(a.max_launches),
                "ARCHBENCH_TOPDOWN_SAMPLE": str(a.sample), "ARCHBENCH_TOPDOWN_METRICS": metric_set,
                "ARCHBENCH_TOPDOWN_BUDGET": str(a.budget),
                "ARCHBENCH_TOPDOWN_PREPARE": "1" if a.prepare == "ahead" else "0"})
    fresh(raw)
    rc, profiled_s = timed(cmd, env)[:2]
    other_processes(raw, tool, context)
    context["profiled_s"] = profiled_s
    if "native_s" in context and context["native_s"] > 0:
        context["overhead"] = profiled_s / context["native_s"]
    context["raw"] = raw
    if rc != 0:
        print(f"{tool}: the program exited with {rc} under profiling", file=sys.stderr)
    return rc
