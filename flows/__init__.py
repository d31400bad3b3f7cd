"""Work that runs as Prefect flows and the plain functions behind it, in layers (DESIGN.md, "Layout").

The core (``flows/core/``): the capability declaration and the registries it fills (``capability``: outcome
executors in ``outcomes``, condition fields in ``conditions``, job kinds in ``runner``), the one job runner, the
Prefect wrapper (``prefect``, ``deployments``), roots (``roots``), settings; with it the modules at this level
(``workers``: the pools' shared parts, ``env``, ``prefect_server``). The shared parts: ``flows/media/`` (probing and
decoding media) and ``flows/addresses/`` (the citation address model). Then one subpackage per capability, each
declared once in its ``capability`` module and importing only the core, the shared parts, ``dsl``, ``store`` and the
capabilities it needs:

    flows/index/      walking, index jobs, watching, sources, navigation
    flows/plans/      compile, run, preview, watch plans; the selection_set and chained outcomes
    flows/fileops/    rename, move, delete
    flows/classify/   thumbnails, timelines, metadata, hashes
    flows/documents/  text extraction, the full-text index, OCR
    flows/semantic/   chunks, embeddings, hnswlib collections, labels
    flows/citations/  maps, addresses, resolution

tests/test_import_graph.py keeps the layers.
"""
