"""Running a program under libarchbench_pcsampling.so: the sampled run (PC sampling, continuous
mode), the SASS metrics runs, the warp pass under libarchbench_topdown.so, and nvdisasm for the
SASS text. PC sampling's debugging knobs are read here, from the environment (KNOBS)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ..cli import InputError
from .inject import check_program, cupti_env, find_lib, fresh, other_processes, timed

TOOL = "archbench_pcsample"
SASS_STRATEGIES = ("each", "deferred", "deferred-module", "once", "function", "reconfig", "target")
# The debugging knobs: variable -> (option name, the values it takes or float, default).
KNOBS = {"ARCHBENCH_PC_SASS_STRATEGY": ("sass_strategy", SASS_STRATEGIES, "each"),
         "ARCHBENCH_PC_SASS_LOADING": ("sass_loading", ("eager", "lazy", "inherit"), "eager"),
         "ARCHBENCH_PC_SASS_LAZY_PATCHING": ("sass_lazy_patching", ("0", "1"), None),
         "ARCHBENCH_PC_ENABLE": ("pc_enable", ("sync", "async"), "async"),
         "ARCHBENCH_PC_DRAIN": ("drain", ("thread", "sync", "exit"), "thread"),
         "ARCHBENCH_PC_WATCHDOG": ("watchdog", float, 10.0)}


def knobs(environ=os.environ):
    """The debugging knobs, {name: value} (unset or empty: the default); a value a knob does not
    take is an InputError naming the variable."""
    out = {}
    for var, (name, takes, default) in KNOBS.items():
        value = environ.get(var) or None
        if value is None:
            out[name] = default
        elif takes is float:
            try:
                out[name] = float(value)
            except ValueError:
                raise InputError(f"{var}={value}: takes a number of seconds (0: off)") from None
        elif value in takes:
            out[name] = value
        else:
            raise InputError(f"{var}={value}: takes one of {', '.join(takes)}")
    return out


def sass_strategy(a):
    """The library's ARCHBENCH_PCSAMPLE_SASS_STRATEGY: the knob's, unless only the older
    --sass-range was given (one: once, function: function)."""
    if a.sass_range and a.sass_strategy == "each":
        return {"one": "once", "function": "function"}[a.sass_range]
    return a.sass_strategy


def beside(raw, part):
    """The file RAW.PART.jsonl beside RAW.jsonl (RAW.PART where RAW does not end in .jsonl)."""
    return raw[:-len(".jsonl")] + f".{part}.jsonl" if raw.endswith(".jsonl") else f"{raw}.{part}"


def sampled_run(a, cmd, context):
    """The program natively (wall time; not with a.no_native), then under PC sampling; the times,
    the overhead and the command go in context. Returns (the sampled run's exit status, its raw
    file, its environment)."""
    lib = find_lib(a.lib, "pcsampling")
    check_program(cmd)
    raw = a.raw or os.path.join(tempfile.mkdtemp(prefix="archbench-pcsample-"), "raw.jsonl")
    context["command"] = " ".join(cmd)
    if not a.no_native:
        native_rc, context["native_s"] = timed(cmd, dict(os.environ), a.timeout or None, TOOL, "native run")[:2]
        if native_rc != 0:
            print(f"{TOOL}: the program exited with {native_rc} natively", file=sys.stderr)
    env = cupti_env(dict(os.environ))
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_PCSAMPLE_OUT": raw, "ARCHBENCH_PCSAMPLE_MODE": "pc",
                "ARCHBENCH_PCSAMPLE_PERIOD": "auto" if a.period is None else str(a.period),
                "ARCHBENCH_PCSAMPLE_DRAIN": a.drain,
                "ARCHBENCH_PCSAMPLE_WATCHDOG_S": str(a.watchdog),
                "ARCHBENCH_PCSAMPLE_HW_BUFFER_MB": str(a.hw_buffer_mb),
                "ARCHBENCH_PCSAMPLE_PC_ENABLE": a.pc_enable,
                "ARCHBENCH_PCSAMPLE_WORKER_SLEEP_MS": str(a.worker_sleep_ms)})
    print(f"{TOOL}: sampled run (drain {a.drain}, watchdog {a.watchdog:g} s)", file=sys.stderr)
    fresh(raw)
    rc, context["sampled_s"] = timed(cmd, env, a.timeout or None, TOOL, "sampled run")[:2]
    other_processes(raw, TOOL, context)
    if context.get("native_s") and rc != 124:
        context["overhead"] = context["sampled_s"] / context["native_s"]
    if rc != 0:
        print(f"{TOOL}: the program exited with {rc} under sampling", file=sys.stderr)
    return rc, raw, env


def sass_env(a, env):
    """The sampled run's environment turned to SASS metrics mode, with the knobs' patching and
    module loading."""
    env.update({"ARCHBENCH_PCSAMPLE_MODE": "sass"})
    env.pop("ARCHBENCH_PCSAMPLE_SASS_RANGE", None)
    if a.sass_lazy_patching is None:
        env.pop("ARCHBENCH_PCSAMPLE_SASS_LAZY", None)
    else:
        env["ARCHBENCH_PCSAMPLE_SASS_LAZY"] = a.sass_lazy_patching
    if a.sass_loading != "inherit":
        env["CUDA_MODULE_LOADING"] = a.sass_loading.upper()
    return env


def sass_runs(a, cmd, env, runs, context):
    """Runs the program in SASS metrics mode once per (function counted, strategy target; or None,
    the options' strategy), raw file, label); returns [(function or None, file)] for the runs that
    wrote records. A run that exits non-zero or writes nothing is a Problem; the rest go on."""
    written, context["sass_s"] = [], 0.0
    # Each run is bounded: a SASS run replays nothing, so 3x the sampled run (30 s at least) is
    # far more than it needs (on the H200 a SASS run of a library kernel refused by CUPTI waited
    # out the library's 10 s watchdog instead).
    limit = a.timeout or max(30.0, 3 * context.get("sampled_s", 0))
    for k, (fn, out, label) in enumerate(runs):
        env.update({"ARCHBENCH_PCSAMPLE_OUT": out, "ARCHBENCH_PCSAMPLE_SASS_STRATEGY": "target" if fn else sass_strategy(a)})
        if fn or a.sass_target:
            env["ARCHBENCH_PCSAMPLE_SASS_TARGET"] = fn or a.sass_target
        else:
            env.pop("ARCHBENCH_PCSAMPLE_SASS_TARGET", None)
        if os.path.exists(out):
            os.remove(out)
        print(f"{TOOL}: {label}", file=sys.stderr)
        rc, seconds = timed(cmd, env, limit, TOOL, label)[:2]
        context["sass_s"] += seconds
        wrote = os.path.exists(out) and os.path.getsize(out) > 0
        why = ([f"the program exited with {rc}"] if rc else []) + ([] if wrote else ["no records written"])
        if why:
            print(f"{TOOL}: {label}: {', '.join(why)}", file=sys.stderr)
            context.setdefault("problems", []).append(f"{label}: {', '.join(why)}")
        if wrote:
            written.append((fn, out))
        refusal = cupti_refusal(out) if wrote else None
        if refusal and k + 1 < len(runs):  # CUPTI refuses the others alike (cuDNN, cuBLAS, XLA kernels)
            note = f"SASS metrics stopped after run {k + 1} of {len(runs)}: {refusal}"
            print(f"{TOOL}: {note}", file=sys.stderr)
            context.setdefault("problems", []).append(note)
            break
    return written


def cupti_refusal(raw):
    """The reason of the first error record of a run's raw file that is CUPTI's refusal, or None."""
    with open(raw, encoding="utf-8", errors="replace") as f:
        for line in f:
            if '"error"' in line and "CUPTI_ERROR" in line:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("type") == "error":
                    return str(rec.get("reason", ""))[:300]
    return None


def warp_pass(a, cmd, raw, functions, context):
    """Runs the program under libarchbench_topdown.so with ARCHBENCH_TOPDOWN_METRICS=warp (the
    first launch of each kernel and shape, at most 2 a kernel; only `functions` where given);
    returns its exit status."""
    try:
        lib = find_lib(a.topdown_lib)
    except InputError as e:
        context.setdefault("problems", []).append(f"warp pass skipped: {e}")
        return 0
    env = cupti_env(dict(os.environ))
    names = [f for f in functions if re.fullmatch(r"[A-Za-z0-9_$.]+", f)]
    kernel = "^(" + "|".join(re.escape(f) for f in names) + ")$" if names and len(names) == len(functions) \
        and len(names) <= 256 else ""
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_TOPDOWN_OUT": raw, "ARCHBENCH_TOPDOWN_METRICS": "warp",
                "ARCHBENCH_TOPDOWN_KERNEL": kernel, "ARCHBENCH_TOPDOWN_SAMPLE": "1", "ARCHBENCH_TOPDOWN_MAX": "2"})
    if os.path.exists(raw):
        os.remove(raw)
    print(f"{TOOL}: warp pass (per-kernel counters, libarchbench_topdown.so) for "
          f"{len(functions) if functions else 'all'} kernel functions", file=sys.stderr)
    rc, context["warp_s"] = timed(cmd, env, a.timeout or max(30.0, 3 * context.get("sampled_s", 0)), TOOL,
                                 "warp pass")[:2]
    context["warp_functions"] = functions or "all"
    return rc


def disassemble(cubin):
    """{function: {pc offset: instruction}} from nvdisasm, or {} where it is not found or fails."""
    tool = shutil.which("nvdisasm") or ("/usr/local/cuda/bin/nvdisasm" if os.path.exists("/usr/local/cuda/bin/nvdisasm")
                                         else None)
    if not tool or not cubin or not os.path.exists(cubin):
        return {}
    try:
        p = subprocess.run([tool, "-c", cubin], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_disassembly(p.stdout) if p.returncode == 0 else {}


def parse_disassembly(text):
    out, fn = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.text\.([^:\s]+):", line)
        if m:
            fn = out.setdefault(m.group(1), {})
            continue
        m = re.search(r"/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;", line)
        if m and fn is not None:
            fn[int(m.group(1), 16)] = m.group(2).strip()
    return out


def sass_code(recs):
    """{function: {pc offset: instruction}} of every module the sampled run's records name (module
    records' cubin files, disassembled)."""
    code = {}
    for m in recs["module"]:
        for fn, ins in disassemble(m.get("cubin")).items():
            code.setdefault(fn, {}).update(ins)
    return code
