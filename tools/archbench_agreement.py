#!/usr/bin/env python3
from archbench.commands.agreement import main  # the command archbench-agreement
raise SystemExit(main())
