"""The layers hold: every import in dsl/, store/, flows/ and mcp_server/ is read with ``ast`` (inside functions and
under ``if TYPE_CHECKING:`` too: "not even for type hints") and checked against the rules of DESIGN.md.

- Upward imports: ``dsl`` imports nothing of ours; ``store`` only ``dsl.regex`` and ``dsl.errors``; ``flows`` not
  ``mcp_server``.
- flows/ is layered: the core (flows/core/ and the modules at flows/'s top), the shared parts (flows/media,
  flows/addresses) and one package per capability. The core and the shared parts import no capability; a capability
  imports another only when its declaration (``flows/<name>/capability.py``) names it in ``needs``, and names no
  capability it does not import. No cycle between these packages.
- No import inside a function, except of the heavy optional libraries of :data:`HEAVY` (each with a comment at the
  import saying why) and, for now, in the files of :data:`TEMPORARY` (being edited by others).
- What the declarations name exists (tool group and resource modules), once; the pool's worker modules reach no
  declaration (they register nothing and stay light).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from flows.core.capability import INSTALLED, Capability, installed

ROOT = Path(__file__).resolve().parents[1]
OURS = ("dsl", "store", "flows", "mcp_server")
SHARED = ("flows.core", "flows.media", "flows.addresses")  # the packages of flows/ below the capabilities

# Libraries a function may import: heavy (hundreds of ms, hundreds of MB) or optional, and needed by few calls.
# Each such import carries a comment saying why. A prefix holds for its submodules; a scope limits it to files.
HEAVY: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch": ("the embedding backend: seconds to import, loaded with the model", ()),
    "onnx": ("the ONNX export of the embedding model", ()),
    "onnxruntime": ("the ONNX embedding backend", ()),
    "openvino": ("the OpenVINO embedding backend", ()),
    "sentence_transformers": ("the embedding model's library (imports torch)", ()),
    "transformers": ("the tokenizer library of the embedding model", ()),
    "pymupdf": ("MuPDF: most of a second to import, only PDF work needs it", ()),
    "fitz": ("MuPDF's old name", ()),
    "pillow_heif": ("libheif: only a HEIC image needs it", ()),
    "docx": ("python-docx and lxml: only a Word document needs them", ()),
    "charset_normalizer": ("only a text file that is not UTF-8 needs the detector", ()),
    "uvicorn": ("only a server over HTTP needs it", ()),
    "prefect": ("imported once, under a lock, after the API it reports to is chosen", ("flows/core/prefect.py",)),
}

# TEMPORARY: files being edited by others while issue 21 rebuilds flows/ (their in-function imports are theirs to
# move); each goes from this list once its owner has moved them. Remove an entry, never add one.
TEMPORARY: dict[str, str] = {
}


@dataclass(frozen=True)
class Import:
    path: str  # the importing file, relative to the repository
    line: int
    source: str  # the importing module
    target: str  # the module imported (``from a import b``: ``a.b`` when that is a module, else ``a``)
    in_function: bool
    type_checking: bool
    comment: bool  # a comment on the import's last line

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.target}"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_of(p): p for top in OURS for p in sorted((ROOT / top).rglob("*.py"))}


def _resolve(module: str, name: str) -> str:
    candidate = f"{module}.{name}"
    return candidate if candidate in modules() else module


def _imports_of(path: Path) -> list[Import]:
    text = path.read_text()
    lines = text.splitlines()
    source = module_of(path)
    found: list[Import] = []

    def add(node: ast.stmt, target: str, in_function: bool, type_checking: bool) -> None:
        found.append(Import(path.relative_to(ROOT).as_posix(), node.lineno, source, target, in_function,
                            type_checking, "#" in lines[node.end_lineno - 1]))

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(child, alias.name, in_function, type_checking)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]
                    package = package[:len(package) - child.level + 1]
                    base = ".".join([*package, *([child.module] if child.module else [])])
                for alias in child.names:
                    add(child, _resolve(base, alias.name), in_function, type_checking)
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            checking = type_checking or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            visit(child, inner, checking)

    visit(ast.parse(text), False, False)
    return found


@cache
def imports() -> tuple[Import, ...]:
    return tuple(i for path in modules().values() for i in _imports_of(path))


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def ours(name: str) -> bool:
    return any(within(name, top) for top in OURS)


def unit(module: str) -> str | None:
    """The flows/ package ``module`` belongs to: a capability, a shared part, or the core (flows/core/ and the
    modules at flows/'s top: workers, env, prefect_server); None outside flows/."""
    if not within(module, "flows"):
        return None
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in INSTALLED:
        return f"flows.{parts[1]}"
    if len(parts) >= 2 and f"flows.{parts[1]}" in SHARED:
        return f"flows.{parts[1]}"
    return "flows.core"


def capability_name(module: str) -> str | None:
    u = unit(module)
    return u.split(".")[1] if u is not None and u not in SHARED else None


@cache
def declarations() -> dict[str, Capability]:
    return {c.name: c for c in installed()}


# --- the declarations -------------------------------------------------------------------------------------------


def test_every_package_of_flows_is_a_capability_declared_once_or_a_shared_part():
    packages = {p.name for p in (ROOT / "flows").iterdir() if (p / "__init__.py").exists()}
    assert packages == set(INSTALLED) | {s.split(".")[1] for s in SHARED}
    for name in INSTALLED:
        assert (ROOT / "flows" / name / "capability.py").exists(), name
        assert declarations()[name].name == name


REGISTERING = ("register_executor", "register_job_kind", "install_producer", "register_computed", "register_content",
               "register_field", "register_filler")


def test_only_the_core_registers_what_capabilities_declare():
    calls = []
    for module, path in modules().items():
        if within(module, "flows") and unit(module) != "flows.core" or within(module, "mcp_server"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    if name in REGISTERING:
                        calls.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not calls, "registered outside the core (declare it in the capability instead):\n" + "\n".join(calls)


def test_what_the_declarations_name_exists_once():
    groups = [g for c in declarations().values() for g in c.tool_groups]
    resources = [r for c in declarations().values() for r in c.resources]
    assert len(groups) == len(set(groups)) and len(resources) == len(set(resources))
    for group in groups:
        assert (ROOT / "mcp_server" / "tools" / f"{group.replace('-', '_')}.py").exists(), group
    for resource in resources:
        assert (ROOT / "mcp_server" / "resources" / f"{resource}.py").exists(), resource
    for capability in declarations().values():
        assert set(capability.needs) <= set(INSTALLED) - {capability.name}, capability.name


def test_the_servers_tool_groups_are_the_declared_ones_and_its_own():
    from mcp_server.tools import GROUP_MODULES, SERVER_GROUPS

    declared = [g for c in declarations().values() for g in c.tool_groups]
    assert list(GROUP_MODULES) == [*declared, *SERVER_GROUPS]
    assert not set(declared) & set(SERVER_GROUPS)


# --- the rules --------------------------------------------------------------------------------------------------


def _module_allowed(i: Import) -> bool:
    """Whether ``i`` goes down (or sideways within its layer), as the layers allow."""
    if within(i.source, "dsl"):
        return not ours(i.target) or within(i.target, "dsl")
    if within(i.source, "store"):
        return not ours(i.target) or within(i.target, "store") or i.target in ("dsl.regex", "dsl.errors")
    if within(i.source, "flows"):
        return not within(i.target, "mcp_server")
    return True


def test_no_layer_imports_upward():
    wrong = [str(i) for i in imports() if not _module_allowed(i)]
    assert not wrong, "upward imports (dsl <- store <- flows <- mcp_server; store may use dsl.regex, dsl.errors):\n" \
        + "\n".join(wrong)


def test_the_core_and_the_shared_parts_import_no_capability():
    wrong = [str(i) for i in imports() if unit(i.source) in SHARED and capability_name(i.target)]
    assert not wrong, "\n".join(wrong)


def test_the_content_cache_imports_nothing_of_ours():
    assert not [i for i in imports() if i.path == "store/cache.py" and ours(i.target) and not within(i.target,
                                                                                                        "store.cache")]


def _capability_edges() -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for i in imports():
        a, b = capability_name(i.source), capability_name(i.target)
        if a and b and a != b:
            edges[(a, b)].append(i)
    return edges


def test_a_capability_imports_another_only_when_it_declares_that_it_needs_it():
    edges = _capability_edges()
    undeclared = [f"{a} -> {b} (not in needs): " + ", ".join(map(str, found[:3]))
                  for (a, b), found in sorted(edges.items()) if b not in declarations()[a].needs]
    assert not undeclared, "\n".join(undeclared)


def test_a_capability_needs_no_capability_it_does_not_import():
    edges = _capability_edges()
    stale = [f"{c.name} needs {n} but imports nothing of it" for c in declarations().values() for n in c.needs
             if (c.name, n) not in edges]
    assert not stale, "\n".join(stale)


def test_no_cycle_between_the_packages_of_flows():
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], Import] = {}
    for i in imports():
        a, b = unit(i.source), unit(i.target)
        if a and b and a != b:
            graph[a].add(b)
            where.setdefault((a, b), i)
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = path[path.index(node):] + [node]
            raise AssertionError("import cycle: " + " -> ".join(cycle) + "\n" +
                                 "\n".join(str(where[(x, y)]) for x, y in zip(cycle, cycle[1:])))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def _temporary(path: str) -> bool:
    return any(path == t or (t.endswith("/") and path.startswith(t)) for t in TEMPORARY)


