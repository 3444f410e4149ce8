"""The run manifest that `archbench --device=all` and the MPI launcher write: one line per run,
tab-separated: exit status, JSON file, file holding the run's last output lines, then key=value
tags (host, rank, device, device_selector)."""

import os

from ..cli import InputError


def read_manifest(path):
    """The runs a manifest lists: [{status, json, tail, tags}]; raises InputError."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    runs = []
    for n, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) < 3 or not fields[0].lstrip("-").isdigit():
            raise InputError(f"{path}: line {n}: expected 'status<TAB>json<TAB>tail[<TAB>key=value...]'")
        tags = dict(f.split("=", 1) for f in fields[3:] if "=" in f)
        tail = ""
        if fields[2] and os.path.exists(fields[2]):
            with open(fields[2], encoding="utf-8", errors="replace") as f:
                tail = f.read()
        runs.append({"status": int(fields[0]), "json": fields[1], "tail": tail, "tags": tags})
    return runs
