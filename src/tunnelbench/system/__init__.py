"""This machine's plumbing: running commands, finding programs, file ownership."""
