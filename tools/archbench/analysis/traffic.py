"""Measured traffic (archbench --traffic): the bytes each launch moved at each level and the
operations it executed by precision, checked against the cost model (the agreement table, the
agreement command) and turned into roofline points (the roofline and program commands)."""
import statistics

from ..records import results as ar

# Each level's counters (reads and writes); L1 is what the SMs asked of L1 (global loads and
# stores) plus shared memory, the core side of the cache-aware model.
LEVELS = (("L1", ("traffic_l1_read_bytes", "traffic_l1_write_bytes", "traffic_shared_read_bytes",
                  "traffic_shared_write_bytes")),
          ("L2", ("traffic_l2_read_bytes", "traffic_l2_write_bytes")),
          ("DRAM", ("traffic_dram_read_bytes", "traffic_dram_write_bytes")))
FLOPS = (("fp64", "exec_flops_fp64"), ("fp32", "exec_flops_fp32"), ("fp16", "exec_flops_fp16"))
TENSOR_PREFIX = "exec_tensor_ops_"
DRAM_TOLERANCE = 0.05
# Families that stream every byte from device memory exactly once per launch (their cost model's
# bytes are DRAM bytes): family -> ops (None: any op), with the flops family's dram source.
DRAM_STREAMS = {"memory": ("copy", "mul", "add", "triad", "dot", "load_store")}
# Why executed flops cannot equal the cost model's, by what the benchmark is: the first that
# applies explains the difference (a difference nothing here explains is a finding).
REASONS = (
    (lambda a: a.get("family") == "builtins",
     "builtins count calls, not flops: a builtin is many instructions of the math library"),
    (lambda a: a.get("op") in ("mma", "wgmma"),
     "tensor cores: the ops-path counters count mma.sync, not wgmma (sm_90), nor int8/fp8 as flops"),
    (lambda a: a.get("scalar") in ("half", "bfloat"),
     "16-bit floats: a packed HFMA2/HADD2 is one instruction of the counter (2 of its 4 flops); "
     "bfloat may run on the fp32 pipe"),
    (lambda a: a.get("scalar") == "int" or a.get("type") == "int" or a.get("op") in ("dp4a", "divmod"),
     "integer work: exec_int_inst counts every integer instruction (address arithmetic too), "
     "not the model's operations"),
)


# The flops a benchmark's own arithmetic executes are those of its precision (axes scalar or
# type, its vector width stripped): a float benchmark is judged by exec_flops_fp32 alone.
PRECISIONS = {"float": "fp32", "double": "fp64", "half": "fp16", "bfloat": "fp16"}
# Flops counted in another precision than the benchmark's. The compiler (ptxas, sm_75 on) loads a
# 32-bit immediate into a register with "HFMA2.MMA Rd, -RZ, RZ, imm, imm" (a move issued on the
# otherwise idle FMA/MMA pipe), which the hfma counter counts as a half FMA: 2 "flops" per thread
# that runs one. On the H100 every float and int compute kernel shows exactly 2 per work-item
# (405504 = 2 x 202752 items of one 0.75-wave launch; 811008 at width 16: two moves) and
# flops/dram/float/flops:1 2 x 2^22 (one per work-item of 16 chains): no half arithmetic is in
# their source. So fp16 flops in a kernel of another precision are moves, reported, not compared.
# The same holds of a benchmark with no precision axis outside the families with half kernels
# (HALF_FAMILIES): byte and integer kernels (memory's row/col, cache rmw, constant chase) and
# float kernels named without a scalar (local read, memory stride_read, image, divergence paths)
# show 2 per work-item (local read 270336 = 2 x 135168 items, constant chase 2 x 270336, col_write
# at 4 bytes 2 x 2^26), 4 in stride_read, and cache rmw 2 a vector besides, in unrolled integer
# loops; their own fp32 flops equal the model's exactly.
HALF_FAMILIES = ("compute", "tensor", "builtins")
MOVES = ("fp16 flops in a kernel without half arithmetic: ptxas' HFMA2.MMA Rd, -RZ, RZ, imm moves of "
         "constants (2 per work-item that runs one), which the hfma counter counts as a half FMA")
# Work the kernel does that the cost model leaves out, exactly: (applies, extra flops, why). The
# dot's partial sums: each of its groups (bytes_written / sizeof(T) partials) reduces its DOT_WG
# = 256 work-items' sums in a shared-memory tree, DOT_WG - 1 adds, which bench/memory.cpp's model
# (2 flops per element) does not count; where the model counts them the row is simply exact.
DOT_WG = 256
SIZES = {"double": 8, "float": 4}


