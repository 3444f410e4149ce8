#!/usr/bin/env python3
"""The cost model checked by the hardware: executed flops and DRAM bytes (archbench --traffic) against each benchmark's cost (archbench.traffic; also python3 -m archbench agreement)."""
import sys

from archbench.traffic import main

sys.exit(main())
