"""The instructions of each kernel's timed loop, from its SASS.

Usage: python3 -m archbench sass DUMP... [--json FILE]

DUMP: files or folders of `cuobjdump -sass` listings (*.sass), as written beside the cubins that
ARCHBENCH_DUMP_DIR saves (a listing's <stem>.options, the kernel's NVRTC options, names its
specialisation: -DT=float -DW=4 ...). For every function, the innermost loops (a backward branch
and the instructions from its target to it) and, per loop, each opcode's count: what the loop
really issues per trip of its unrolled body, to set beside what the cost model counts (an FFMA is
one FMA of 32 lanes; IADD3, ISETP and BRA are the loop's own overhead). Exit 2 on bad input.
Standard library only.
"""

import argparse
import json
import os
import re
import sys

from . import cli

FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"^(?:@!?U?P\w+\s+)?BRA\s+(?:\S+\s+)?0x([0-9a-f]+)")


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


def opcode(text):
    """The mnemonic of an instruction with its modifiers (LDG.E.64.CONSTANT), predicate dropped."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def loops(insns):
    """Innermost loops: [(start, end, {opcode: count})], a loop being the instructions from a
    backward branch's target up to the branch, holding no other backward branch's loop."""
    spans = []
    for addr, text in insns:
        m = BRANCH.match(text)
        if m and int(m.group(1), 16) < addr:
            spans.append((int(m.group(1), 16), addr))
    inner = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    out = []
    for start, end in sorted(inner):
        counts = {}
        for addr, text in insns:
            if start <= addr <= end:
                op = opcode(text)
                counts[op] = counts.get(op, 0) + 1
        out.append((start, end, counts))
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


def analyse(paths):
    out = []
    for path in listing_files(paths):
        found = functions(cli.read_lines(path))
        if not found:
            raise cli.InputError(f"{path}: not a cuobjdump -sass listing (no 'Function :' line)")
        for name, insns in found.items():
            for start, end, counts in loops(insns):
                out.append({"file": os.path.basename(path), "function": name, "options": specialisation(path),
                            "loop": [f"0x{start:04x}", f"0x{end:04x}"], "instructions": sum(counts.values()),
                            "opcodes": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))})
    return out


def run(argv):
    ap = argparse.ArgumentParser(prog="archbench sass", description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", nargs="+", help="cuobjdump -sass listings or folders of them")
    ap.add_argument("--json", help="also write the loops as JSON here")
    args = ap.parse_args(argv)
    rows = analyse(args.dumps)
    for r in rows:
        ops = ", ".join(f"{k} {v}" for k, v in r["opcodes"].items())
        print(f"{r['function']} [{r['options']}] loop {r['loop'][0]}-{r['loop'][1]}: {r['instructions']} instructions: {ops}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return cli.EXIT_OK


def main(argv=None):
    """The command line; returns the exit code."""
    return cli.run("archbench sass", run, argv)


if __name__ == "__main__":
    sys.exit(main())
