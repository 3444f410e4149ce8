#!/usr/bin/env python3
from archbench.commands.roofline import main  # the command archbench-roofline
raise SystemExit(main())
