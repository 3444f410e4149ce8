#!/usr/bin/env python3
from archbench.commands.trace import main  # the command archbench-trace
raise SystemExit(main())
