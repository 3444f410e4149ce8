"""The command-line pieces that the commands running a program share (not a command itself): the
help layout, the program or --report choice, and the injection options of TopDown's library
(archbench_topdown.py and archbench_program.py)."""

import argparse


def formatter(prog):
    """The help layout that fits one screen: the description as written, each option's help beside it."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=30)


def parser(prog, usage, description):
    """An ArgumentParser with the usage given and the one-screen help layout."""
    return argparse.ArgumentParser(prog=prog, usage=usage, description=description, formatter_class=formatter)


def add_report(ap):
    """--report (analyse a raw file) and --raw (keep the run's)."""
    ap.add_argument("--report", metavar="RAW.jsonl", help="analyse this raw file, run nothing")
    ap.add_argument("--raw", metavar="FILE", help="keep the raw records here (default: temporary)")


def add_native(ap):
    ap.add_argument("--no-native", action="store_true", help="skip the native run (no overhead figure)")


def add_full_names(ap):
    """--full-names: tables show kernels' whole demangled names (JSON always has them)."""
    ap.add_argument("--full-names", action="store_true",
                    help="tables show whole kernel names (default: the function, told apart where two read alike)")


def add_program(ap):
    """The program to run, after "--" (listed in the usage, not among the options)."""
    ap.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def program_or_report(ap, a):
    """The program's command line from a.command (after "--"), [] with --report; exactly one of them."""
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if bool(cmd) == bool(a.report):
        ap.error("give either -- PROGRAM [ARGS...] or --report RAW.jsonl")
    return cmd


def injection_options(ap):
    """The options of a command that runs a program under libarchbench_topdown.so (topdown,
    program): filter, sampling, raw file, library, and the program."""
    add_report(ap)
    ap.add_argument("--kernel", metavar="REGEX", help="profile only the kernels whose name matches")
    ap.add_argument("--sample", type=int, default=2, metavar="N", help="first N launches a shape (default 2; 0: all)")
    ap.add_argument("--max-launches", type=int, default=0, metavar="N",
                    help="at most N launches a kernel (default 0: any)")
    ap.add_argument("--budget", type=float, default=1.0, metavar="X",
                    help="replay time / run time at most (1; 0: no cap)")
    ap.add_argument("--prepare", choices=("ahead", "launch"), default="ahead",
                    help="CUPTI's set-up: ahead (default) or at launch")
    add_full_names(ap)
    add_native(ap)
    ap.add_argument("--lib", metavar="FILE", help="libarchbench_topdown.so's path")
    add_program(ap)


def parse_injection(ap, argv):
    """(options, the program's command line, [] with --report), checked."""
    a = ap.parse_args(argv)
    cmd = program_or_report(ap, a)
    if a.sample < 0 or a.max_launches < 0:
        ap.error("--sample and --max-launches take a count >= 0")
    if a.budget < 0:
        ap.error("--budget takes a ratio >= 0 (0: no limit)")
    return a, cmd
