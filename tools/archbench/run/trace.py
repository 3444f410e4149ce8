"""Running a program under the tracers (LD_PRELOAD=libarchbench_trace_opencl.so,
CUDA_INJECTION64_PATH=libarchbench_trace_cuda.so), and naming its frames with addr2line."""

import glob
import os
import shutil
import subprocess

from .inject import locate, timed

LIBS = {"opencl": "libarchbench_trace_opencl.so", "cuda": "libarchbench_trace_cuda.so"}


def symbolize(procs):
    """Names the program's own frames ("prog+0xOFFSET": an executable that exports no symbols)
    with addr2line from binutils, where it and the executable are at hand; otherwise leaves them."""
    tool = shutil.which("addr2line")
    for p in procs:
        exe = (p["process"].get("command") or "").split(" ")[0]
        if not tool or not os.path.isfile(exe):
            continue
        prefix = os.path.basename(exe) + "+0x"
        frames = sorted({f for recs in p["by_type"].values() for r in recs for f in r.get("path") or []
                         if isinstance(f, str) and f.startswith(prefix)})
        if not frames:
            continue
        # Return addresses: the call is the instruction before, so look up offset - 1.
        addrs = [hex(int(f[len(prefix):], 16) - 1) for f in frames]
        try:
            out = subprocess.run([tool, "-f", "-C", "-e", exe] + addrs, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        names = out.splitlines()[0::2]
        if len(names) != len(frames):
            continue
        rename = {f: n for f, n in zip(frames, names) if n and n != "??"}
        for recs in p["by_type"].values():
            for r in recs:
                if r.get("path"):
                    r["path"] = [rename.get(f, f) for f in r["path"]]


def dynamic_elf(path):
    """False for an ELF executable with no program interpreter (statically linked: LD_PRELOAD and
    CUDA injection cannot reach it); True otherwise (a dynamic ELF, a script, anything else the
    kernel runs)."""
    import struct
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or len(head) < 64 or head[4] != 2:  # not a 64-bit ELF: let exec decide
                return True
            end = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack(end + "Q", head[32:40])
            phentsize, phnum = struct.unpack(end + "HH", head[54:58])
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return True
    return any(struct.unpack(end + "I", table[i * phentsize:i * phentsize + 4])[0] == 3 for i in range(phnum))  # PT_INTERP


def tracer_libs(apis, lib_dir):
    """{api: the tracer library's path, or None where it is not found}."""
    return {a: locate(LIBS[a], lib_dir) for a in apis}


def writable(folder):
    """None when raw files can be written in folder (made if missing), else why not."""
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".archbench-trace-probe-{os.getpid()}")
        open(probe, "w").close()
        os.remove(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def tracer_env(libs, out, rate):
    """The environment of a traced run: the raw files' folder, the sampling interval (rate per
    second, 0: none), and each tracer found preloaded or injected."""
    env = dict(os.environ, ARCHBENCH_TRACE_DIR=os.path.abspath(out),
               ARCHBENCH_TRACE_SAMPLE_US=str(max(1, round(1e6 / rate))) if rate > 0 else "0")
    if libs.get("opencl"):
        env["LD_PRELOAD"] = libs["opencl"] + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if libs.get("cuda"):
        env["CUDA_INJECTION64_PATH"] = libs["cuda"]
    return env


def still_traced(out):
    """Pids of the processes, other than this one, still running with the tracer's folder `out` in
    their environment: what a daemonising program left behind (it writes its records as it goes)."""
    mark = f"ARCHBENCH_TRACE_DIR={os.path.abspath(out)}".encode()
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(os.path.basename(d))
        if pid == os.getpid():
            continue
        try:
            with open(os.path.join(d, "environ"), "rb") as f:
                if mark in f.read().split(b"\0"):
                    pids.append(pid)
        except OSError:  # gone, or not ours to read
            continue
    return sorted(pids)


def run_traced(cmd, env, out, runs, untraced_runs):
    """Runs cmd untraced `untraced_runs` times, then traced `runs` times (as a shell runs a program:
    inject.timed's like_shell); returns (the last traced run's exit status, the raw files it wrote
    in out, the traced runs' wall seconds, the untraced ones')."""
    untraced = [timed(cmd, dict(os.environ), like_shell=True).seconds for _ in range(untraced_runs)]
    pattern = os.path.join(out, "*.jsonl")
    times = []
    for _ in range(runs):  # keep only the last run's files for the report
        before = {f: os.path.getmtime(f) for f in glob.glob(pattern)}
        rc, seconds = timed(cmd, env, like_shell=True)[:2]
        times.append(seconds)
    raw = sorted(f for f in glob.glob(pattern) if before.get(f) != os.path.getmtime(f))
    return rc, raw, times, untraced
