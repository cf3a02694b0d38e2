"""The `pgrag` command as tests run it: this interpreter, this checkout."""

from __future__ import annotations

import sys


def pgrag_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pgrag", *args]
