"""Documents: text extraction, a full-text index over it, and reference 001's document tools.

A capability declared in ``flows.documents.capability``, shaped like ``flows.classify``: the ``extract_text``
outcome executor (``executor``), the ``text`` condition field (``conditions``), and the plan that ships with it,
"documents" (``service.ensure_builtin_plan``, its ``start_plans`` hook): every document under the roots extracted and
indexed in the background and kept current, listed by plan-list like any other plan so a user can see, pause or
change it. The extraction pool's worker processes import this package to run ``extract`` and register nothing.
"""
