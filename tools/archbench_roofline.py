#!/usr/bin/env python3
"""Roofline models of one device from archbench results (reads JSON, never re-measures). (archbench.roofline; also python3 -m archbench roofline)."""
import sys

from archbench.roofline import main

sys.exit(main())
