"""Classification: thumbnails, video timelines, metadata and content hashes (the ``classifier`` outcome)."""
