"""The instructions of each kernel's timed loop, from its SASS: the innermost loops of a listing's
functions and each loop's opcode counts."""

import os
import re

BRANCH = re.compile(r"^(?:@!?U?P\w+\s+)?BRA\s+(?:\S+\s+)?0x([0-9a-f]+)")


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


def analyse(listings):
    """Every innermost loop of the listings (records.sass.listings) as a row: file, function,
    specialisation, loop addresses, instruction count and opcodes (most frequent first)."""
    out = []
    for path, options, found in listings:
        for name, insns in found.items():
            for start, end, counts in loops(insns):
                out.append({"file": os.path.basename(path), "function": name, "options": options,
                            "loop": [f"0x{start:04x}", f"0x{end:04x}"], "instructions": sum(counts.values()),
                            "opcodes": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))})
    return out
