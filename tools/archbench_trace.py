#!/usr/bin/env python3
"""Trace an unmodified OpenCL or CUDA program, then say where its host and device waited on each other. (archbench.trace; also python3 -m archbench trace)."""
import sys

from archbench.trace import main

sys.exit(main())
