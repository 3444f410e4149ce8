#!/usr/bin/env python3
"""The peer family's results as matrices: rows the source GPU, columns the destination. (archbench.peer; also python3 -m archbench peer)."""
import sys

from archbench.peer import main

sys.exit(main())
