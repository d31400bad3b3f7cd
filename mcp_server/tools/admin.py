"""(being written: issue 23's admin tools)"""

from __future__ import annotations

from typing import Any


def register(tools: Any, app: Any) -> None:
    pass
