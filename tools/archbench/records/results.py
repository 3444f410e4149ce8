"""Results files: reading Google Benchmark JSON with clear errors, the schema check and the one
schema-1 converter, folders of files, and benchmark rows folded by name for pairing.

Schema 2 (context "schema_version" "2"): every benchmark entry carries "axes" (an ordered object,
always with family and backend; numbers as JSON numbers), "name_format" (name_format.format(**axes)
is the run name without /manual_time), "cost" (the work of one launch) and optionally "baseline"
and "relation" ("slowdown" or "speedup"), from which the loader derives that metric. A file
without schema_version is schema 1 and is converted in memory by convert_v1, the only place that
splits a name into axes. flat_records() gives one flat record per entry (axes.op, axes.width,
cost.flops, ...), the shape pandas.json_normalize(data["benchmarks"]) makes.
"""

import gzip
import json
import math
import os
import re
import statistics
import zlib
from dataclasses import dataclass, field

from .. import cli
from ..cli import InputError

SCHEMA_VERSION = 2
SUFFIX = "/manual_time"
TIME_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
RELATIONS = ("slowdown", "speedup")
SCALARS = ("int", "float", "double", "half", "bfloat")
# Schema 1: the names of a family's positional name parts (those without "key:"), in order.
POSITIONAL = {"flops": ("source", "type"), "launch": ("op", "mode")}
POSITIONAL_DEFAULT = ("op", "type", "variant")
# Schema 1: cost per launch from a rate counter x the time of one iteration (seconds).
RATE_COST = {"flop_per_s": "flops", "op_per_s": "int_ops", "byte_per_s": "bytes", "call_per_s": "calls"}


ARCHBENCH_KEYS = ("schema_version", "archbench_version", "device")  # a context has one: archbench wrote it
STRING_FIELDS = ("name", "run_name", "run_type", "aggregate_name", "error_message", "name_format", "baseline",
                 "relation")


@dataclass
class Bench:
    """The samples of one benchmark, by metric, gathered from one side's files."""
    samples: dict = field(default_factory=dict)      # metric -> [value] from iteration rows
    medians: dict = field(default_factory=dict)      # metric -> [value] from median aggregates
    cvs: dict = field(default_factory=dict)          # metric -> [value] from cv aggregates
    error: str = ""
    axes: dict = field(default_factory=dict)         # the benchmark's axes (family, backend, op, ...)
    costs: dict = field(default_factory=dict)        # cost key -> [work per launch] of its rows
    runs: dict = field(default_factory=dict)         # metric -> [median of each file] (load_side)


def is_higher_better(metric):
    """True for rates (*_per_s), False for times and latencies."""
    return metric.endswith("_per_s") or metric.endswith("_per_second")


def is_metric(key):
    """True for the keys compared besides real_time: rate and latency counters."""
    return is_higher_better(key) or key.startswith("ns_per_") or key.startswith("cycles_per_")


def is_energy(key):
    """True for the energy counters (*_per_joule, joule)."""
    return key.endswith("_per_joule") or key == "joule"


def base_name(entry):
    """The benchmark's name for pairing: run_name (or name) without /manual_time."""
    name = entry.get("run_name") or entry["name"]
    if entry.get("run_type") == "aggregate" and "run_name" not in entry:
        agg = entry.get("aggregate_name", "")
        if agg and name.endswith("_" + agg):
            name = name[: -len(agg) - 1]
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name


def number(value):
    """The value as a float, or None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer beyond any float (JSON has no bound)
        return None
    return value if math.isfinite(value) else None


def to_float(value):
    """A context value (often a string) as a float, or None."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def entry_metrics(entry):
    """The metrics of one benchmark row: real_time in ns plus the rate/latency counters."""
    out = {}
    scale = TIME_TO_NS.get(entry.get("time_unit", "ns"), 1.0)
    if number(entry.get("real_time")) is not None:
        out["real_time"] = number(entry["real_time"]) * scale
    for key, value in entry.items():
        if is_metric(key) and number(value) is not None:
            out[key] = number(value)
    return out


# ---------------------------------------------------------------- reading

def read_json(path):
    """Parse one JSON file, plain or gzip-compressed (told by its first bytes: a full sweep's
    record is committed as .json.gz), or raise InputError saying why it cannot be read."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")) as f:
            text = f.read()
        doc = json.loads(text)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text (UTF-8) file") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if SURROGATE_ESCAPE.search(text) and lone_surrogate(doc):  # JSON's \\ud800 is no character
        raise InputError(f"{path}: not valid Unicode text: a string holds a lone surrogate "
                         f"({cli.term(lone_surrogate(doc))[:60]})")
    return doc


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def lone_surrogate(doc):
    """The first string (or key) of a parsed document that holds a lone surrogate, or None."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.keys()) + list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
    return None


