"""archbench's results tools: results (load, schema, pairing), stats, charts, compare, history,
roofline, merge, variability, peer, trace, topdown. Run one as `python3 -m archbench COMMAND ...`
with tools/ on PYTHONPATH, or as tools/archbench_COMMAND.py."""
