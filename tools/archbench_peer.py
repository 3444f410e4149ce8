#!/usr/bin/env python3
from archbench.commands.peer import main  # the command archbench-peer
raise SystemExit(main())
