"""cmake --install gives a relocatable tree (issue 19): the build is installed into a temporary
folder, the tree is moved elsewhere, and from the moved tree --device=all, the MPI merge (with its
variability report, made by the installed Python tools), a results tool and the OpenCL tracer
(which must find its library in PREFIX/lib) are run.

Run by the ctest `tools/test_install`, which names the build (ARCHBENCH_BUILD_DIR), cmake (ARCHBENCH_CMAKE) and
mpirun (ARCHBENCH_MPIEXEC); skipped without them, or where archbench finds no device.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(TESTS, "e2e"), os.path.join(TESTS, "tools")]
import mpi_e2e  # noqa: E402  (its mpirun: 2 ranks on loopback)
import test_package  # noqa: E402  (the console scripts of tools/pyproject.toml)

FILTER = mpi_e2e.FILTER  # one launch benchmark: seconds on PoCL
QUICK = ["--benchmark_min_time=0.01", "--benchmark_repetitions=1"]


def clean_env():
    """This environment without what would point the tree at the build or the sources."""
    env = dict(os.environ)
    for k in ("ARCHBENCH_TOOLS", "ARCHBENCH_TRACE_LIB_DIR", "ARCHBENCH_TOPDOWN_LIB", "ARCHBENCH_DEVICE",
              "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "LD_LIBRARY_PATH"):
        env.pop(k, None)
    return env


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


class InstalledTree(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        build = os.environ.get("ARCHBENCH_BUILD_DIR")
        if not build or not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
            raise unittest.SkipTest("ARCHBENCH_BUILD_DIR names no build (the ctest `tools/test_install` sets it)")
        cls.build = build
        cls.tmp = tempfile.mkdtemp(prefix="archbench-install-test-")
        staged = os.path.join(cls.tmp, "staged")
        p = subprocess.run([os.environ.get("ARCHBENCH_CMAKE", "cmake"), "--install", build, "--prefix", staged],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError(f"cmake --install failed: {p.stdout[-2000:]}{p.stderr[-2000:]}")
        # Moved: nothing may depend on the install prefix.
        cls.p = os.path.join(cls.tmp, "moved", "elsewhere")
        os.makedirs(os.path.dirname(cls.p))
        os.rename(staged, cls.p)
        cls.env = clean_env()
        cls.archbench = os.path.join(cls.p, "bin", "archbench")
        cls.tools = os.path.join(cls.p, "share", "archbench", "tools")
        if subprocess.run([cls.archbench, "--list-devices"], capture_output=True, env=cls.env).returncode != 0:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise unittest.SkipTest("no device for archbench here")
        # --device=all from the moved tree: one process per device, their results merged.
        cls.node = os.path.join(cls.tmp, "node.json")
        cls.all = subprocess.run([cls.archbench, "--device=all", FILTER, *QUICK, "--benchmark_out=" + cls.node],
                                 capture_output=True, text=True, env=cls.env, timeout=300)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout(self):
        """Binaries, libraries, tools and documents where the README says; every ELF finds
        PREFIX/lib through $ORIGIN and none points into the build."""
        built_libs = [os.path.basename(f) for f in glob.glob(os.path.join(self.build, "lib", "libarchbench_*.so"))]
        expected = ["bin/archbench", "share/archbench/tools/archbench/__init__.py",
                    "share/archbench/tools/archbench_compare.py", "share/archbench/tools/archbench_trace.py",
                    "share/doc/archbench/README.md", "share/doc/archbench/FORMAT.md"]
        expected += ["lib/" + n for n in built_libs]
        if os.path.exists(os.path.join(self.build, "archbench_mpi")):
            expected.append("bin/archbench_mpi")
        self.assertIn("libarchbench_trace_opencl.so", built_libs)
        for rel in expected:
            self.assertTrue(os.path.isfile(os.path.join(self.p, rel)), f"{rel} is not installed")
        build = os.path.realpath(self.build)
        binaries = [f for f in glob.glob(os.path.join(self.p, "bin", "*")) if is_elf(f)]  # not the console scripts
        for elf in binaries + glob.glob(os.path.join(self.p, "lib", "*.so")):
            dyn = subprocess.run(["readelf", "-d", elf], capture_output=True, text=True, check=True).stdout
            runpath = [l.split("[", 1)[1].rstrip("]") for l in dyn.splitlines() if "RUNPATH" in l or "RPATH" in l]
            self.assertTrue(runpath and "$ORIGIN/../lib" in runpath[0].split(":"), f"{elf}: RUNPATH {runpath}")
            self.assertFalse(any(build in r for r in runpath), f"{elf} points into the build: {runpath}")

    def test_device_all(self):
        self.assertEqual(self.all.returncode, 0, self.all.stderr[-2000:])
        with open(self.node, encoding="utf-8") as f:
            doc = json.load(f)
        runs = doc["context"]["runs"]
        self.assertTrue(runs and not any(r.get("failed") for r in runs), runs)
        self.assertTrue(doc["benchmarks"])
        self.assertNotIn("cannot find", self.all.stderr)
        self.assertNotIn("tools/archbench) are not beside", self.all.stderr)

    def test_compare(self):
        """A results tool runs from the tree (its package beside it), on the run above."""
        p = subprocess.run([sys.executable, os.path.join(self.tools, "archbench_compare.py"), self.node, self.node],
                           capture_output=True, text=True, env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])

    def test_console_scripts(self):
        """bin/archbench-COMMAND for every console script of tools/pyproject.toml, from the moved tree."""
        for script in test_package.console_scripts():
            p = subprocess.run([os.path.join(self.p, "bin", script), "--help"], capture_output=True, text=True,
                               env=self.env)
            self.assertEqual(p.returncode, 0, f"{script} --help: {p.stderr[-2000:]}")

    def test_trace_finds_its_library(self):
        out = os.path.join(self.tmp, "trace")
        p = subprocess.run([sys.executable, os.path.join(self.tools, "archbench_trace.py"), "run", "--api", "opencl",
                            "--out", out, "--", self.archbench, FILTER, *QUICK],
                           capture_output=True, text=True, env=self.env, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout[-1000:] + p.stderr[-2000:])
        self.assertTrue(glob.glob(os.path.join(out, "*.jsonl")), "the tracer wrote no record")
        # Every injection library is found in PREFIX/lib (archbench_topdown.py uses the same search).
        code = ("import sys; from archbench.run.inject import locate; "
                "print('\\n'.join(str(locate(n, None)) for n in sys.argv[1:]))")
        names = [os.path.basename(f) for f in glob.glob(os.path.join(self.p, "lib", "libarchbench_*.so"))]
        found = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, check=True,
                               env=dict(self.env, PYTHONPATH=self.tools)).stdout.split()
        self.assertEqual(found, [os.path.join(self.p, "lib", n) for n in names])

    def test_mpi_merge(self):
        mpi = os.environ.get("ARCHBENCH_MPIEXEC")
        launcher = os.path.join(self.p, "bin", "archbench_mpi")
        if not mpi or not os.path.exists(launcher):
            self.skipTest("no archbench_mpi or mpirun in this build")
        out = os.path.join(self.tmp, "merged.json")
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(self.env)
            p = mpi_e2e.mpirun(mpi, launcher, out, {})
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        with open(out, encoding="utf-8") as f:
            runs = json.load(f)["context"]["runs"]
        self.assertEqual(sorted(r["rank"] for r in runs), ["0", "1"])
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "merged-variability.json")))
        # The report was made by the installed tools (Python caches what it imports beside it),
        # not by the sources the build knows of.
        self.assertTrue(glob.glob(os.path.join(self.tools, "archbench", "*", "__pycache__", "variability*.pyc")),
                        "the variability report did not come from the installed tools")


if __name__ == "__main__":
    unittest.main()
