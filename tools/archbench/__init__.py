"""archbench's tools, in layers that import downward only (tests/tools/test_layers.py checks it):
cli (layer 0: errors, exit codes, escaping, output), records (file formats and the schema), run
(running a program under an injection), analysis (pure functions), render (charts, HTML, tables),
commands (one module per command, each with main(argv=None) -> int). Run a command as
`archbench-COMMAND` (pip install ./tools), `python3 -m archbench COMMAND` with tools/ on
PYTHONPATH, or tools/archbench_COMMAND.py."""