def not_results(data):
    """Why a parsed JSON document is no results file but another tool's output (a roofline model,
    a variability report, a peer matrix, a trace summary or trace, a TopDown analysis), or None."""
    if isinstance(data, dict) and "benchmarks" in data:
        return None
    if isinstance(data, list):
        return "a list (a peer matrix), not a results file"
    if not isinstance(data, dict):
        return "not a JSON object"
    kinds = (("traceEvents", "a Chrome trace (archbench_trace.py)"), ("record_counts", "a trace summary"),
             ("kernels", "a TopDown analysis (archbench_topdown.py)"), ("orm", "a roofline model"),
             ("per_benchmark", "a variability report"))
    return next((text for key, text in kinds if key in data), "an object without a \"benchmarks\" list") \
        + ", not a results file"


def schema_version(path, context):
    """The file's schema version: 1 without schema_version; raises InputError for an unknown one."""
    raw = context.get("schema_version")
    if raw is None:
        return 1
    version = int(raw) if str(raw).isdigit() else None
    if version not in (1, SCHEMA_VERSION):
        raise InputError(f"{path}: schema_version {raw!r} is not one this tool reads "
                         f"(1 and {SCHEMA_VERSION}); update the tools")
    return version


def read_results(path):
    """Parse one results file into schema 2 (converting schema 1, deriving relations);
    returns (context, benchmarks) or raises InputError."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list) \
            or not isinstance(data.get("context"), dict):
        raise InputError(f"{path}: not a Google Benchmark results file (needs a \"context\" object "
                         f"and a \"benchmarks\" list)")
    context, entries = data["context"], data["benchmarks"]
    if not any(key in context for key in ARCHBENCH_KEYS):
        raise InputError(f"{path}: a Google Benchmark file from another program (its context has none of "
                         f"{', '.join(ARCHBENCH_KEYS)}), not archbench results")
    for i, entry in enumerate(entries):
        check_entry(path, i, entry)
    if schema_version(path, context) == 1:
        context = dict(context, schema_version=str(SCHEMA_VERSION), converted_from_schema="1")
        entries = [convert_v1(e) for e in entries]
    else:
        for i, entry in enumerate(entries):
            if not isinstance(entry.get("axes"), dict) or not isinstance(entry.get("name_format"), str):
                raise InputError(f"{path}: benchmark entry {i} ({entry['name']}) has no \"axes\" object "
                                 f"or \"name_format\" (schema 2)")
        derive_relations(entries)
    return context, entries


def check_entry(path, i, entry):
    """Raise InputError unless the fields the tools read have their types (numbers may be NaN)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise InputError(f"{path}: benchmark entry {i} has no name")
    where = f"{path}: benchmark entry {i}"
    for key, value in entry.items():
        if key in STRING_FIELDS:
            want = "a string"
            ok = isinstance(value, str)
        elif key == "real_time" or is_metric(key) or is_energy(key):
            want = "a number"
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif key == "time_unit":
            want = "one of " + ", ".join(TIME_TO_NS)
            ok = value in TIME_TO_NS if isinstance(value, str) else False
        elif key == "error_occurred":
            want, ok = "true or false", isinstance(value, bool)
        elif key == "axes":
            want = "an object of strings and numbers (family and backend strings)"
            ok = isinstance(value, dict) and all(isinstance(v, (str, int, float)) for v in value.values()) \
                and all(isinstance(value.get(k, ""), str) for k in ("family", "backend"))
        elif key == "cost":
            want = "an object of numbers"
            ok = isinstance(value, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in value.values())
        else:
            continue
        if not ok:
            raise InputError(f"{where}: \"{key}\" is {type(value).__name__} {json.dumps(value)[:40]}, not {want}")
    if "name_format" in entry and isinstance(entry.get("axes"), dict):
        try:
            name_of(entry)
        except ValueError as e:
            raise InputError(f"{where}: name_format {json.dumps(entry['name_format'])[:60]}: {e}") from None


def load(path):
    """(context, benchmarks) of a results file, or (None, why) for another tool's JSON output;
    raises InputError for a file that is neither."""
    data = read_json(path)
    why = not_results(data)
    return (None, why) if why else read_results(path)


def result_files(path):
    """The JSON files a results argument stands for (a file, or every *.json results file below
    a folder: the models and reports tools write beside them are left out)."""
    if os.path.isdir(path):
        found = sorted(os.path.join(root, name) for root, _, names in os.walk(path)
                       for name in names if name.lower().endswith(".json"))
        found = [f for f in found if not is_derived(f)]
        if not found:
            raise InputError(f"{path}: folder holds no *.json results files")
        return found
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file or folder")
    return [path]


