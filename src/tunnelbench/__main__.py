"""Allows ``python -m tunnelbench``."""

from tunnelbench.cli.main import main

raise SystemExit(main())
