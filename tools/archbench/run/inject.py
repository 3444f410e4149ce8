"""What every command that runs a program under an injection library shares: finding the library,
the loader path for CUPTI, running the program timed, and the driver's version."""

import collections
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

from ..cli import InputError
from ..records.sources import TOOLS

# The injection libraries a command finds by --lib or its environment variable.
LIBS = {"topdown": ("libarchbench_topdown.so", "ARCHBENCH_TOPDOWN_LIB"),
        "pmsampling": ("libarchbench_pmsampling.so", "ARCHBENCH_PM_LIB"),
        "pcsampling": ("libarchbench_pcsampling.so", "ARCHBENCH_PCSAMPLE_LIB")}


def locate(name, lib_dir=None, env="ARCHBENCH_TRACE_LIB_DIR"):
    """Path of the library `name`, or None: in `lib_dir` when given, else in $`env`, the bundle's
    lib/ beside tools/, an installed tree's PREFIX/lib (tools/ is PREFIX/share/archbench/tools),
    and the newest build*/lib."""
    if lib_dir:  # asked for: that folder only
        dirs = [lib_dir]
    else:
        dirs = [d for d in (os.environ.get(env or ""),) if d] + [os.path.join(TOOLS, "..", "lib")]
        dirs.append(os.path.join(TOOLS, "..", "..", "..", "lib"))
        dirs += sorted(glob.glob(os.path.join(TOOLS, "..", "build*", "lib")), key=os.path.getmtime, reverse=True)
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return os.path.abspath(p)
    return None


def find_lib(given, which="topdown"):
    """An injection library (LIBS): --lib, its environment variable, else where the tracers'
    libraries are looked for (locate: the bundle's lib/, the newest build*/lib)."""
    name, variable = LIBS[which]
    for c in (given, os.environ.get(variable)):
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    found = locate(name, None, env=None)
    if found:
        return found
    target = name[len("lib"):-len(".so")]
    raise InputError(f"{name} not found (build the target {target}, or pass --lib / set {variable})")


def cupti_env(env):
    """The injection links libcupti: add the toolkit's CUPTI folders to the loader path."""
    dirs = [d for d in ("/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64") if os.path.isdir(d)]
    if dirs:
        env["LD_LIBRARY_PATH"] = ":".join(dirs + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    return env


def check_program(cmd):
    """InputError unless cmd[0] is a program on the PATH or a file."""
    if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
        raise InputError(f"no such program: {cmd[0]}")


class CannotRun(InputError):
    """A program that could not be started: `status` is the shell's 127 (not found) or 126 (not
    executable), `error` the OSError."""

    def __init__(self, cmd, error):
        self.error, self.status = error, 127 if isinstance(error, FileNotFoundError) else 126
        super().__init__(f"no such program: {cmd[0]}" if self.status == 127 else f"{cmd[0]}: {error.strerror or error}")


Timed = collections.namedtuple("Timed", "rc seconds start_ns end_ns")


def timed(cmd, env, timeout=None, tool="", what="run", like_shell=False):
    """Runs cmd: its exit status, wall seconds, and start and end on CLOCK_MONOTONIC in ns (the
    injection libraries' clock). Past `timeout` seconds its process group is killed (TERM, then
    KILL) and the status is 124, as timeout(1) says. like_shell: while it runs, this process
    ignores the terminal's SIGINT and SIGQUIT as a shell does (the program gets them and decides).
    A program that cannot start: CannotRun; this process interrupted: the program is killed."""
    start = time.monotonic_ns()
    try:
        p = subprocess.Popen(cmd, env=env, start_new_session=bool(timeout))
    except OSError as e:
        raise CannotRun(cmd, e) from None
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)} if like_shell else {}
    try:
        rc = forwarding(p) if like_shell and not timeout else p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"{tool}: the {what} ran past {timeout:g} s: stopped (its records so far are kept)", file=sys.stderr)
        for sig in (15, 9):
            try:
                os.killpg(p.pid, sig)
            except OSError:
                pass
            try:
                p.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        rc = 124
    except BaseException:
        p.kill()
        p.wait()
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    end = time.monotonic_ns()
    return Timed(rc, (end - start) * 1e-9, start, end)


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def forwarding(p):
    """Waits for p; SIGTERM, SIGINT or SIGHUP sent to this process meanwhile (a job scheduler's
    time limit, kill) is sent on to the program, which decides, and the wait goes on: the caller
    then reports what was recorded and exits as the program did. The terminal's own (Ctrl-C, a
    hang-up: from the kernel) already reached the program, in this process group: not sent twice."""
    watched = set(FORWARDED) | {signal.SIGCHLD}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        while p.poll() is None:  # SIGCHLD is queued while blocked: an exit before the wait is seen too
            info = signal.sigtimedwait(watched, 1.0)
            if info and info.si_signo != signal.SIGCHLD and info.si_code != 0x80:  # 0x80: SI_KERNEL
                try:
                    os.kill(p.pid, info.si_signo)
                except OSError:
                    pass
        return p.returncode
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def driver_version(pci_bus_id):
    """The NVIDIA driver's version for the GPU at `pci_bus_id`, as nvidia-smi says ("" without it)."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", pci_bus_id],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip() if p.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def fresh(raw):
    """Before a run: no file at the raw path, which the library makes its own (an existing one would
    make the library write beside it, as a second process of the program does)."""
    if os.path.lexists(raw):
        os.remove(raw)


def other_processes(raw, tool, context):
    """After a run: the files that processes the program started wrote beside its raw file (each GPU
    process writes its own, <raw>-<pid>.jsonl): said on stderr and listed in context; this report
    is the first process's, each of theirs is read with --report FILE."""
    stem = raw[:-len(".jsonl")] if raw.endswith(".jsonl") else raw
    others = sorted(glob.glob(glob.escape(stem) + "-[0-9]*.jsonl"))
    if others:
        context["other_processes"] = others
        print(f"{tool}: {len(others)} other process{'es' if len(others) > 1 else ''} of the program used the GPU "
              f"under the library: left out of this report, each readable with --report: {', '.join(others)}",
              file=sys.stderr)
