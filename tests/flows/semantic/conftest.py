"""Fixtures of the semantic index's tests: a fake encoder (``fakes.FakeEncoder``) in place of the model, and the
real model once per session for the tests that need it."""

from __future__ import annotations

import pytest

from tests.flows.semantic.fakes import FakeEncoder


@pytest.fixture
def fake_encoder(monkeypatch) -> FakeEncoder:
    """Every ``flows.semantic.encoder.get_encoder(...)`` call of the test returns the FakeEncoder of the model asked
    for (one per model name, whatever the backend, so the fixture's value sees every text encoded with the default
    model; its ``model`` is the name asked for, so model mismatches are still seen)."""
    import flows.semantic.encoder as encoder_module

    fakes: dict[str, FakeEncoder] = {}

    def get_encoder(model=None, backend=None, device=None):
        key = model or "all-MiniLM-L6-v2"
        if key not in fakes:
            fakes[key] = FakeEncoder(model=key, backend=backend or "torch")
        return fakes[key]

    monkeypatch.setattr(encoder_module, "get_encoder", get_encoder, raising=False)
    return get_encoder()


@pytest.fixture(scope="session")
def real_encoder():
    """The packaged model, loaded once for the whole session (the encoder cache keeps it for later calls too)."""
    from flows.semantic.encoder import get_encoder

    return get_encoder()
