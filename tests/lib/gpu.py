"""What the GPU tests (ctest label gpu) share: the repository's paths, their output folder, running
a program with its output printed and kept, and skipping (exit 77, with the reason) where no CUDA
device answers, as on CI. Each test imports it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "<up to tests>", "lib"))
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
SKIP = 77  # ctest's SKIP_RETURN_CODE; the test programs exit with it where no CUDA device answers

# What a program, archbench or a tool prints where no usable CUDA device (or driver) is.
NO_DEVICE = ("no CUDA device", "no CUDA-capable device", "cudaErrorNoDevice", "cudaErrorInsufficientDriver",
             "driver version is insufficient")


def out_dir(out, prefix):
    """--out where given, else a new temporary folder (kept: the test prints where)."""
    out = out or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(out, exist_ok=True)
    return out


def no_device(p):
    """Whether a finished run says that there is no usable CUDA device."""
    return p.returncode == SKIP or any(m in p.stderr for m in NO_DEVICE)


def skip(reason="no CUDA device"):
    print("SKIP: " + reason)
    sys.exit(SKIP)


def find_gpu(prog, *args):
    """Runs a test program, which exits 77 where no CUDA device answers: skips the test then,
    with the program's reason."""
    p = subprocess.run([prog, *args], capture_output=True, text=True)
    if p.returncode == SKIP:
        skip(f"no CUDA device ({p.stderr.strip() or p.stdout.strip()})")
    return p


def run(cmd, log):
    """Runs cmd; prints its output and keeps it, with the command, in the file log. Skips the test
    where it says there is no CUDA device; fails it on any other non-zero exit. (The ctest's
    TIMEOUT bounds it.)"""
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + "\n--- stderr ---\n" + p.stderr)
    print(p.stdout, p.stderr, sep="\n")
    if no_device(p):
        skip()
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {p.returncode}")
    return p


def verdict(failures):
    """Prints the failed checks (or PASS); the exit status."""
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0
