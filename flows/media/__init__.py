"""Probing and decoding media, shared by the classifier (``flows.classify``: thumbnails, timelines, metadata, hashes)
and citations (``flows.citations``: facts of a source, page ranges, clips, crops).

``common`` (MediaError, running ffmpeg/ffprobe, fitting and encoding images), ``images`` (Pillow, EXIF, HEIC),
``pdf`` (PyMuPDF), ``video`` (ffprobe / ffmpeg), ``text`` (encodings and counts), ``hashing`` (the content hash).
Part of flows' shared layer: it imports no capability.
"""
