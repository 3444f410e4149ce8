"""A peer matrix (analysis/peer.py) as console text."""


def render(key, matrix):
    """One matrix as console text: rows src, columns dst, '-' where nothing was measured."""
    variant, size = key
    gpus = sorted({g for pair in matrix["cells"] for g in pair})
    lines = [f"{variant}, {size / 2**20:g} MiB ({matrix['unit']}; rows: source GPU, columns: destination)",
             "src\\dst " + "".join(f"{d:>10}" for d in gpus)]
    for s in gpus:
        row = "".join(f"{matrix['cells'][(s, d)]:>10.4g}" if (s, d) in matrix["cells"] else f"{'-':>10}" for d in gpus)
        lines.append(f"{s:>7} " + row)
    return "\n".join(lines)
