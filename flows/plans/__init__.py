"""Plans: checking them (``checks``), running them as a Prefect flow (``flow``: ``selection``, ``stages``,
``execution``), preview and explain (``preview``), the plan service (``service``), continuous plans (``watch``),
plan files in git (``files``, ``file_edits``, ``dsl_edits``) and the outcomes ``selection_set`` and ``chained``
(``outcomes``). Declared in ``capability``; conditions are evaluated through the core's store side
(``flows.core.conditions``)."""
