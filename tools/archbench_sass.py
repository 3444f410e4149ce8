#!/usr/bin/env python3
from archbench.commands.sass import main  # the command archbench-sass
raise SystemExit(main())
