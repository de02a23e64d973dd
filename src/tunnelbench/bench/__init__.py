"""The engine: plan files checked against the registries, what this machine can run,
the measurement lock, executing a plan trial by trial, progress and the store."""
