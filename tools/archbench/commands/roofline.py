"""Roofline models of one device from archbench results (reads JSON, never re-measures).

Usage: archbench_roofline.py RESULTS [RESULTS ...] [--precision float|double|half] [--tolerance 0.15]
                             [--svg FILE] [--png FILE] [--energy-svg FILE] [--json FILE]
                             [--peak NAME=VALUE ...] [--cache-level NAME] [--title TEXT]

RESULTS are results files or folders (every *.json below); all must be of the same context
"device" (else exit 2). Each benchmark's value is the median over its repetitions: the "median"
aggregate rows when present, else the median of the iteration rows.

Ceilings:
  compute    per type (int, float, double, half, bfloat): with FMA = max over widths of
             compute/*/mad/<type><width>, without FMA = max of compute/*/add|mul/<type><width>
             (flop_per_s; op_per_s for int); compute/cuda/mma|wgmma/<t> are listed as tensor
             ceilings (console and JSON only).
  levels     cache/<be>/read/bytes:N (and rmw, as a second curve): a plateau is a maximal run of
             at least 2 consecutive working sets whose byte_per_s all lie within --tolerance
             (relative) of the run's median; the longest such run is taken first, then the
             longest in what is left on either side. Plateaus from the smallest working set up are
             L1, L2, ...; the last one, when it reaches past the context's cache_bytes (or when
             cache_bytes is unknown), is device memory. A level's ceiling is its plateau's median.
  local      local/*/read/stride:1 (byte_per_s), the shared/local memory ceiling.
  memory     memory/*/triad|copy|add/... (best byte_per_s). Device memory is the cache family's
             device-memory plateau when there is one, else triad; both are reported.
Models: ORM (device memory and compute peaks) and CARM (one bandwidth ceiling per level), with
ridge points (peak / bandwidth, FLOP/byte); the textbook roofline from published peaks of known
devices (matched by a substring of the device name; --peak fp32|fp64|fp16|dram|shared=VALUE, in
FLOP/s or B/s, SI suffixes k M G T P allowed, overrides or supplies them).
Roof check: every flops/<be>/<dram|cache>/<type>/flops:N point (AI = flop_per_s / byte_per_s) is
compared with roof(AI) = min(FMA peak of its type, bandwidth x AI), dram points against device
memory, cache points against the last cache level before device memory (--cache-level picks
another, e.g. L1); acceptance: attained within 10% of the roof on both sides of the ridge, the
knee (points within 4x of the ridge's AI) reported but not judged; also per source (dram, cache).

Options:
  --precision    the compute ceilings drawn (default float)
  --tolerance    plateau tolerance, relative (default 0.15)
  --svg FILE     roofline chart (default roofline.svg); always written: with matplotlib where
                 importable, else the plain SVG (render/charts.py; ARCHBENCH_CHARTS=svg forces it)
  --png FILE     the same chart as PNG with matplotlib when importable (default: the SVG's name
                 with .png); says so when it cannot be written
  --energy-svg   energy roofline (flop_per_joule against AI) when energy counters exist
  --json FILE    ceilings, models, ridges, textbook peaks and the roof check as JSON
  --title TEXT   chart title
Measured traffic (archbench --traffic): where benchmarks carry traffic_* and exec_* counters, three
more charts beside --svg, <stem>-dram (ORM: intensity over measured DRAM bytes), <stem>-l1 (CARM:
over L1 and shared bytes) and <stem>-hierarchical (a point per measured level, joined), SVG and PNG;
y is executed FLOP/s. --program -- PROGRAM ARGS places any CUDA program's kernels (the program
command, commands/program.py).
Exit: 0 done, 2 bad input (malformed file, files of several devices, bad option).
"""

import argparse
import json
import os
import sys

from .. import cli
from ..analysis import traffic
from ..analysis.roofline import (PEAK_NAMES, PRECISIONS, bandwidths, cache_level_for, compute_energy, compute_peaks,
                                 models, parse_peak, place, points_of, roof_check, textbook_peaks)
from ..records import results as ar
from ..render.roofline import energy_svg, levels_note, report, write_chart, write_measured, write_png

