"""tunnelbench: how fast can this tunnel go, what holds it back, and which setting fixes it."""

__version__ = "0.1.0"
