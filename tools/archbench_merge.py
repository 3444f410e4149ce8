#!/usr/bin/env python3
from archbench.commands.merge import main  # the command archbench-merge
raise SystemExit(main())