def is_derived(path):
    """True for a well-formed JSON document that is no results file (another tool's output)."""
    try:
        return not_results(read_json(path)) is not None
    except InputError:
        return False  # read_results says what is wrong with it


# ---------------------------------------------------------------- schema

FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def name_of(entry):
    """The benchmark's name rebuilt from its axes (schema 2). name_format is untrusted text, so
    not str.format (whose fields reach attributes, items and widths of any size): only plain
    {axis} fields of one of the entry's axes, and {{ }} for braces; ValueError for anything else."""
    axes = entry["axes"]

    def fill(m):
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        key = m.group(1)
        if key is None:
            raise ValueError("a single { or } (write {{ or }})")
        if key not in axes:
            raise ValueError(f"field {{{key[:40]}}} is not one of its axes (only plain {{axis}} fields)")
        return str(axes[key])
    return FIELD.sub(fill, entry["name_format"])


def axis_value(text):
    """A name part's value: an int or float where it is a number, else the text."""
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text) if re.fullmatch(r"-?\d*\.\d+", text) else text


def convert_v1(entry):
    """A schema-1 entry in schema 2: axes and name_format from its name, cost per launch from its
    rate counters x its time per iteration (what can be recovered; flagged "converted")."""
    axes, name_format = axes_of_name(base_name(entry))
    return dict(entry, axes=axes, name_format=name_format, cost=cost_v1(entry), converted=True)


def axes_of_name(name):
    """(axes, name_format) of a schema-1 name: family/backend, then "key:value" parts as that axis
    and bare parts by the family's positional names; a scalar type (float4) adds scalar and width.
    The one place where a name is split."""
    parts = name.split("/")
    axes, fmt = {"family": parts[0], "backend": parts[1] if len(parts) > 1 else ""}, ["{family}", "{backend}"]
    names = iter(POSITIONAL.get(parts[0], POSITIONAL_DEFAULT))
    for part in parts[2:]:
        key, sep, value = part.partition(":")
        if not sep:
            key, value = next(names, f"part{len(axes)}"), part
        axes[key] = axis_value(value)
        fmt.append(f"{key}:{{{key}}}" if sep else f"{{{key}}}")
    scalar = re.fullmatch(r"([a-z]+?)(\d*)", str(axes.get("type", "")))
    if scalar and scalar.group(1) in SCALARS:
        axes["scalar"], axes["width"] = scalar.group(1), int(scalar.group(2) or 1)
    return axes, "/".join(fmt)


def cost_v1(entry):
    """The work of one launch recovered from a schema-1 row's counters (empty for spreads)."""
    if entry.get("run_type") == "aggregate" and entry.get("aggregate_name") not in ("mean", "median"):
        return {}
    metrics = entry_metrics(entry)
    if "real_time" not in metrics:
        return {}
    seconds = metrics["real_time"] * 1e-9
    cost = {RATE_COST[k]: v * seconds for k, v in metrics.items() if k in RATE_COST}
    if metrics.get("ns_per_access"):
        cost["accesses"] = metrics["real_time"] / metrics["ns_per_access"]
    return cost


def derive_relations(entries):
    """Set each entry's relation (slowdown: its median real_time over its baseline's; speedup: the
    inverse) from the rows of one file, per GPU of a merged file."""
    times = {}
    for entry in entries:
        if entry.get("run_type", "iteration") == "iteration" and not entry.get("error_occurred"):
            t = entry_metrics(entry).get("real_time")
            if t is not None:
                times.setdefault((unit_of(entry), base_name(entry)), []).append(t)
    for entry in entries:
        relation, baseline = entry.get("relation"), entry.get("baseline")
        if relation not in RELATIONS or not baseline:
            continue
        mine, theirs = times.get((unit_of(entry), base_name(entry))), times.get((unit_of(entry), baseline))
        if mine and theirs and statistics.median(mine) > 0 and statistics.median(theirs) > 0:
            ratio = statistics.median(mine) / statistics.median(theirs)
            entry[relation] = ratio if relation == "slowdown" else 1 / ratio


UNIT_TAGS = ("host", "rank", "device_selector")  # what tells one GPU of a cluster from another


def unit_of(entry):
    """The GPU a merged entry came from, as a readable label ("host rank 1 cuda:0")."""
    parts = [str(entry[k]) if k != "rank" else f"rank {entry[k]}" for k in UNIT_TAGS if str(entry.get(k, "")) != ""]
    return " ".join(parts) or "?"


