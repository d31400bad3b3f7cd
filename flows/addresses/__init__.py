"""The citation address model every capability cites with, outside any capability: what an address is and how it is
written (``model``: :class:`~flows.addresses.model.Address`, ``doc://report#pages=3``, and a search hit's address,
``hit_address``), and the readable resource ids files are cited under (``ids``: reserved once per file, stable).

Documents and the semantic index make the citations of their hits with it; citations (``flows.citations``) parses
addresses (its grammar), checks them against their sources and resolves them. Part of flows' shared layer: it
imports no capability.
"""
