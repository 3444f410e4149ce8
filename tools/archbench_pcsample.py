#!/usr/bin/env python3
"""Where any CUDA program's kernels stall, line by line: PC sampling, seed 003's kernel metrics (archbench.pcsample; also python3 -m archbench pcsample)."""
import sys

from archbench.pcsample import main

sys.exit(main())
