#!/usr/bin/env python3
from archbench.commands.history import main  # the command archbench-history
raise SystemExit(main())
