#!/usr/bin/env python3
"""Merge the results of several archbench runs (devices of a node, or MPI ranks) into one file. (archbench.merge; also python3 -m archbench merge)."""
import sys

from archbench.merge import main

sys.exit(main())