def _dot_extra(axes, cost):
    size = SIZES.get(axes.get("type"))
    written = ar.number(cost.get("bytes_written")) or 0.0
    return written / size * (DOT_WG - 1) if size else None


# image's CUDA read samples a point-filtered texture at the texel centre: px + 0.5f and py + 0.5f,
# 2 float adds a pixel read (bytes_read / 16 pixels) that are addressing, not the benchmark's
# work; OpenCL's read_imagef takes the integer coordinates. The H100: 102 = 4 x 16 + 6 + 2 x 16
# fp32 a work-item of 16 reads, the model's 4 x 16 + 6 and exactly these.
PIXEL_BYTES = 16


def _texel_centres(axes, cost):
    return 2 * (ar.number(cost.get("bytes_read")) or 0.0) / PIXEL_BYTES


EXTRA = (
    (lambda a: a.get("family") == "memory" and a.get("op") == "dot", _dot_extra,
     "the dot's tree reduction: (groups) x (DOT_WG - 1 = 255) adds of the partial sums in shared memory, "
     "which the model's 2 flops per element leave out"),
    (lambda a: a.get("family") == "image" and a.get("op") == "read" and a.get("backend") == "cuda", _texel_centres,
     "the CUDA image read's texel-centre coordinates: x + 0.5 and y + 0.5, 2 adds a pixel read "
     "(addressing of a point-filtered texture, not the benchmark's work)"),
)


def precision_of(axes):
    """The precision of a benchmark's own arithmetic (fp64/fp32/fp16, tensor for mma and wgmma), or
    None (integer work, or not a typed benchmark)."""
    if axes.get("op") in ("mma", "wgmma"):
        return "tensor"
    name = str(axes.get("scalar") or axes.get("type") or "").rstrip("0123456789")
    return PRECISIONS.get(name)


def is_traffic(key):
    return key.startswith("traffic_") or key.startswith("exec_")


# ---------------------------------------------------------------- arithmetic on one launch

def level_bytes(counters):
    """{level: bytes} for the levels whose counters were measured (a level the chip lacks, or
    that was not measured, is absent)."""
    out = {}
    for level, keys in LEVELS:
        have = [counters[k] for k in keys if k in counters]
        if have:
            out[level] = sum(have)
    return out


def flops_by_precision(counters):
    """{precision: executed flops} of the precisions measured (tensor: the tensor paths' ops)."""
    out = {p: counters[k] for p, k in FLOPS if k in counters}
    tensor = [v for k, v in counters.items() if k.startswith(TENSOR_PREFIX)]
    if tensor:
        out["tensor"] = sum(tensor)
    return out


def dominant(flops):
    """The precision that executed the most flops, or None when none executed any."""
    best = max(flops.items(), key=lambda kv: kv[1], default=(None, 0))
    return best[0] if best[1] > 0 else None


def placement(counters, seconds, precision=None):
    """One launch on the roofline: {precision, flops, flop_per_s, seconds, bytes: {level: B},
    ai: {level: FLOP/byte}}; ai only where both flops and bytes are non-zero. `precision` (a
    benchmark's own, precision_of) places it by those flops; without it, the precision that
    executed the most."""
    flops = flops_by_precision(counters)
    prec = precision if precision in flops else dominant(flops)
    total = flops.get(prec, 0.0) if prec else 0.0
    nbytes = level_bytes(counters)
    return {"precision": prec, "flops": total, "flops_by_precision": flops, "seconds": seconds,
            "flop_per_s": total / seconds if seconds else None, "bytes": nbytes,
            "byte_per_s": {lv: b / seconds for lv, b in nbytes.items()} if seconds else {},
            "ai": {lv: total / b for lv, b in nbytes.items() if b > 0 and total > 0}}


def bound(place, peaks, ceilings):
    """How far a launch sits below its roof: utilisation of each ceiling (flops over the peak of
    its precision, bytes per second over each level's bandwidth); the bound is the ceiling used the
    most, and attained / roof(AI) of the hierarchical roofline equals that utilisation. Returns
    (bound name, its utilisation, {ceiling: utilisation}), (None, None, {}) with nothing to judge."""
    use = {}
    prec = place["precision"]
    if prec and peaks.get(prec) and place["flop_per_s"] is not None:
        use[f"{prec} peak"] = place["flop_per_s"] / peaks[prec]
    for level, rate in place["byte_per_s"].items():
        if ceilings.get(level):
            use[level] = rate / ceilings[level]
    if not use:
        return None, None, {}
    name = max(use, key=use.get)
    return name, use[name], use


# ---------------------------------------------------------------- benchmark runs

