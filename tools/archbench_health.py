#!/usr/bin/env python3
from archbench.commands.health import main  # the command archbench-health
raise SystemExit(main())