TOOL = "archbench_roofline"


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(usage="%(prog)s RESULTS [RESULTS ...] [--svg FILE] [--json FILE] [options]",
                                description="Roofline models (ORM, CARM, textbook) of one device from "
                                            "archbench results.",
                                epilog="Ceilings, models and the roof check: tools/README.md. A CUDA program's "
                                       "kernels: archbench_program.py (also --program -- PROGRAM ARGS here).")
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders of one device")
    p.add_argument("--svg", metavar="FILE", default="roofline.svg", help="roofline SVG (default roofline.svg)")
    p.add_argument("--png", metavar="FILE", help="roofline PNG (default: the SVG's name with .png)")
    p.add_argument("--json", metavar="FILE", help="write the models, ceilings and roof check as JSON")
    p.add_argument("--precision", choices=PRECISIONS, default="float", metavar="P",
                   help="compute ceilings drawn: float (default), double, half")
    p.add_argument("--peak", action="append", type=cli.arg_type(parse_peak), default=[], metavar="NAME=VALUE",
                   help="published peak: " + ", ".join(PEAK_NAMES) + " (FLOP/s or B/s; k M G T P suffixes)")
    p.add_argument("--energy-svg", metavar="FILE", help="energy roofline SVG (flop_per_joule against AI)")
    p.add_argument("--title", help="chart title")
    p.add_argument("--tolerance", type=float, default=0.15, metavar="X",
                   help="plateau tolerance, relative (default 0.15)")
    p.add_argument("--cache-level", metavar="NAME", help="level for the flops cache points (default: last cache)")
    args = p.parse_args(argv)
    if not 0 < args.tolerance < 1:
        p.error("--tolerance must be between 0 and 1")
    return args


def main(argv=None):
    """The command line; returns the exit code (2 on bad input). --program (before any "--") is the
    old form of the program command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--program" in (argv[:argv.index("--")] if "--" in argv else argv):
        from . import program  # here: the program command's imports are not the roofline's
        return program.main([a for a in argv if a != "--program"], TOOL, "archbench_roofline.py --program")
    return cli.run(TOOL, run, argv)


def run(argv):
    """Build the models, print them, write the charts and JSON; returns the exit code."""
    args = parse_args(argv)
    notes = []
    device, context, benches, files, cache_bytes = ar.load_device(args.results)
    compute, tensor = compute_peaks(benches)
    if not compute:
        notes.append("no compute family peaks (compute/*/mad|add|mul/<type><width>)")
    bw = bandwidths(benches, args.tolerance, cache_bytes, notes)
    textbook = textbook_peaks(device, dict(args.peak), notes)
    clock = context.get("max_clock_mhz")
    if textbook and clock and "1980" in textbook["source"] and str(clock) != "1980":
        notes.append(f"the textbook peaks are at 1980 MHz; the device reports max_clock_mhz {clock}")
    model = models(device, compute, bw, textbook, args.tolerance)
    points = points_of(benches)
    level = cache_level_for(bw, args.cache_level, notes)
    checks, acceptance = roof_check(points, compute, bw, level, notes)
    if args.precision not in compute:
        notes.append(f"no {args.precision} compute peak: the chart has no measured compute ceiling")
    _, measured = traffic.measured(args.results)
    title = args.title or f"roofline of {device} ({args.precision})"
    why = write_chart(args.svg, model, bw, points, args.precision,
                      title if measured else f"{title}; bytes from the cost model, {levels_note([])}")
    if why:
        raise ar.InputError(why)
    notes.append(f"wrote {args.svg}")
    png = args.png or os.path.splitext(args.svg)[0] + ".png"
    why = write_png(png, model, bw, points, args.precision, title)
    notes.append(f"no PNG written: {why}" if why else f"wrote {png}")
    if measured:
        notes += write_measured(os.path.splitext(args.svg)[0], model, measured, args.precision, title)
    else:
        notes.append("no traffic counters (archbench --traffic, CUDA GPUs): levels measured: none; points are "
                      "placed by the cost model's bytes, and no measured-traffic chart is drawn")
    energy = [p for p in points if p["flop_per_joule"]]
    if args.energy_svg:
        if energy:
            cli.write_file(args.energy_svg, energy_svg(points, compute_energy(benches),
                                                      f"energy roofline of {device}"))
            notes.append(f"wrote {args.energy_svg} ({len(energy)} points)")
        else:
            notes.append("no energy roofline: no benchmark has flop_per_joule with flop_per_s and byte_per_s")
    elif not energy:
        notes.append("no energy counters with flop_per_s and byte_per_s: no energy roofline")
    if args.json:
        doc = dict(model, files=files, precision=args.precision, compute=compute, tensor=tensor,
                   bandwidth=bw, points=points, roof_check=checks, acceptance=acceptance,
                   energy_compute=compute_energy(benches), notes=notes,
                   measured=[dict(name=r["name"], **place(r)) for r in measured])
        cli.write_file(args.json, json.dumps(doc, indent=1) + "\n")
        notes.append(f"wrote {args.json}")
    sys.stdout.write(report(device, files, compute, tensor, bw, model, checks, acceptance,
                            args.precision, args.tolerance, notes))
    return 0