def measured(paths):
    """Benchmarks with traffic counters: (context, [{name, axes, cost, counters, seconds}]). The
    counters come from the meter's one pass (the same on every repetition's row); seconds per
    launch is the median of the iteration rows' real_time (archbench's times are per launch)."""
    files = [f for p in paths for f in ar.result_files(p)]
    context, rows = {}, {}
    for file in files:
        ctx, entries = ar.read_results(file)
        for k, v in ctx.items():
            context.setdefault(k, v)
        for e in entries:
            if e.get("run_type", "iteration") != "iteration" or e.get("error_occurred"):
                continue
            counters = {k: ar.number(v) for k, v in e.items() if is_traffic(k) and ar.number(v) is not None}
            if not counters:
                continue
            row = rows.setdefault(ar.base_name(e), {"name": ar.base_name(e), "axes": e.get("axes", {}),
                                                    "cost": e.get("cost", {}), "counters": counters, "times": []})
            t = ar.entry_metrics(e).get("real_time")
            if t:
                row["times"].append(t * 1e-9)
    out = []
    for r in rows.values():
        r["seconds"] = statistics.median(r.pop("times")) if r["times"] else None
        out.append(r)
    return context, sorted(out, key=lambda r: r["name"])


def streams_from_dram(axes):
    ops = DRAM_STREAMS.get(axes.get("family"))
    if ops is not None and axes.get("op") in ops:
        return True
    return axes.get("family") == "flops" and axes.get("source") == "dram"


def reason_for(axes):
    return next((text for applies, text in REASONS if applies(axes)), None)


def agreement_row(r):
    """One benchmark's verdicts: flops (exact / explained / FINDING) and DRAM bytes (within 5% /
    FINDING / not claimed)."""
    c, cost, axes = r["counters"], r["cost"], r["axes"]
    flops = flops_by_precision(c)
    model_flops = ar.number(cost.get("flops")) or 0.0
    prec = precision_of(axes)
    # Judged by its own precision's flops; fp16 counted in a kernel of another precision are
    # the compiler's HFMA2 moves (MOVES), any other precision's flops stay in the comparison.
    # A benchmark with no precision outside HALF_FAMILIES has no half arithmetic either.
    no_half = prec in flops or (prec is None and axes.get("family") not in HALF_FAMILIES)
    other = {p: v for p, v in flops.items() if no_half and p != prec and p == "fp16" and v}
    exec_flops = sum(v for p, v in flops.items() if p not in other) if flops else None
    row = {"benchmark": r["name"], "precision": prec, "model_flops": model_flops, "exec_flops": exec_flops,
           "exec_by_precision": flops, "other_flops": sum(other.values()),
           "other_reason": MOVES if other else ""}
    extra = next(((f(axes, cost), why) for applies, f, why in EXTRA if applies(axes)), (None, ""))
    if exec_flops is None:
        row["flops_verdict"], row["flops_reason"] = "not measured", "no exec_flops_* counter on this chip"
    elif exec_flops == model_flops:
        row["flops_verdict"], row["flops_reason"] = "exact", ""
    elif extra[0] is not None and exec_flops == model_flops + extra[0]:
        row["flops_verdict"] = "explained"
        row["flops_reason"] = f"{extra[1]} ({extra[0]:.0f} flops, exactly the difference)"
    elif reason_for(axes):
        row["flops_verdict"], row["flops_reason"] = "explained", reason_for(axes)
    else:
        row["flops_verdict"] = "FINDING"
        row["flops_reason"] = f"executed {exec_flops:.6g} against the model's {model_flops:.6g} " \
                              f"({exec_flops / model_flops:.6g}x)" if model_flops else \
                              f"executed {exec_flops:.6g} where the model counts none"
    model_bytes = (ar.number(cost.get("bytes_read")) or 0.0) + (ar.number(cost.get("bytes_written")) or 0.0)
    dram = level_bytes(c).get("DRAM")
    row.update(model_bytes=model_bytes, dram_bytes=dram, dram_ratio=dram / model_bytes if dram is not None
               and model_bytes else None)
    if not streams_from_dram(axes):
        row["dram_verdict"] = "not claimed"
    elif dram is None:
        row["dram_verdict"] = "not measured"
    elif row["dram_ratio"] is not None and abs(row["dram_ratio"] - 1) <= DRAM_TOLERANCE:
        row["dram_verdict"] = "within 5%"
    else:
        row["dram_verdict"] = "FINDING"
    return row


def agreement(rows):
    """The table's rows and a summary {verdict: count} per column."""
    table = [agreement_row(r) for r in rows]
    summary = {col: {} for col in ("flops_verdict", "dram_verdict")}
    for t in table:
        for col in summary:
            summary[col][t[col]] = summary[col].get(t[col], 0) + 1
    return table, summary
