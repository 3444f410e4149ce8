"""TopDown's text: the per-kernel table and what the profiling covered."""


def coverage(kernels, context):
    """What share of the GPU time the profiled kernels hold, the kernels left unprofiled by the
    overhead budget, and where profiling's time went."""
    total = sum(k["gpu_time_s"] for k in kernels)
    missing = [k for k in kernels if not k["profiled"]]
    lines = [f"profiled kernels: {len(kernels) - len(missing)} of {len(kernels)}, "
             f"{100 * (1 - sum(k['gpu_time_s'] for k in missing) / total) if total else 0:.1f}% of the GPU time"]
    if context.get("over_budget"):
        lines.append(f"{context['over_budget']} launches ran natively over the overhead budget (--budget "
                     f"{context['budget']:g}: replays at most {context['budget']:g}x the program's own time); "
                     f"{len(missing)} kernels have no profiled launch; --budget 0 profiles them all, and "
                     "--timeline gives every kernel's retire, divergence and stall in one pass, without replay")
    if context.get("memory_refused"):
        lines.append(f"{context['memory_refused']} of them because each replay would save and restore the device "
                     "memory in use (a framework's preallocation, as JAX's): --timeline measures them without replay")
    cost = context.get("cost_s")
    if cost:
        lines.append("profiling's time: " + ", ".join(f"{k} {v:.2f} s" for k, v in cost.items()))
    if context.get("prepare_s", -1) >= 0:
        enable = context.get("enable_ahead_s", -1)
        lines.append(f"CUPTI's host set-up made ahead on the library's threads beside the program: "
                     f"{context['prepare_s']:.2f} s" + (f", its enable on the first context {enable:.2f} s" if enable >= 0
                                                       else f" (enable on the first context: "
                                                            f"{context.get('enable_ahead') or 'not done'})") +
                     f"; the first profiled launch waited {context.get('prepare_wait_s', 0):.2f} s for them "
                     "(in set-up above)")
    return "\n".join(lines)


def short(name, width=48):
    """`name` in at most `width` characters: its head and tail kept, where two kernels differ most
    often (a template's last argument, a library kernel's tile suffix)."""
    if len(name) <= width:
        return name
    head = (width - 3) * 3 // 5
    return name[:head] + "..." + name[len(name) - (width - 3 - head):]


def table(rows, cols, first="kernel"):
    head = f"{first:<48} {'launches':>8} {'time %':>7} " + " ".join(f"{c[:11]:>11}" for c in cols)
    lines = [head, "-" * len(head)]
    for r in rows:
        vals = " ".join(f"{r[c]:>11.3f}" if isinstance(r.get(c), float) else f"{'-':>11}" for c in cols)
        lines.append(f"{short(str(r[first])):<48} {r['launches']:>8} {100 * r['time_share']:>6.1f}% {vals}")
    return "\n".join(lines)
