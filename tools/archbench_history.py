#!/usr/bin/env python3
"""Headline archbench figures of one device across driver/runtime versions. (archbench.history; also python3 -m archbench history)."""
import sys

from archbench.history import main

sys.exit(main())
