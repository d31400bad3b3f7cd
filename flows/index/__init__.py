"""Indexing and watching: the walk (``indexer``), index jobs as Prefect flows (``flow``), the ``index`` operation
(``service``), watching trees (``watch``, ``watch_apply``), sources (``sources``), and navigation over the index.
Declared in ``capability`` (the index job kind, the tool groups indexing, navigation and sources)."""
