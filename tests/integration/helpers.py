"""Running the real command, as a user would, from tests."""

import subprocess
import sys
from pathlib import Path


def tunnelbench(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
