"""Citations (reference 003): resource maps built locally or supplied by agents, addresses, and resolution of an
address into a page range, clip, crop or line range.

A capability declared in ``flows.citations.capability``, shaped like ``flows.documents`` and ``flows.semantic``: the
``map`` outcome executor, the citations tool group and the maps resources. Modules:

- ``model``: the shapes of maps (ResourceMap, Node, Location, SourceFacts) and constants. An address itself
  (``Address``, ``doc://book#pages=3``) and the resource ids files are cited under are flows' shared address model
  (``flows.addresses``), which documents and the semantic index cite their hits with too.
- ``address``: the address grammar (``address.lark``), parsing and checking an address against its source.
- ``validate``: checking an agent-supplied node tree against its file (every problem named with its node).
- ``builders``: maps built locally: PDF outline, Markdown headings, line windows, video chapters / scene cuts /
  windows, audio chapters / silences / windows, the whole image.
- ``extract``: physical resolution into the content cache (``store.cache``): PDF pages, ffmpeg clips, Pillow crops,
  text lines.
- ``store.citations``: resources, maps and nodes in the store; ``maps``: rows to trees, facts, building and saving a
  map; ``resources``: the file an id names, ids reserved on first use; ``staleness``: a resource as its file is now;
  ``service``: the tools' logic.
- ``executor``: the ``map`` outcome.
"""
