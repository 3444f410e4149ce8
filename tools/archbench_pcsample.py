#!/usr/bin/env python3
from archbench.commands.pcsample import main  # the command archbench-pcsample
raise SystemExit(main())
