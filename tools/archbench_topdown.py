#!/usr/bin/env python3
from archbench.commands.topdown import main  # the command archbench-topdown
raise SystemExit(main())
