#!/usr/bin/env python3
from archbench.commands.search import main  # the command archbench-search
raise SystemExit(main())
