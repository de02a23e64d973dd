"""Shared paths for the test suite, and the one process setting every test relies on."""

import signal
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

# The tests stop runs with SIGINT, as Ctrl-C does. A suite started in the background of
# a shell without job control (`make test &`) inherits SIGINT ignored, and every child
# would too, so a run would never see it: a handled SIGINT here is reset to the default
# in each child when it starts (seen: every interrupt-and-resume test failed that way).
signal.signal(signal.SIGINT, signal.default_int_handler)
