"""The examples: plans (``plans/``), the example corpus's generator (``generate_corpus.py``) and the generators of
generated media (``mediagen``) that the corpus, the tests and the benchmarks share. A package, so that ``tests/`` and
``bench/`` import ``examples.mediagen`` from a source checkout; not installed (pyproject packages only the product)."""
