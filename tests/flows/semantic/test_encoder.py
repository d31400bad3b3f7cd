"""flows.semantic.encoder: the packaged model (loaded once for the session), the per-process cache, the refusals
(unknown model, unusable backend, missing GPU) and the cached exports of the other backends."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import flows.semantic.encoder as enc
from flows.semantic.model import BACKENDS, DEFAULT_MODEL
from store.errors import DocumentError, InvalidInput


def test_vectors_are_float32_normalised_and_of_the_model_dimension(real_encoder):
    v = real_encoder.encode(["The cat sat on the mat.", "Interest rates rose again.", "x"])
    assert v.shape == (3, 384) and real_encoder.dim == 384 and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert real_encoder.encode([]).shape == (0, 384)


def test_the_same_text_gives_the_same_vector(real_encoder):
    a = real_encoder.encode(["A quiet morning by the lake."])[0]
    b = real_encoder.encode_query("A quiet morning by the lake.")
    assert b.shape == (384,)
    assert np.allclose(a, b, atol=1e-5)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(real_encoder):
    q = real_encoder.encode_query("How do I bake bread at home?")
    near, far = real_encoder.encode(["A recipe for making a loaf of bread in your kitchen oven.",
                                     "The central bank raised interest rates by half a point."])
    assert float(q @ near) > float(q @ far) + 0.2


def test_empty_and_very_long_queries_are_encoded(real_encoder):
    assert np.isfinite(real_encoder.encode_query("")).all()
    long = real_encoder.encode_query("word " * 2000)  # 10,000 characters: truncated by max_seq_length
    assert long.shape == (384,) and abs(float(np.linalg.norm(long)) - 1.0) < 1e-5


def test_the_encoder_is_loaded_once_per_process(real_encoder):
    assert enc.get_encoder() is real_encoder
    assert enc.get_encoder(DEFAULT_MODEL, real_encoder.backend, "cpu") is real_encoder
    assert real_encoder.model == DEFAULT_MODEL and real_encoder.backend in BACKENDS
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"  # never downloads


def test_concurrent_first_calls_load_once(monkeypatch):
    loads = []
    release = threading.Event()

    def fake_load(model, backend, device):
        loads.append((model, backend, device))
        release.wait(5)
        return object()

    monkeypatch.setattr(enc, "_cache", {})
    monkeypatch.setattr(enc, "load", fake_load)
    got = []
    threads = [threading.Thread(target=lambda: got.append(enc.get_encoder(backend="torch"))) for _ in range(6)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert len(loads) == 1 and len(got) == 6 and all(g is got[0] for g in got)


def test_an_unknown_model_is_refused_naming_the_accepted_values(tmp_path):
    with pytest.raises(InvalidInput, match=DEFAULT_MODEL) as e:
        enc.get_encoder("no-such-model")
    assert e.value.field == "model" and "directory" in e.value.message
    with pytest.raises(InvalidInput):
        enc.resolve_model(str(tmp_path))  # a directory without a model in it
    assert enc.resolve_model(DEFAULT_MODEL).endswith("model")
    assert enc.resolve_model(enc.resolve_model(DEFAULT_MODEL)) == enc.resolve_model(DEFAULT_MODEL)


def test_a_gpu_asked_for_and_absent_is_gpu_not_available(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for device in ("cuda", "cuda:0", "mps"):
        with pytest.raises(DocumentError) as e:
            enc.get_encoder(device=device)
        assert e.value.code == "GPU_NOT_AVAILABLE" and str(e.value).startswith("GPU_NOT_AVAILABLE")
    with pytest.raises(InvalidInput, match="cpu, cuda or mps"):
        enc.get_encoder(device="tpu")


def test_an_unknown_or_unusable_backend_is_refused_saying_why_and_what_works(monkeypatch):
    with pytest.raises(InvalidInput, match="onnx-int8") as e:
        enc.get_encoder(backend="tensorrt")
    assert e.value.field == "backend"
    real = enc.backend_problem
    monkeypatch.setattr(enc, "backend_problem",
                        lambda b: "ImportError: No module named 'openvino'" if b == "openvino" else real(b))
    with pytest.raises(InvalidInput) as e:
        enc.get_encoder(backend="openvino")
    assert "No module named 'openvino'" in e.value.message and "torch" in e.value.message


def test_the_default_backend_comes_from_the_settings_else_the_measured_default(monkeypatch):
    monkeypatch.delenv("ASSAY_EMBED_BACKEND", raising=False)
    assert enc.check_backend(None) == enc.DEFAULT_BACKEND
    monkeypatch.setenv("ASSAY_EMBED_BACKEND", "torch")
    assert enc.check_backend(None) == "torch"


def test_a_failed_export_leaves_no_cache_and_a_built_one_is_reused(monkeypatch, tmp_path):
    monkeypatch.delenv("ASSAY_MODEL_CACHE", raising=False)
    monkeypatch.setattr("flows.core.capability._data_dir", tmp_path)
    target = enc.cache_dir_for(DEFAULT_MODEL, "onnx")
    assert target.parent == tmp_path / "models"

    def failing(tmp):
        (tmp / "model.onnx").write_bytes(b"half")
        raise RuntimeError("export broke")

    with pytest.raises(RuntimeError):
        enc._build_atomically(target, failing)
    assert list((tmp_path / "models").iterdir()) == []  # neither the target nor a temporary directory

    builds = []
    monkeypatch.setattr(enc, "_export_onnx", lambda st, out: (builds.append(out), out.write_bytes(b"onnx")))
    assert enc.exported_file(DEFAULT_MODEL, "onnx", st=None) == target / "model.onnx"
    assert enc.exported_file(DEFAULT_MODEL, "onnx", st=None) == target / "model.onnx"
    assert len(builds) == 1 and (target / "model.onnx").read_bytes() == b"onnx"
    other = enc.cache_dir_for(str(tmp_path / "a" / "model"), "onnx")
    assert other.name.startswith("model-") and other != enc.cache_dir_for(str(tmp_path / "b" / "model"), "onnx")


def test_the_onnx_export_gives_the_vectors_of_torch(monkeypatch, tmp_path):
    if enc.backend_problem("onnx"):
        pytest.skip(f"onnx cannot run here: {enc.backend_problem('onnx')}")
    torch_encoder = enc.get_encoder(backend="torch")
    monkeypatch.setenv("ASSAY_MODEL_CACHE", str(tmp_path / "models"))  # a fresh cache: the export is built here
    onnx = enc.load(DEFAULT_MODEL, "onnx", "cpu")
    assert (tmp_path / "models" / f"{DEFAULT_MODEL}-onnx" / "model.onnx").is_file()
    got, expected = onnx.encode(TEXTS, batch_size=2), torch_encoder.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.min(np.sum(got * expected, axis=1)) > 0.9999


TEXTS = ["Photosynthesis turns light into chemical energy.", "short", "a longer sentence " * 40]


def test_the_default_backend_gives_the_vectors_of_torch(real_encoder):
    expected = enc.get_encoder(backend="torch").encode(TEXTS)
    assert np.min(np.sum(real_encoder.encode(TEXTS) * expected, axis=1)) > 0.999  # OpenVINO may run in bf16


def test_a_default_backend_that_cannot_run_falls_back_to_torch_but_a_named_one_is_refused(monkeypatch):
    monkeypatch.delenv("ASSAY_EMBED_BACKEND", raising=False)
    monkeypatch.setattr(enc, "DEFAULT_BACKEND", "openvino")
    monkeypatch.setattr(enc, "backend_problem", lambda b: None if b == "torch" else "ImportError: missing")
    assert enc.check_backend(None) == "torch"
    monkeypatch.setenv("ASSAY_EMBED_BACKEND", "openvino")
    with pytest.raises(InvalidInput, match="missing"):
        enc.check_backend(None)


def test_an_export_finished_first_by_another_process_is_kept(monkeypatch, tmp_path):
    target = tmp_path / "models" / "m-onnx"

    def build(tmp):
        (tmp / "model.onnx").write_bytes(b"ours")
        target.mkdir(parents=True)  # meanwhile another process renamed its finished export into place
        (target / "model.onnx").write_bytes(b"theirs")

    enc._build_atomically(target, build, "model.onnx")
    assert (target / "model.onnx").read_bytes() == b"theirs"
    assert [p.name for p in target.parent.iterdir()] == ["m-onnx"]  # our temporary directory is gone
