#!/usr/bin/env python3
"""Variability across the GPUs of a merged run (archbench --device=all, or the MPI launcher). (archbench.variability; also python3 -m archbench variability)."""
import sys

from archbench.variability import main

sys.exit(main())
