"""Fixtures of the semantic index's tests: a fake encoder (``fakes.FakeEncoder``) in place of the model, and the
real model once per session for the tests that need it."""

from __future__ import annotations

import pytest

from tests.flows.semantic.fakes import FakeEncoder


@pytest.fixture
def fake_encoder(monkeypatch) -> FakeEncoder:
    """Every ``flows.semantic.encoder.get_encoder(...)`` call of the test returns one FakeEncoder (whatever model or
    backend is asked for; its ``model`` is the name asked for, so model mismatches are still seen)."""
    import flows.semantic.encoder as encoder_module

    fakes: dict[tuple, FakeEncoder] = {}

    def get_encoder(model=None, backend=None, device=None):
        key = (model or "all-MiniLM-L6-v2", backend or "torch")
        if key not in fakes:
            fakes[key] = FakeEncoder(model=key[0], backend=key[1])
        return fakes[key]

    monkeypatch.setattr(encoder_module, "get_encoder", get_encoder, raising=False)
    return get_encoder()


@pytest.fixture(scope="session")
def real_encoder():
    """The packaged model, loaded once for the whole session (the encoder cache keeps it for later calls too)."""
    from flows.semantic.encoder import get_encoder

    return get_encoder()