def _heavy(i: Import) -> bool:
    for prefix, (_, scope) in HEAVY.items():
        if within(i.target, prefix) and (not scope or i.path in scope):
            return True
    return False


def test_nothing_is_imported_inside_a_function_but_heavy_optional_libraries():
    late = [str(i) for i in imports() if i.in_function and not _heavy(i) and not _temporary(i.path)]
    assert not late, "imports inside functions (move them to the module's top; a cycle they dodge is fixed by " \
        "moving code to where it belongs, not hidden):\n" + "\n".join(late)


def test_every_late_import_of_a_heavy_library_says_why():
    silent = [str(i) for i in imports() if i.in_function and _heavy(i) and not i.comment and not _temporary(i.path)]
    assert not silent, "\n".join(silent)


def test_the_temporary_list_names_files_that_still_need_it():
    for entry in TEMPORARY:
        assert any(i.in_function and not _heavy(i) and (i.path == entry or (entry.endswith("/") and
                                                                          i.path.startswith(entry)))
                   for i in imports()), f"{entry} has no late import left: take it off TEMPORARY"


# --- the pool workers -------------------------------------------------------------------------------------------

WORKER_MODULES = ("flows.classify.worker", "flows.documents.extract_process")  # what a spawned worker imports


@pytest.mark.parametrize("module", WORKER_MODULES)
def test_a_pool_worker_reaches_no_declaration_registry_or_store_engine(module):
    graph: dict[str, set[str]] = defaultdict(set)
    for i in imports():
        if not i.in_function and not i.type_checking and ours(i.target):
            graph[i.source].add(i.target)
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        for parent in _packages_of(current):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
        for nxt in graph[current]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    reached = sorted(m for m in seen if m.endswith(".capability") or m in ("flows.core.capability", "store.engine"))
    assert not reached, f"{module} reaches {reached}"


def _packages_of(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]
