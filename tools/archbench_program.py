#!/usr/bin/env python3
from archbench.commands.program import main  # the command archbench-program
raise SystemExit(main())
