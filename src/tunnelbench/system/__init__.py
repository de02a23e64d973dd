"""This machine's plumbing: running commands, finding programs, file ownership and the
measurement lock."""
