"""Layer 0 of the package (imports nothing of it): what every tool shares at its edges: the exit
codes, InputError and the one-line error, the escaping of untrusted text (benchmark names, context
values, trace records) for each place it is shown, si() for values, reading a text file and writing
an output, and run(), the wrapper that maps a command's exceptions to exit codes.

Exit codes of the tools (README, "Exit codes"): 0 done, nothing flagged; 1 a run listed in the
input failed (merge, variability), or an internal error of the tool (a bug: --debug shows the
traceback); 2 bad input (a malformed, truncated, non-UTF-8 or foreign file, wrong field types,
nothing to compare, an output that cannot be written); 3 a regression found (compare); 4 a slow
GPU found (variability). No crash exits 3 or 4.
"""

import argparse
import os
import re
import signal
import stat
import sys
import tempfile
import traceback
import unicodedata

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_REGRESSION, EXIT_SLOW_GPU = 0, 1, 2, 3, 4


class InputError(Exception):
    """Input a tool cannot use (a file, a field, an argument); the message names the file."""


# ---------------------------------------------------------------- escaping, one helper per target

def _escaped(ch):
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")  # control, format, lone surrogate, line/paragraph separators


def term(text, keep=""):
    """Untrusted text made safe for any output (a terminal, a chart label, UTF-8 text): every
    control or format character (ESC, CR, newline, bidi overrides) and every lone surrogate (not
    encodable) shown as a visible escape (\\x1b, \\ud800), except those in keep. md() and html()
    build on it; charts pass every label through it."""
    return "".join(_escaped(c) if c not in keep and unicodedata.category(c) in UNSAFE else c
                   for c in str(text))


MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-!|~&$])")


def md(text):
    """Text for GitHub Markdown (a table cell, a list item): control characters and newlines as
    visible escapes, and every character Markdown or its HTML would act on backslash-escaped."""
    return MD_SPECIAL.sub(r"\\\1", term(text))


def html(text):
    """Text for HTML, SVG and XML (element text or a quoted attribute)."""
    return term(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
        .replace('"', "&quot;").replace("'", "&#39;")


def label(text):
    """Text for a matplotlib label: term(), and "$" escaped (no mathtext: a name is never a formula,
    and a malformed one would fail the chart)."""
    return term(text).replace("$", r"\$")


def si(value, unit=""):
    """A value with an SI prefix and unit."""
    if value is None:
        return "-"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".rstrip()


class TerminalStream:
    """A text stream that lets no control character but newline and tab through (the net under
    every print of a tool: names reach many f-strings)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(term(text, keep="\n\t"))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def read_lines(path):
    """The lines of a UTF-8 text file, or InputError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readlines()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a text (UTF-8) file: {e.reason} at byte {e.start}") from None


def write_file(path, data):
    """The one writer of every output (text or bytes): written to a temporary file beside the
    target (through a symlink, beside its target) and renamed over it only when complete, so a run
    that fails late (bad input found late, a full disk) leaves the previous file intact. A device
    or FIFO (/dev/null, /dev/stdout) is written in place. Raises InputError saying why it could not
    be written."""
    target = os.path.realpath(path)
    # a lone surrogate the renderers left (term() escapes them) must not lose the output
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "backslashreplace")
    try:
        try:
            old = os.stat(target)
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            with open(target, "wb") as f:
                f.write(raw)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)[:100]}.", suffix=".tmp",  # a name fits
                                   dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            # the mode the file had, else what open() would give (mkstemp makes it 0600)
            os.chmod(tmp, stat.S_IMODE(old.st_mode) if old else 0o666 & ~current_umask())
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e}") from None


def current_umask():
    """The process's umask (reading it means setting it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def arg_type(parse):
    """An argparse type from a parser that raises ValueError: the error shows the ValueError's own
    message (argparse's own would say only "invalid value")."""
    def typed(text):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return typed


# ---------------------------------------------------------------- running a tool

def exit_like_shell(rc):
    """The program's exit as the shell saw it: its status, or death by the same signal (re-raised
    here, without a core of this script; 128+N where the signal cannot be re-raised)."""
    if rc >= 0:
        return rc
    sig = -rc
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    except (OSError, ValueError):
        pass
    return 128 + sig


def run(tool, main, argv=None):
    """Run main(argv) as the tool's command line: returns its exit code; failures become one line
    on stderr ("tool: what") and exit 2 (bad input) or 1 (internal error); --debug (before any
    "--") adds the traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    head = argv[:argv.index("--")] if "--" in argv else argv
    debug = "--debug" in head
    if debug:
        argv.remove("--debug")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(sys.stdout), TerminalStream(sys.stderr)
    try:
        code = main(argv)
        return exit_like_shell(code) if isinstance(code, int) and code < 0 else code  # a program's death by a signal
    except KeyboardInterrupt:
        return fail(tool, "interrupted", debug, 130)
    except InputError as e:
        return fail(tool, str(e), debug, EXIT_BAD_INPUT)
    except UnicodeDecodeError as e:
        return fail(tool, f"not a text (UTF-8) input: {e.reason} at byte {e.start}", debug, EXIT_BAD_INPUT)
    except OSError as e:  # an output that cannot be written, an input that cannot be read
        where = f"{e.filename}: " if e.filename else ""
        return fail(tool, f"{where}{e.strerror or e}", debug, EXIT_BAD_INPUT)
    except RecursionError:
        return fail(tool, "input nested too deeply", debug, EXIT_BAD_INPUT)
    except Exception as e:  # a bug of the tool: never a code that means a finding
        return fail(tool, f"internal error: {type(e).__name__}: {e}" + ("" if debug else " (--debug shows where)"),
                    debug, EXIT_FAILED)
    finally:
        sys.stdout.flush()
        sys.stdout, sys.stderr = saved


def fail(tool, message, debug, code):
    """Print the one line (after the traceback with --debug); returns code."""
    if debug:
        traceback.print_exc()
    print(f"{tool}: {' '.join(str(message).split())}", file=sys.stderr)
    return code
