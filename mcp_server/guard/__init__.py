"""The guarded server (reference 004, issue 23): who calls (tokens of local users or an identity provider's JWTs), what
each caller may see and do (permissions per tool group, roots), how often (per-user rate limits), and the record of
it all (the audit database)."""
