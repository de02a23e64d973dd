"""Pure functions on stored results: statistics and per-configuration summaries."""
