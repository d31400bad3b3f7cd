"""flows' shared layer stands under the capabilities: media probing (flows/media), the citation address model
(flows/addresses) and settings from the environment (flows/env.py) import no capability, the content cache
(store/cache.py) imports nothing of ours at all, and documents and the semantic index cite without importing the
citations capability. Every import counts, inside functions too (a late import must not hide an edge)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = ("flows.index", "flows.plans", "flows.fileops", "flows.classify", "flows.documents", "flows.semantic",
                "flows.citations")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in its text (``from a.b import c`` counts as ``a.b`` and ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def files(*parts: str) -> list[Path]:
    found = []
    for part in parts:
        path = ROOT / part
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


@pytest.mark.parametrize("path", files("flows/media", "flows/addresses", "flows/env.py"), ids=shown)
def test_the_shared_layer_imports_no_capability(path):
    assert not {m for m in imported(path) if within(m, CAPABILITIES + ("mcp_server",))}


def test_the_content_cache_imports_nothing_of_ours():
    assert not {m for m in imported(ROOT / "store/cache.py") if within(m, ("flows", "mcp_server", "dsl"))}


@pytest.mark.parametrize("path", files("flows/documents", "flows/semantic"), ids=shown)
def test_documents_and_semantic_cite_without_the_citations_capability(path):
    assert not {m for m in imported(path) if within(m, ("flows.citations",))}
