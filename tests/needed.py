#!/usr/bin/env python3
"""No stub library in the binaries' needs: NVIDIA's stub libcuda.so (which NVRTC's and
CUPTI's CMake targets pull into a link) would make a binary need libcuda.so.1, and so exit 127
where no driver is installed, unless the linker happened to drop it (--as-needed: a sanitizer
build or a distribution without it as the default keeps it). Reads each binary's own NEEDED
entries (readelf -d). Usage: needed.py CUDA_BUILT(ON|OFF) BINARY... Exit 77 (skipped) for a
build without CUDA, where there is nothing to check."""
import shutil
import subprocess
import sys

cuda, binaries = sys.argv[1], sys.argv[2:]
if cuda.upper() not in ("ON", "TRUE", "1"):
    print("SKIPPED: built without CUDA: no CUDA library can be in the binaries' needs")
    sys.exit(77)
if not shutil.which("readelf"):
    print("SKIPPED: no readelf (binutils) to read the binaries' needs")
    sys.exit(77)
failures = 0
for b in binaries:
    out = subprocess.run(["readelf", "-d", b], capture_output=True, text=True, check=True).stdout
    needed = [l.split("[", 1)[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]
    bad = [n for n in needed if n.startswith("libcuda.so")]
    print(("FAIL " if bad else "ok   ") + "%s needs %s" % (b, ", ".join(needed)))
    failures += bool(bad)
sys.exit(1 if failures else 0)
