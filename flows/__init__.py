"""Work that runs as Prefect flows and the plain functions behind it, one subpackage per capability:

    flows/index/     walking, index jobs, watching, sources, navigation
    flows/plans/     compile, run, preview, watch plans; the selection_set and chained outcomes
    flows/fileops/   rename, move, delete

Shared seams: ``flows.outcomes`` (the outcome registry), ``flows.capabilities`` (what is installed), ``flows.runner``
(jobs), ``flows.roots`` (path confinement), ``flows.prefect_support``. Classification, documents, the semantic index
and citations come as flows/classify/, flows/documents/, flows/semantic/ and flows/citations/, the same shape.
"""
