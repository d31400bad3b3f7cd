"""Semantic index: chunks, embeddings and hnswlib collections, hybrid search, zero-shot labels (reference 002).

A capability declared in ``flows.semantic.capability``, shaped like ``flows.documents``: the ``embed`` and ``label``
outcome executors and the ``similarity`` and ``label`` condition fields. Text comes from the documents capability
(an entry not extracted yet is extracted first). Modules:

- ``chunking``: sentence/word-boundary chunks with offsets, pages and line ranges.
- ``encoder``: the sentence-transformers model, loaded once per process (backends torch / ONNX / OpenVINO).
- ``store.semantic``: collections, chunks, vectors and labels in the store, written in short batches.
- ``vectors``: one hnswlib index per collection beside the database, atomic, rebuilt from stored vectors.
- ``executor``: the ``embed`` outcome; ``service``: index_files / update_index as plan executions.
- ``search``: semantic, keyword (BM25 over chunks) and hybrid (reciprocal-rank fusion) search with filters.
- ``labels`` and ``conditions``: the ``label`` outcome and the ``label`` / ``similarity`` condition fields.
"""
