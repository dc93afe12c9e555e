"""``python -m collsim``: the ``collsim`` command, for an environment whose scripts are not on ``PATH``."""
from __future__ import annotations

from collsim.cli import console

__all__: list[str] = []

if __name__ == "__main__":
    console()
