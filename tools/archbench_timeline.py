#!/usr/bin/env python3
from archbench.commands.timeline import main  # the command archbench-timeline
raise SystemExit(main())
