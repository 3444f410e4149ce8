"""Kernel names a person can read: the function without its template arguments, parameter list and
return type, disambiguated where two different kernels would read the same.

C++ kernels are demangled to names of up to thousands of characters (a PyTorch elementwise kernel
carries its whole functor type). Tables show `short_names(...)[full]`; JSON keeps the full name.
Names with no template or parameter list (Triton's `triton_poi_fused_add_0`, XLA's
`loop_add_fusion`, C kernels) are left as they are.
"""
import re

_ANON = "(anonymous namespace)"
_OPERATOR = re.compile(r"operator\s*(\(\)|\[\]|->\*?|<<=?|>>=?|<=>|[-+*/%^&|~!=<>,]=?|&&|\|\||\+\+|--|new|delete)")
_TOKEN = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\d+")
# Words that tell no two kernels apart: qualifiers, and what every lambda or namespace says.
_PLAIN = {"const", "volatile", "unsigned", "signed", "long", "short", "lambda", "anonymous", "namespace", "struct",
          "class", "true", "false", "void", "operator"}


def _outside(name):
    """(the name's text outside every <...> and (...), the text of its first <...>): the
    anonymous namespace and operator names (operator(), operator<) are not brackets."""
    out, args, depth, i, start = [], None, 0, 0, 0
    while i < len(name):
        if name.startswith(_ANON, i):
            if depth == 0:
                out.append("\x00")
            i += len(_ANON)
            continue
        m = _OPERATOR.match(name, i) if name.startswith("operator", i) else None
        if m:
            if depth == 0:
                out.append(m.group(0))
            i = m.end()
            continue
        ch = name[i]
        if ch in "<(":
            if depth == 0 and ch == "<" and args is None:
                start = i + 1
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
            if depth == 0 and ch == ">" and args is None:
                args = name[start:i]
        elif depth == 0:
            out.append(ch)
        i += 1
    return "".join(out), args or ""


def short_name(name):
    """The function of one demangled kernel name, without templates, parameters or return type."""
    if not isinstance(name, str) or not name:
        return name
    # "void ns::kernel" -> "ns::kernel": the return type is what stands before the last space.
    short = _outside(name)[0].strip().rpartition(" ")[2]
    return short.replace("\x00", _ANON) or name


def _tokens(text):
    """The words of `text` that can tell kernels apart: each qualified name's last part, numbers last."""
    words = [t.rpartition("::")[2] for t in _TOKEN.findall(text.replace(_ANON, " "))]
    words = [w for w in words if w not in _PLAIN]
    return [w for w in words if not w.isdigit()] + [w for w in words if w.isdigit()]


def short_names(names):
    """{full name: short name} for every name, where no two different full names share a short one:
    a collision adds the first word of the kernel's template arguments (else of its whole name) that
    the others sharing its short name lack (`at::native::elementwise_kernel [CUDAFunctor_add]`), and
    where none does, `#2`, `#3` in the order given."""
    names = list(dict.fromkeys(n for n in names if isinstance(n, str)))
    groups = {}
    for n in names:
        groups.setdefault(short_name(n), []).append(n)
    out, used = {}, set()
    for short, group in groups.items():
        for k, n in enumerate(group):
            hint = None
            for part in (lambda x: _outside(x)[1], lambda x: x):  # template arguments first, then all
                others = [set(_tokens(part(m))) for m in group if m != n]
                hint = next((w for w in _tokens(part(n)) if others and all(w not in o for o in others)), None)
                if hint:
                    break
            label = short if len(group) == 1 else f"{short} [{hint}]" if hint else f"{short} #{k + 1}"
            while label in used:  # a hint that reads as another kernel's label
                label += "'"
            used.add(label)
            out[n] = label
    return out


def relabel_with(rows, labels, key="name"):
    return [dict(r, **{key: labels.get(r.get(key), r.get(key))}) for r in rows]


def relabel(rows, key, full=False):
    """Copies of `rows` (dicts) with row[key] the short name (short_names over every row's), or the
    rows themselves with full=True (--full-names)."""
    if full:
        return rows
    return relabel_with(rows, short_names(r.get(key) for r in rows), key)


def relabel_runs(res, full=False):
    """A copy of a timeline analysis whose kernels and invocations carry short names (one label a
    kernel in both), for the tables and the chart; `res` itself is what JSON gets."""
    if full:
        return res
    labels = short_names([k.get("kernel") for k in res.get("kernels", [])] +
                         [r.get("kernel") for r in res.get("invocations", [])])
    return dict(res, **{part: relabel_with(res.get(part, []), labels, "kernel") for part in ("kernels", "invocations")})


def relabel_trace(summary, full=False):
    """A copy of a trace summary whose kernel names (kernels, the work CPU_IDLE waited for, the
    detectors' kernels) are short names, one label a kernel throughout; the summary itself is what
    JSON gets."""
    if full:
        return summary
    parts = (summary["kernels"], summary["cpu_idle"]["by_work"], summary["detectors"]["kernel_params_not_aliased"])
    labels = short_names(r.get("name") for rows in parts for r in rows)
    return dict(summary, kernels=relabel_with(summary["kernels"], labels),
                cpu_idle=dict(summary["cpu_idle"], by_work=relabel_with(summary["cpu_idle"]["by_work"], labels)),
                detectors=dict(summary["detectors"], kernel_params_not_aliased=relabel_with(
                    summary["detectors"]["kernel_params_not_aliased"], labels)))
