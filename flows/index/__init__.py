"""Indexing and watching: the walk (``indexer``), index jobs as Prefect flows (``flow``), the ``index`` operation
(``service``), watching trees (``watch``, ``watch_apply``), sources (``sources``), and navigation over the index."""
