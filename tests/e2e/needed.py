#!/usr/bin/env python3
"""What the binaries need from the machine that runs them.

1. No stub library: NVIDIA's stub libcuda.so (which NVRTC's and CUPTI's CMake targets pull into a
   link) would make a binary need libcuda.so.1, and so exit 127 where no driver is installed,
   unless the linker happened to drop it (--as-needed: a sanitizer build or a distribution
   without it as the default keeps it). Reads each binary's own NEEDED entries (readelf -d).
2. With --glibc FLOOR ELF...: the portable binaries (cmake/portable.cmake, the bundle) load on
   glibc FLOOR: every version they require of glibc (readelf -V, the version needs; objdump -T
   names the symbols) is FLOOR or older; none of libstdc++ (GLIBCXX_, CXXABI_: it is linked
   statically, and the node's may be older) and none of libgcc_s newer than GCC 8's (RHEL 8's);
   and no NEEDED library that a node lacks or that needs a newer glibc (libbenchmark, libpapi).
   A libstdc++.so.6 needed with none of its versions (NVIDIA's libnvrtc-builtins) is any node's.
3. With --run PROGRAM: the program (the probe, tests/e2e/portable_probe.cpp) runs and says so.

Usage: needed.py CUDA_BUILT(ON|OFF) BINARY... [--glibc FLOOR ELF...] [--run PROGRAM]
Part 1 is skipped for a build without CUDA; exit 77 (skipped) when nothing was checked.
ci/bundle.sh runs part 2 alone on the bundle: needed.py - --glibc 2.28 ELF...
"""
import re
import shutil
import subprocess
import sys

GCC_S_NEWEST = (7, 0, 0)  # libgcc_s of GCC 8 (RHEL 8): its newest version node is GCC_7.0.0


def version(text):
    return tuple(int(x) for x in text.split("."))


def output(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def needed(binary):
    return [l.split("[", 1)[1].rstrip("]") for l in output("readelf", "-d", binary).splitlines() if "(NEEDED)" in l]


def no_libcuda(binaries):
    failures = 0
    for b in binaries:
        libs = needed(b)
        bad = [n for n in libs if n.startswith("libcuda.so")]
        print(("FAIL " if bad else "ok   ") + "%s needs %s" % (b, ", ".join(libs)))
        failures += bool(bad)
    return failures


def too_new(name, floor):
    """Why the required version `name` (GLIBC_2.34, GLIBCXX_3.4.30, ...) is beyond a node of
    glibc `floor`, or None."""
    m = re.fullmatch(r"(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)", name)
    if not m:
        return None
    kind, v = m.group(1), version(m.group(2))
    if kind == "GLIBC" and v > floor:
        return "newer than glibc %s" % ".".join(map(str, floor))
    if kind in ("GLIBCXX", "CXXABI"):
        return "libstdc++ is not linked statically"
    if kind == "GCC" and v > GCC_S_NEWEST:
        return "newer than GCC 8's libgcc_s"
    return None


def portable(elfs, floor):
    failures = 0
    for elf in elfs:
        # The version needs: one "File: LIB" line, then a "Name: VERSION" line per version.
        required = re.findall(r"Name: ([A-Z]+_[0-9.]+)", output("readelf", "-V", "-W", elf).split(".gnu.version_r")[-1])
        bad = sorted({(n, why) for n in required if (why := too_new(n, floor))}, key=lambda x: x[0])
        symbols = {}
        for line in output("objdump", "-T", elf).splitlines():
            m = re.search(r"\s\(?([A-Z]+_[0-9.]+)\)?\s+(\S+)$", line)
            if m and too_new(m.group(1), floor):
                symbols.setdefault(m.group(1), []).append(m.group(2))
        libs = [n for n in needed(elf) if re.match(r"lib(benchmark|papi)\.so", n)]
        # NVIDIA's libnvrtc-builtins needs a libstdc++.so.6 but none of its versions: any node's will do.
        anystd = " (and a libstdc++.so.6, of any version)" if "libstdc++.so.6" in needed(elf) else ""
        newest = max((version(n.split("_", 1)[1]) for n in required if n.startswith("GLIBC_")), default=())
        if bad or libs:
            failures += 1
            print("FAIL %s:" % elf)
            for n, why in bad:
                print("       %s (%s): %s" % (n, why, " ".join(sorted(symbols.get(n, []))[:12]) or "no symbol named"))
            for n in libs:
                print("       needs %s" % n)
        else:
            print("ok   %s: newest glibc version required %s%s" % (elf, ".".join(map(str, newest)) or "none", anystd))
    return failures


def main(argv):
    args, runs, floor, glibc_elfs = [], [], None, []
    it = iter(argv)
    for a in it:
        if a == "--glibc":
            floor = version(next(it))
            target = glibc_elfs
        elif a == "--run":
            runs.append(next(it))
        elif floor is not None:
            target.append(a)
        else:
            args.append(a)
    if not shutil.which("readelf") or not shutil.which("objdump"):
        print("SKIPPED: no readelf or objdump (binutils) to read the binaries' needs")
        return 77
    failures, checked = 0, False
    cuda, binaries = (args[0], args[1:]) if args else ("-", [])
    if cuda.upper() in ("ON", "TRUE", "1"):
        failures += no_libcuda(binaries)
        checked = True
    elif cuda != "-":
        print("skipped: built without CUDA: no CUDA library can be in the binaries' needs")
    if floor is not None and glibc_elfs:
        failures += portable(glibc_elfs, floor)
        checked = True
    for prog in runs:
        p = subprocess.run([prog], capture_output=True, text=True)
        print(("ok   " if p.returncode == 0 else "FAIL ") + "%s runs: exit %d: %s" % (prog, p.returncode,
              (p.stdout + p.stderr).strip()[-500:]))
        failures += p.returncode != 0
        checked = True
    if not checked:
        print("SKIPPED: nothing to check here")
        return 77
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
