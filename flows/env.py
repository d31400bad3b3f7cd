"""Settings read from the environment: on/off flags and numbers, each refused with a ValueError naming the variable
and what it accepts. Shared by the capabilities' settings (``flows.documents.settings``, ``flows.semantic.settings``);
an unset or blank variable gives the default.
"""

from __future__ import annotations

from typing import Mapping

TRUE = ("1", "on", "true", "yes")
FALSE = ("0", "off", "false", "no")


def read_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """``env[name]`` as on (1, on, true, yes) or off (0, off, false, no), any case; ``default`` when unset."""
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not on or off (accepted: {', '.join(TRUE + FALSE)})")


def read_number(env: Mapping[str, str], name: str, default: float, *, minimum: float = 0, integer: bool = False):
    """``env[name]`` as a number (a whole one when ``integer``) of at least ``minimum``; ``default`` when unset."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a {'whole ' if integer else ''}number") from None
    if value < minimum:
        raise ValueError(f"{name}={raw!r} is below the minimum {minimum:g}")
    return value
