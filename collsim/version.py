"""collsim's version, in a module of its own so that any module can read it without importing the facade.

>>> from collsim.version import __version__
>>> __version__.count(".")
2
"""
from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