def flat_records(entries):
    """One flat dict per entry, nested objects as dotted keys (axes.op, cost.flops): the columns
    pandas.json_normalize(data["benchmarks"]) makes."""
    def flatten(obj, prefix):
        for key, value in obj.items():
            if isinstance(value, dict):
                yield from flatten(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value
    return [dict(flatten(e, "")) for e in entries]


# ---------------------------------------------------------------- folding rows by name

def add_entries(benches, entries, energy=False):
    """Fold one file's benchmark rows into benches (name -> Bench); with energy, the energy
    counters too."""
    for entry in entries:
        bench = benches.setdefault(base_name(entry), Bench())
        bench.axes = bench.axes or entry.get("axes", {})
        if entry.get("error_occurred"):
            bench.error = bench.error or str(entry.get("error_message") or "error_occurred")
            continue
        run_type = entry.get("run_type", "iteration")
        if run_type == "iteration":
            target = bench.samples
        elif entry.get("aggregate_name") == "median":
            target = bench.medians
        elif entry.get("aggregate_name") == "cv":
            target = bench.cvs
        else:
            continue
        if target is not bench.cvs and isinstance(entry.get("cost"), dict):
            for key, value in entry["cost"].items():
                if number(value) is not None:
                    bench.costs.setdefault(key, []).append(number(value))
        metrics = entry_metrics(entry)
        if target is bench.cvs and "real_time" in metrics:  # a cv is a plain fraction, not a time
            metrics["real_time"] = number(entry["real_time"])
        if energy and target is not bench.cvs:
            metrics.update({k: number(v) for k, v in entry.items() if is_energy(k) and number(v) is not None})
        for metric, value in metrics.items():
            target.setdefault(metric, []).append(value)


def load_side(path):
    """Read a file or folder (or a list of them); returns (merged context: key -> [values], name -> Bench)."""
    context, benches = {}, {}
    for file in [f for p in ([path] if isinstance(path, str) else path) for f in result_files(p)]:
        ctx, entries = read_results(file)
        for key, value in ctx.items():
            values = context.setdefault(key, [])
            if value not in values:
                values.append(value)
        one = {}
        add_entries(one, entries)
        for name, part in one.items():
            merge_bench(benches.setdefault(name, Bench()), part)
    return context, benches


def merge_bench(bench, part):
    """Add one file's Bench to the side's, keeping that file's median of each metric in runs."""
    bench.axes = bench.axes or part.axes
    bench.error = bench.error or part.error
    for mine, theirs in ((bench.samples, part.samples), (bench.medians, part.medians), (bench.cvs, part.cvs),
                         (bench.costs, part.costs)):
        for key, values in theirs.items():
            mine.setdefault(key, []).extend(values)
    for metric in values_of_keys(part):
        bench.runs.setdefault(metric, []).append(statistics.median(values_of(part, metric)))


def cost_of(bench):
    """The benchmark's work per launch: {key: median over its rows}."""
    return {key: statistics.median(values) for key, values in bench.costs.items() if values}


def values_of(bench, metric):
    """The samples of one metric: iteration rows, else the median aggregates."""
    return bench.samples.get(metric) or bench.medians.get(metric) or []


def values_of_keys(bench):
    """Every metric a Bench has samples or medians for."""
    return set(bench.samples) | set(bench.medians)


def median_of(bench, metric):
    """The benchmark's median of a metric: its median aggregates, else the median of its iterations."""
    if bench.error:
        return None
    values = bench.medians.get(metric) or bench.samples.get(metric)
    return statistics.median(values) if values else None


def noise_record(base):
    """The repeated runs kept with a baseline file: compare-noise/ beside it (or holding it), or None."""
    folder = os.path.dirname(os.path.abspath(base))
    if os.path.basename(folder) != "compare-noise":
        folder = os.path.join(folder, "compare-noise")
    return folder if os.path.isfile(base) and os.path.isdir(folder) else None


def load_device(paths):
    """Read the files of one device; returns (device, merged context, name -> Bench, files, backend ->
    cache_bytes); InputError where they are of several devices."""
    files, devices, context, benches, cache_bytes = [], {}, {}, {}, {}
    for path in paths:
        files += result_files(path)
    for file in files:
        ctx, entries = read_results(file)
        devices.setdefault(str(ctx.get("device", "")), []).append(file)
        for key, value in ctx.items():
            context.setdefault(key, value)
        cb = number(to_float(ctx.get("cache_bytes")))
        backend = str(ctx.get("backend", ""))
        if cb:
            cache_bytes[backend] = max(cache_bytes.get(backend, 0.0), cb)
        add_entries(benches, entries, energy=True)
    if len(devices) != 1:
        raise InputError("files of %d devices (%s): a roofline is of one device; give the files of one "
                         "device" % (len(devices), "; ".join(f"{d or '(none)'}: {', '.join(f)}"
                                                               for d, f in sorted(devices.items()))))
    return next(iter(devices)), context, benches, files, cache_bytes
