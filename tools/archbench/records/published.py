"""The published figures shipped in the package folder (tools/archbench/): textbook.json, the peaks
of known devices keyed by a substring of the device name (archbench's summary screen reads it too),
and seeds.json, the seeds' published tables."""

import json
import os

from ..cli import InputError

FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name):
    with open(os.path.join(FOLDER, name), encoding="utf-8") as f:
        return json.load(f)


# Published peaks (FLOP/s, B/s) of known devices: (match, source, peaks).
TEXTBOOK = tuple((d["match"], d["source"], d["peaks"]) for d in _read("textbook.json")["devices"])
SEEDS = _read("seeds.json")["tables"]  # the seeds' published figures


def read_thresholds(path=None):
    """The health verdict's thresholds: health.json beside the package, or the file given (InputError
    where it cannot be read or lacks a threshold)."""
    try:
        if path is None:
            t = _read("health.json")
        else:
            with open(path, encoding="utf-8") as f:
                t = json.load(f)
        float(t["node_fraction"]), float(t["link_fraction"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path or 'health.json'}: not a thresholds file ({type(e).__name__}: {e})") from None
    return t
