"""Schedule Explorer's headless engine (no Qt anywhere under this package)."""

__version__ = "0.1.0"
