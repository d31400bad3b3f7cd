"""File operations: rename, move and delete on disk (``disk``) with the store kept in step (``operations``).
Declared in ``capability`` (the tool group file-operations)."""
