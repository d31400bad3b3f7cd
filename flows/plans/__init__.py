"""Plans: checking and running them (``engine``, as a Prefect flow in ``flow``), preview and explain (``preview``),
the plan service (``service``), continuous plans (``watch``), plan files in git (``files``), the store's side of
condition evaluation (``conditions``) and the outcomes ``selection_set`` and ``chained`` (``outcomes``)."""

from flows.plans import outcomes as _outcomes  # noqa: F401  (registers the executors)
