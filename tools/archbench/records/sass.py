"""`cuobjdump -sass` listings (*.sass) as ARCHBENCH_DUMP_DIR's cubins give them, and the NVRTC
options beside each (<stem>.options): reading them into functions and their instructions."""

import os
import re

from .. import cli

FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def functions(lines):
    """{function: [(address, text)]} of one listing, in address order."""
    out, name = {}, None
    for line in lines:
        m = FUNCTION.match(line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = INSN.match(line)
        if m and name:
            out[name].append((int(m.group(1), 16), m.group(2).strip()))
    return out


def listing_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".sass"))
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise cli.InputError(f"{p}: no such file or folder")
    if not files:
        raise cli.InputError("no SASS listing (*.sass) given: run cuobjdump -sass on the cubins ARCHBENCH_DUMP_DIR saved")
    return files


def specialisation(path):
    """The -D options of the listing's .options file, or ""."""
    opts = os.path.splitext(path)[0] + ".options"
    if not os.path.exists(opts):
        return ""
    words = " ".join(cli.read_lines(opts)).split()
    return " ".join(w[2:] for w in words if w.startswith("-D") and not w.startswith(("-DVT=", "-DIS_")))


def listings(paths):
    """[(file, its specialisation, {function: [(address, text)]})] of the listings in paths (files
    or folders of *.sass); a file without a function is not a listing (InputError)."""
    out = []
    for path in listing_files(paths):
        found = functions(cli.read_lines(path))
        if not found:
            raise cli.InputError(f"{path}: not a cuobjdump -sass listing (no 'Function :' line)")
        out.append((path, specialisation(path), found))
    return out
