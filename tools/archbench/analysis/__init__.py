"""Layer 3, analysis: pure functions over loaded records (statistics, verdicts, models). No argparse,
no subprocess, no HTML or SVG. Imports only layers 0-2."""
