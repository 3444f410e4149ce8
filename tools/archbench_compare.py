#!/usr/bin/env python3
from archbench.commands.compare import main  # the command archbench-compare
raise SystemExit(main())
