"""Shared paths for the test suite."""

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
