"""Running a program under libarchbench_pmsampling.so (CUPTI's PM sampling, one pass): by default
archbench_pmsampler samples the device from a process of its own, started before the program."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from .inject import check_program, cupti_env, find_lib, fresh, other_processes, timed

SAMPLER_READY_S = 60  # at most this long for archbench_pmsampler to start (an uncached chip searches its counters)


def find_sampler(lib):
    """archbench_pmsampler's command: ARCHBENCH_PM_SAMPLER (words), else beside the library."""
    given = os.environ.get("ARCHBENCH_PM_SAMPLER")
    if given:
        return shlex.split(given)
    path = os.path.join(os.path.dirname(lib), "archbench_pmsampler")
    return [path] if os.access(path, os.X_OK) else None


class Sampler:
    """archbench_pmsampler started with the library (ARCHBENCH_PM_ROLE=sampler) and waited for until
    its config record says it samples; stop() closes its input, waits for its end record and puts
    its records after the program's in `raw`. Its own session: a Ctrl-C reaches the program and the
    command, and the command's stop (or its death) ends the sampler by its input."""

    def __init__(self, command, env, raw, tool):
        self.path, self.log, self.tool = raw + ".sampler", raw + ".sampler.log", tool
        fresh(self.path)
        self.t0 = time.monotonic_ns()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, env=dict(env, ARCHBENCH_PM_OUT=self.path), stdin=subprocess.PIPE,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def why_not(self):
        with open(self.log, errors="replace") as f:
            said = " ".join(line.strip() for line in f if line.strip())
        return said or f"it exited with {self.proc.returncode}"

    def ready(self, limit_s=SAMPLER_READY_S):
        """None once the sampling runs, else why it does not (the sampler then stopped)."""
        seen = 0
        while True:
            try:
                with open(self.path, "rb") as f:
                    f.seek(seen)
                    chunk = f.read()
                cut = chunk.rfind(b"\n") + 1
                seen += cut
                for line in chunk[:cut].splitlines():
                    if b'"type":"config"' in line:
                        self.ready_s = (time.monotonic_ns() - self.t0) * 1e-9
                        return None
                    if b'"type":"error"' in line:
                        self.stop(keep=False)
                        try:
                            return json.loads(line).get("reason", "an error record")
                        except ValueError:
                            return line.decode(errors="replace")
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None:
                why = self.why_not()
                self.stop(keep=False)
                return why
            if time.monotonic_ns() - self.t0 > limit_s * 1e9:
                self.stop(keep=False)
                return f"it did not start within {limit_s} s"
            time.sleep(0.005)

    def stop(self, raw=None, keep=True):
        """Ends the sampler; with keep, appends its records to `raw` (its own file and log go); the
        seconds it took."""
        t = time.monotonic_ns()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            print(f"{self.tool}: archbench_pmsampler did not end within 60 s and was killed: its last "
                  "samples may be missing", file=sys.stderr)
        if keep and raw and os.path.exists(self.path):
            with open(raw, "ab") as out, open(self.path, "rb") as f:
                shutil.copyfileobj(f, out)
        for p in (self.path, self.log):
            if os.path.exists(p):
                os.remove(p)
        return (time.monotonic_ns() - t) * 1e-9


def sample_run(a, cmd, context, tool):
    """The program natively (wall time; not with --no-native), then under the PM-sampling library;
    the times, the overhead and the raw file's path go in context; returns the sampled run's exit
    status. By default (--start before) archbench_pmsampler samples the device from its own process,
    started before the program, whose library then only records kernels; where it cannot (no
    sampler, several devices and no --device, a start refused), the library samples inside the
    program (early), as said."""
    lib = find_lib(a.lib, "pmsampling")
    check_program(cmd)
    raw = a.raw or os.path.join(tempfile.mkdtemp(prefix="archbench-timeline-"), "raw.jsonl")
    context["command"] = " ".join(cmd)
    if not a.no_native:
        native_rc, context["native_s"] = timed(cmd, dict(os.environ))[:2]
        if native_rc != 0:
            print(f"{tool}: the program exited with {native_rc} natively", file=sys.stderr)
    env = cupti_env(dict(os.environ))
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_PM_OUT": raw, "ARCHBENCH_PM_INTERVAL_US": repr(a.interval_us)})
    for opt, var in ((a.decode_ms, "ARCHBENCH_PM_DECODE_MS"), (a.hw_buffer_mb, "ARCHBENCH_PM_HW_BUFFER_MB"),
                     (a.metrics, "ARCHBENCH_PM_METRICS"), (0 if a.no_wait else None, "ARCHBENCH_PM_WAIT_S"),
                     (a.device, "ARCHBENCH_PM_DEVICE")):
        if opt is not None:
            env[var] = str(opt)
    start, sampler = a.start or "before", None
    if start == "before":
        command = find_sampler(lib)
        why = None if command else f"no archbench_pmsampler beside {lib}"
        if command:
            sampler = Sampler(command, dict(env, ARCHBENCH_PM_ROLE="sampler", ARCHBENCH_PM_START="early"), raw, tool)
            why = sampler.ready()
        if why:
            sampler, start = None, "early"
            context["start_fallback"] = f"not sampled from a process of its own ({why}): sampled inside the program"
            print(f"{tool}: {context['start_fallback']}", file=sys.stderr)
        else:
            context["sampler_ready_s"] = sampler.ready_s
            start = "outside"
    env["ARCHBENCH_PM_START"] = start
    fresh(raw)  # an earlier run's: the program's library writes it anew, the sampler's are appended
    try:
        rc, context["sampled_s"], context["spawn_ns"], context["exit_ns"] = timed(cmd, env)
    finally:
        if sampler:
            context["sampler_stop_s"] = sampler.stop(raw)
    other_processes(raw, tool, context)
    if sampler:
        with open(raw, "a", encoding="utf-8") as f:
            f.write(json.dumps({"type": "exit", "status": rc, "start_ns": context["spawn_ns"],
                                "end_ns": context["exit_ns"], "command": context["command"]}) + "\n")
    if context.get("native_s"):
        context["overhead"] = context["sampled_s"] / context["native_s"]
    context["raw"] = raw
    if rc != 0:
        print(f"{tool}: the program exited with {rc} under sampling", file=sys.stderr)
    return rc
