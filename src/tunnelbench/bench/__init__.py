"""The engine: what this machine can run, executing a plan trial by trial, progress, the store."""
