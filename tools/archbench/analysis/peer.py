"""The peer family's results as matrices: rows the source GPU, columns the destination; per variant
and size the median over repetitions in GB/s (1000-based) or, for latency, microseconds per access."""

import statistics

from ..records import results as ar

AXES = ("op", "src", "dst", "bytes")  # a peer benchmark's axes besides family and backend


def matrices(paths):
    """{(variant, bytes): {"unit": ..., "cells": {(src, dst): value}}} from results files or folders."""
    benches = {}
    for path in paths:
        for file in ar.result_files(path):
            ar.add_entries(benches, ar.read_results(file)[1])
    out = {}
    for bench in benches.values():
        axes = bench.axes
        if (axes.get("family"), axes.get("backend")) != ("peer", "cuda") or not all(k in axes for k in AXES):
            continue
        latency = axes["op"] == "latency"
        values = ar.values_of(bench, "ns_per_access" if latency else "byte_per_s")
        if not values:
            continue  # skipped or failed: its error is in the results file
        value = statistics.median(values) / (1e3 if latency else 1e9)
        cell = out.setdefault((axes["op"], int(axes["bytes"])), {"unit": "us" if latency else "GB/s", "cells": {}})
        cell["cells"][(int(axes["src"]), int(axes["dst"]))] = value
    return out
