"""`assay cite ADDRESS`: a citation resolved into its file as the ``resolve`` tool does (flows/citations/service.py
``CitationService.resolve``): PDF pages, a clip, a crop, lines, verified against the source's content hash; ``-o``
copies the extracted file out of the content cache."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from flows.citations.service import CitationService
from mcp_server.cli.app import document_settings, open_app, reading_settings
from mcp_server.cli.common import OK, out, say
from mcp_server.cli.settings import settings_from
from store.errors import InvalidInput

EPILOG = """addresses (ID: a resource id, as `assay map` or the listResources tool shows it):
  doc://ID#pages=3-5   doc://ID#pages=1,3,7     pages, 1-based, inclusive: a new PDF
  video://ID#t=192-230 video://ID#t=03:12-03:40 seconds (or MM:SS, HH:MM:SS): a clip (stream copy; --exact
                                                 re-encodes for frame-accurate cuts)
  audio://ID#t=10-20                             a clip
  image://ID#bbox=0.2,0.2,0.8,0.8                x1,y1,x2,y2 as fractions of width and height: a crop
  text://ID#lines=10-20                          lines, 1-based, inclusive: a text file

examples:
  assay cite 'doc://annual_report_2023#pages=2-3' -o excerpt.pdf
  assay cite 'video://lecture#t=00:04-00:09' --json
  assay cite 'text://notes#lines=1-5' --virtual      # check the address against the file, extract nothing

Prints the canonical address, the source file, its content hash and the output file (the content cache's copy; -o
copies it to FILE). Exit status 0 when resolved, 2 on an error (the message on stderr: INVALID_ADDRESS, ...)."""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    cite = sub.add_parser("cite", help=summary,
                          description="Resolve ADDRESS against the files under the roots, verify it against the "
                                      "source (its content hash) and extract the part it names into the content "
                                      "cache.",
                          epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    cite.add_argument("address", help="doc://ID#pages=..., video://ID#t=..., audio://ID#t=..., "
                                      "image://ID#bbox=..., text://ID#lines=...")
    cite.add_argument("-o", "--output", metavar="FILE", help="copy the extracted file to FILE (replaced if it exists)")
    cite.add_argument("--virtual", action="store_true", help="only check and print the address; extract nothing")
    cite.add_argument("--exact", action="store_true", help="video/audio: re-encode for frame-accurate cuts")
    cite.add_argument("--allow-stale", action="store_true",
                      help="resolve although the file changed since an agent supplied its map")
    cite.add_argument("--json", action="store_true", help="print the whole answer as JSON (as the resolve tool)")
    common(cite)
    return cite


@contextlib.contextmanager
def citation_service(args: argparse.Namespace) -> Iterator[CitationService]:
    """The app's CitationService, as the citation tools use it (``AssayApp.citations()``), in the roots of a reading
    command (no --root: those the server's documents plan covers, else the home directory), for one command-line
    call; it reads and writes beside a running server."""
    settings = settings_from(args)
    document_settings()  # a bad ASSAY_DOCUMENTS_* value is an error here, with its message
    with open_app(reading_settings(settings)) as app:
        yield app.citations()


def run(args: argparse.Namespace) -> int:
    if args.output and args.virtual:
        raise InvalidInput("-o needs an extracted file; leave out --virtual", field="--output")
    with citation_service(args) as service:
        result = service.resolve(address=args.address, virtual=args.virtual, exact=args.exact,
                                 allow_stale=args.allow_stale)
    copied = copy_output(result["output_path"], args.output) if args.output and result.get("output_path") else None
    if args.json:
        out(json.dumps({**result, **({"copied_to": copied} if copied else {})}, indent=2))
    else:
        out(format_resolution(result, copied))
    if result.get("stale"):
        say("assay: the map this citation came from was made before the file changed (--allow-stale)")
    return OK


def copy_output(source: str, target: str) -> str:
    """Copy a resolved output to ``target`` through a temporary file beside it, renamed into place (never a
    half-written FILE); the temporary file is removed on any failure. Returns the absolute target."""
    target = os.path.abspath(os.path.expanduser(target))
    if os.path.isdir(target):
        raise InvalidInput(f"-o {target} is a directory; give a file name", field="--output")
    folder = os.path.dirname(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=".assay-cite-", dir=folder)
    except OSError as exc:
        raise InvalidInput(f"cannot write into {folder}: {exc.strerror or exc}", field="--output") from None
    try:
        with os.fdopen(fd, "wb") as copy, open(source, "rb") as src:
            shutil.copyfileobj(src, copy, 1 << 20)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


def format_resolution(result: dict[str, Any], copied: str | None = None) -> list[str]:
    """What `assay cite` prints: the canonical address, the source and its hash, the output file."""
    lines = [f"address  {result['address']}", f"source   {result['source_path']}", f"hash     {result['source_hash']}"]
    if result.get("output_path"):
        size = result.get("size_bytes")
        lines.append(f"output   {copied or result['output_path']}" + (f"  ({result.get('mime_type')}, {size:,} "
                                                                        "bytes)" if size is not None else ""))
    return lines
