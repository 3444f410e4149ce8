#!/usr/bin/env python3
"""TopDown of any CUDA program, unchanged (seed 004): per kernel, time-weighted totals, and (archbench.topdown; also python3 -m archbench topdown)."""
import sys

from archbench.topdown import main

sys.exit(main())
