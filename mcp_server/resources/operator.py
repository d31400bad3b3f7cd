"""(being written: issue 23's operator resources)"""

from __future__ import annotations

from typing import Any


def register(mcp: Any, app: Any) -> None:
    pass
