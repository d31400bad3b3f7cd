"""The registries the capabilities fill (flows/core/capability.py): each name once, whoever registers it, and filled
from the declarations once."""

from __future__ import annotations

import pytest

from flows.core.capability import Capability, Registry


def _things(capability: Capability) -> list[tuple[str, str]]:
    return [(group, f"{capability.name}:{group}") for group in capability.tool_groups]


def test_a_registry_holds_what_the_declarations_name_once() -> None:
    registry: Registry[str] = Registry("tool group", _things)
    a = Capability(name="a", summary="", tool_groups=("reading", "writing"))
    b = Capability(name="b", summary="", tool_groups=("running",))
    registry.fill([a, b])
    registry.fill([a, b])  # a second fill registers nothing again
    assert registry.all() == {"reading": "a:reading", "writing": "a:writing", "running": "b:running"}
    assert registry.get("running") == "b:running" and registry.get("missing") is None


def test_a_name_declared_twice_is_refused_naming_both() -> None:
    registry: Registry[str] = Registry("tool group", _things)
    with pytest.raises(ValueError, match=r"'reading' is already registered \(by capability 'a'\).*capability 'b'"):
        registry.fill([Capability(name="a", summary="", tool_groups=("reading",)),
                       Capability(name="b", summary="", tool_groups=("reading",))])


def test_a_check_refuses_a_thing_before_it_is_registered() -> None:
    def no_spaces(name: str, thing: str) -> None:
        if " " in name:
            raise ValueError(f"{name!r} has a space")

    registry: Registry[str] = Registry("tool group", _things, check=no_spaces)
    registry.add("fine", "x")
    with pytest.raises(ValueError, match="has a space"):
        registry.add("not fine", "y")
    assert "not fine" not in registry.entries
