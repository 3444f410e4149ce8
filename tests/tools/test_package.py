"""The installable tools package (tools/pyproject.toml): one console script per command of
`python3 -m archbench`, a thin script tools/archbench_COMMAND.py for each, and
`pip install --no-index --no-build-isolation ./tools` into a fresh venv (system site packages,
offline as on a compute node) gives the scripts, each of which answers --help from the venv."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")
sys.path.insert(0, TOOLS)
from archbench.__main__ import COMMANDS  # noqa: E402

ENTRY = re.compile(r'^(archbench-[a-z]+) = "archbench\.commands\.([a-z]+):main"$')
# What building the package needs: venv with pip (ensurepip), setuptools, and wheel where this
# setuptools has no bdist_wheel of its own (Debian: python3-venv, python3-setuptools, python3-wheel).
CAN_BUILD = ("import ensurepip, venv, setuptools\n"
             "try:\n    import wheel\nexcept ImportError:\n    from setuptools.command import bdist_wheel\n")


def console_scripts():
    """{script: command} of tools/pyproject.toml's [project.scripts]."""
    with open(os.path.join(TOOLS, "pyproject.toml"), encoding="utf-8") as f:
        return dict(m.groups() for line in f if (m := ENTRY.match(line.strip())))


def builder():
    """A Python that can make the venv and build the package: this one, else Debian's; None."""
    for python in dict.fromkeys((sys.executable, "/usr/bin/python3")):
        if os.path.exists(python) and subprocess.run([python, "-c", CAN_BUILD], capture_output=True).returncode == 0:
            return python
    return None


class Commands(unittest.TestCase):
    def test_one_script_per_command(self):
        self.assertEqual(console_scripts(), {f"archbench-{c}": c for c in COMMANDS})

    def test_thin_scripts(self):
        for command in COMMANDS:
            with self.subTest(command=command):
                self.assertTrue(os.path.isfile(os.path.join(TOOLS, f"archbench_{command}.py")))
                self.assertTrue(os.path.isfile(os.path.join(TOOLS, "archbench", "commands", f"{command}.py")))


class PipInstall(unittest.TestCase):
    def test_pip_install_offline(self):
        python = builder()
        if python is None:
            raise unittest.SkipTest("no Python here with venv, ensurepip, setuptools and wheel (Debian: "
                                    "python3-venv python3-setuptools python3-wheel; ci/deps.sh installs them)")
        with tempfile.TemporaryDirectory() as tmp:
            # A copy: the build writes build/ and *.egg-info beside the sources.
            source = os.path.join(tmp, "tools")
            shutil.copytree(os.path.join(TOOLS, "archbench"), os.path.join(source, "archbench"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copy(os.path.join(TOOLS, "pyproject.toml"), source)
            venv = os.path.join(tmp, "venv")
            subprocess.run([python, "-m", "venv", "--system-site-packages", venv], check=True, capture_output=True)
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
            p = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-index",
                                "--no-build-isolation", source], capture_output=True, text=True, env=env, cwd=tmp)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            for script in console_scripts():
                with self.subTest(script=script):
                    p = subprocess.run([os.path.join(venv, "bin", script), "--help"], capture_output=True, text=True,
                                       env=env, cwd=tmp)
                    self.assertEqual(p.returncode, 0, p.stderr[-2000:])
                    self.assertIn("usage", p.stdout.lower())
            where = subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import archbench; print(archbench.__file__)"],
                                   capture_output=True, text=True, env=env, cwd=tmp, check=True).stdout
            self.assertTrue(where.startswith(venv), f"archbench imported from {where}, not the venv")


if __name__ == "__main__":
    unittest.main()
