"""Samplers that run during a trial's measured window: per-core CPU and process CPU."""
