"""The plan language (models, grammar, parsers). Filled by the plans issue."""
