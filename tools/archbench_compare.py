#!/usr/bin/env python3
"""Compare two sets of archbench (Google Benchmark JSON) results and flag regressions. (archbench.compare; also python3 -m archbench compare)."""
import sys

from archbench.compare import main

sys.exit(main())
