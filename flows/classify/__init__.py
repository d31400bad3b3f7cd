"""Classification: thumbnails, video timelines, metadata and content hashes (the ``classifier`` outcome).

The first capability built in its own subpackage, declared in ``flows.classify.capability``: the ``classifier``
outcome executor (``executor``), the condition fields it fills (``fields``: the "metadata" producer, so conditions
on ``width``, ``duration`` or ``exif.Model`` validate, and ``duplicates``), classify jobs (``service``) and the sweep
of its artifact cache at server start (``sweep``). The cache lives in ``<data dir>/cache``
(``flows.core.capability.data_dir``). The pool's worker processes import this package to run ``worker`` and
register nothing.
"""
