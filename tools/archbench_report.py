#!/usr/bin/env python3
from archbench.commands.report import main  # the command archbench-report
raise SystemExit(main())
