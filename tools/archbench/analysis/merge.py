"""Merging the results of several runs (devices of a node, or MPI ranks) into one document: every
benchmark entry gets its run's tags, the context lists every run, failed ones with their status
and output tail (a run that failed is reported, never fatal)."""

import os

from ..records import results as ar


def merge(runs):
    """One results document from runs [{status, json, tail, tags}]; a run whose JSON is missing
    or malformed counts as failed (its reason kept) and the others are merged."""
    context, benchmarks, listed = None, [], []
    for run in runs:
        record = dict(run["tags"], status=run["status"])
        try:
            # Google Benchmark creates the file before it runs anything: empty means no results.
            written = run["json"] and os.path.exists(run["json"]) and os.path.getsize(run["json"]) > 0
            ctx, entries = ar.read_results(run["json"]) if written else (None, None)
        except ar.InputError as e:
            ctx, entries = None, None
            record["error"] = str(e)
        if ctx is not None:
            record.setdefault("host", ctx.get("host", ""))
            record.setdefault("device", ctx.get("device", ""))
            record.setdefault("device_selector", ctx.get("device_selector", ""))
            record["context"] = ctx
            if context is None:
                context = dict(ctx)
            for entry in entries:
                tagged = dict(entry)
                tagged.update({k: v for k, v in record.items() if k not in ("status", "context", "error")})
                benchmarks.append(tagged)
        if run["status"] != 0 or ctx is None:
            record["failed"] = True
            record["output_tail"] = run["tail"]
            if ctx is None and "error" not in record:
                record["error"] = "no results file: the run failed before writing it"
        listed.append(record)
    context = context or {}
    context["merged_runs"] = len(listed)
    context["failed_runs"] = sum(1 for r in listed if r.get("failed"))
    context["runs"] = listed
    return {"context": context, "benchmarks": benchmarks}
