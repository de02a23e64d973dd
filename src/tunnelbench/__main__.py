"""Allows ``python -m tunnelbench``."""

from tunnelbench.cli import main

raise SystemExit(main())
