"""The layers of tools/archbench (tools/archbench/__init__.py): every module imports only from its
own layer or lower ones, no import cycle, and the analysis layer stays pure (no argparse, no
subprocess, nothing drawn). Read with ast: nothing is imported or run."""

import ast
import os
import tempfile
import unittest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools",
                       "archbench")
# Bottom to top; a module's layer is its sub-package's, cli is the base, __main__ a command.
LAYERS = ("base", "records", "run", "analysis", "render", "commands")
TOP_LEVEL = {"archbench": "base", "archbench.cli": "base", "archbench.__main__": "commands"}
IMPURE = ("argparse", "subprocess", "matplotlib")  # what an analysis module may not import
DRAWN = ("<svg", "<html", "<table", "<div", "<img", "<p>", "<p ")  # what it may not write


def modules():
    """{dotted name: path} of every module of the package."""
    out = {}
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, os.path.dirname(PACKAGE)).replace(os.sep, ".")
        for f in files:
            if f.endswith(".py"):
                out[rel if f == "__init__.py" else f"{rel}.{f[:-3]}"] = os.path.join(folder, f)
    return out


def layer(name):
    """The layer of a module of the package, or None where it is in none."""
    if name in TOP_LEVEL:
        return TOP_LEVEL[name]
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS[1:] else None


def imports(name, path, known):
    """(modules of the package, other top-level modules) that a module imports, anywhere in it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    inside, outside = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            targets = [(base, [a.name for a in node.names])]
        else:
            continue
        for module, names in targets:
            if module.split(".")[0] != "archbench":
                outside.add(module.split(".")[0])
                continue
            # `from PACKAGE import NAME` imports the module PACKAGE.NAME where there is one.
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
            inside.update(subs or [module])
    return inside, outside


class Layers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = modules()
        cls.graph, cls.external = {}, {}
        for name, path in cls.modules.items():
            cls.graph[name], cls.external[name] = imports(name, path, cls.modules)

    def test_every_module_has_a_layer(self):
        self.assertEqual([n for n in self.modules if layer(n) is None], [],
                         "modules outside the layers (tools/archbench/__init__.py lists them)")

    def test_downward_only(self):
        upward = [f"{n} ({layer(n)}) imports {m} ({layer(m)})" for n, deps in sorted(self.graph.items())
                  for m in sorted(deps) if layer(n) and layer(m)
                  and LAYERS.index(layer(m)) > LAYERS.index(layer(n))]
        self.assertEqual(upward, [])

    def test_no_cycle(self):
        cycles, state = [], {}

        def visit(n, path):
            state[n] = "open"
            for m in sorted(self.graph.get(n, ())):
                if m == n:
                    continue
                if state.get(m) == "open":
                    cycles.append(" -> ".join(path[path.index(m):] + [m]))
                elif m not in state:
                    visit(m, path + [m])
            state[n] = "done"

        for n in sorted(self.graph):
            if n not in state:
                visit(n, [n])
        self.assertEqual(cycles, [])

    def test_analysis_is_pure(self):
        for name, path in sorted(self.modules.items()):
            if layer(name) != "analysis":
                continue
            with self.subTest(module=name):
                self.assertEqual(sorted(self.external[name] & set(IMPURE)), [])
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                drawn = [node.value[:40] for node in ast.walk(tree) if isinstance(node, ast.Constant)
                         and isinstance(node.value, str) and any(tag in node.value for tag in DRAWN)]
                self.assertEqual(drawn, [], "HTML or SVG belongs to render/")

    def test_the_walk_resolves_imports(self):
        """Relative, absolute and from-package imports, at any depth of the code, name their modules."""
        known = {"archbench.cli", "archbench.render.charts", "archbench.records.results", "archbench.analysis.stats"}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fake.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write("import json\nfrom .. import cli\nfrom . import results\nimport archbench.analysis.stats\n"
                        "def f():\n    from ..render import charts\n")
            inside, outside = imports("archbench.records.fake", path, known)
        self.assertEqual(inside, known)
        self.assertEqual(outside, {"json"})

if __name__ == "__main__":
    unittest.main()
