#!/usr/bin/env python3
"""One self-contained HTML page of archbench results (archbench.report; also python3 -m archbench report)."""
import sys

from archbench.report import main

sys.exit(main())
