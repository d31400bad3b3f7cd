"""Paths as the document tools show and take them (reference 001): relative to the root that holds them.

With one root a path is relative to it (``games/coop/Gloomhaven.pdf``; ``""`` is the root). With several roots
the first component names the root (its directory name, made unique with ``-2``, ``-3``, ... in the order the roots
were given): ``books/games/coop/Gloomhaven.pdf``, and ``""`` is the top that holds the roots. Absolute paths inside
a root are accepted too.

Confinement is checked on the path as written and on what it leads to: ``..`` that leaves the roots, or an absolute
path outside them, is PATH_TRAVERSAL_DETECTED; a symbolic link on the way below a root is SYMLINK_NOT_ALLOWED
unless the server allows symlinks, and then its target must lie inside a root too. Links above a root (a home
directory that is a link) are followed: they only spell the root differently.
"""

from __future__ import annotations

import os
import posixpath

from flows.core.roots import Roots
from store.errors import DocumentError

TOP = ""  # with several roots: the virtual top that holds them (resolve("") returns it)


def _inside(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


def _root_names(roots: tuple[str, ...]) -> dict[str, str]:
    """name -> root: each root's directory name, made unique with -2, -3, ... in the roots' order."""
    names: dict[str, str] = {}
    for root in roots:
        base = posixpath.basename(root.rstrip("/")) or "root"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names[name] = root
    return names


class DocumentPaths:
    """The document tools' view of the roots: ``display`` turns an absolute path into the form tools show,
    ``resolve`` turns what a caller gave into an absolute path, confined to the roots."""

    def __init__(self, roots: Roots, allow_symlinks: bool = False) -> None:
        self.roots = roots
        self.allow_symlinks = allow_symlinks
        self.names = _root_names(roots.paths)  # name -> root
        self._name_of = {root: name for name, root in self.names.items()}
        # most specific first, so a root nested in another one shows its files under its own name
        self._by_depth = sorted(roots.paths, key=len, reverse=True)

    @property
    def several(self) -> bool:
        return len(self.roots.paths) > 1

    def root_of(self, abs_path: str) -> str | None:
        """The (most specific) root holding ``abs_path``, None when it is outside every root."""
        return next((root for root in self._by_depth if _inside(abs_path, root)), None)

    def display(self, abs_path: str) -> str:
        """``abs_path`` as the tools show it: relative to its root, the root's name first when there are several
        roots; ``""`` for the root itself (one root). A path outside every root is returned unchanged."""
        if abs_path == TOP and self.several:
            return TOP
        root = self.root_of(abs_path)
        if root is None:
            return abs_path
        rel = "" if abs_path == root else posixpath.relpath(abs_path, root)
        if not self.several:
            return rel
        name = self._name_of[root]
        return f"{name}/{rel}" if rel else name

    def collection_of(self, abs_path: str) -> str:
        """The shown path of the collection (folder) holding ``abs_path``."""
        if self.several and abs_path in self.roots.paths:
            return TOP
        return self.display(posixpath.dirname(abs_path))

    def resolve(self, path: str, *, field: str = "path", not_found: str = "DOCUMENT_NOT_FOUND") -> str:
        """The canonical absolute path ``path`` names (its shown form, or an absolute path inside a root);
        ``""`` names the root, or :data:`TOP` (the top holding them) with several roots.

        DocumentError PATH_TRAVERSAL_DETECTED when it leaves the roots, SYMLINK_NOT_ALLOWED when a symlink lies
        on the way and symlinks are not allowed, ``not_found`` (DOCUMENT_NOT_FOUND, COLLECTION_NOT_FOUND,
        SCOPE_NOT_FOUND) when its first component names no root (several roots). Whether the path exists is the
        caller's question."""
        details = {"path": path}
        if not isinstance(path, str) or "\x00" in path:
            raise DocumentError("PATH_TRAVERSAL_DETECTED", f"{field} {path!r} is not a usable path",
                                field=field, details=details)
        raw = path.strip()
        if raw.startswith("/"):
            lexical = posixpath.normpath(raw)
            if lexical.startswith("//"):
                lexical = "/" + lexical.lstrip("/")
        else:
            rel = posixpath.normpath(raw) if raw else "."
            if rel == ".." or rel.startswith("../"):
                raise DocumentError("PATH_TRAVERSAL_DETECTED",
                                    f"{field} {path!r} leads out of the document roots; give a path inside them, "
                                    f"relative to {self._describe()}", field=field, details=details)
            if rel == ".":
                return TOP if self.several else self.roots.paths[0]
            if self.several:
                first, _, rest = rel.partition("/")
                root = self.names.get(first)
                if root is None:
                    raise DocumentError(not_found,
                                        f"{field} {path!r}: {first!r} is not one of the roots; with several roots "
                                        f"a path starts with a root's name: {', '.join(self.names)}",
                                        field=field, details=details)
                lexical = posixpath.join(root, rest) if rest else root
            else:
                lexical = posixpath.join(self.roots.paths[0], rel)
        return self._confine(lexical, path, field)

    def _describe(self) -> str:
        if self.several:
            return "the roots, first component naming the root (" + ", ".join(self.names) + ")"
        return "the root " + self.roots.paths[0]

    def _inside_any(self, path: str) -> bool:
        return any(_inside(path, root) for root in self.roots.paths)

    def _confine(self, lexical: str, given: str, field: str) -> str:
        """Walk ``lexical`` component by component: links above the roots are followed freely, links below a root
        are refused (or followed and checked, when allowed)."""
        details = {"path": given}
        current = "/"
        for part in [p for p in lexical.split("/") if p]:
            step = posixpath.join(current, part)
            if self._inside_any(current):
                if os.path.islink(step):
                    if not self.allow_symlinks:
                        raise DocumentError("SYMLINK_NOT_ALLOWED",
                                            f"{field} {given!r} goes through the symbolic link "
                                            f"{self.display(step)!r}; this server does not follow symlinks "
                                            "(ASSAY_ALLOW_SYMLINKS=on allows them inside the roots)",
                                            field=field, details=details)
                    step = os.path.realpath(step)
                    if not self._inside_any(step):
                        raise DocumentError("PATH_TRAVERSAL_DETECTED",
                                            f"{field} {given!r} goes through a symbolic link to {step}, outside "
                                            f"the document roots ({', '.join(self.roots.paths)})",
                                            field=field, details=details)
            else:
                step = os.path.realpath(step)
            current = step
        if not self._inside_any(current):
            raise DocumentError("PATH_TRAVERSAL_DETECTED",
                                f"{field} {given!r} is outside the document roots; give a path relative to "
                                f"{self._describe()}, or an absolute path inside them", field=field,
                                details=details)
        return current
