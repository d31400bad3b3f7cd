"""Condition fields the classifier fills (hash, duplicates, metadata keys): registered with the field registries."""
