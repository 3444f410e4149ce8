#!/usr/bin/env python3
from archbench.commands.variability import main  # the command archbench-variability
raise SystemExit(main())
