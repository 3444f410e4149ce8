"""python3 -m archbench COMMAND [ARGS...]: one of the tools by name (the same set as the console
scripts archbench-COMMAND of tools/pyproject.toml)."""
import importlib
import sys

COMMANDS = ("agreement", "compare", "health", "history", "merge", "pcsample", "peer", "program", "report", "roofline", "sass",
            "search", "timeline", "topdown", "trace", "variability")


def main(argv=None):
    """Run COMMAND's main with the remaining arguments; returns its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python3 -m archbench {{{','.join(COMMANDS)}}} [ARGS...]", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    sys.argv[0] = f"archbench {argv[0]}"
    return importlib.import_module(f"archbench.commands.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
