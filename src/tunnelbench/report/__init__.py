"""Renderers of stored runs. They read the store; they never measure."""
