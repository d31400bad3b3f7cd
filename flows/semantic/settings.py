"""The semantic index's settings, from the environment (the README's settings table lists them).

==============================  ==========  ========================================================================
ASSAY_EMBED_MODEL               all-MiniLM-L6-v2  the sentence-transformers model: the packaged one by name, or a path
ASSAY_EMBED_BACKEND             openvino    torch | onnx | onnx-int8 | openvino (default: flows.semantic.encoder.DEFAULT_BACKEND,
                                            the fastest within 1% of torch's quality: bench/semantic_backends.py)
ASSAY_EMBED_BATCH               64          chunks per encode call (the benchmark's best batch size)
ASSAY_EMBED_DEVICE              cpu         cpu, or cuda / mps (GPU_NOT_AVAILABLE when asked for and absent)
ASSAY_SEARCH_EF                 128         hnswlib ef at query time (recall vs speed)
ASSAY_EMBED_THREADS             (cores)     threads the model runs on (torch / onnxruntime / OpenVINO); default
                                            OMP_NUM_THREADS if set, else every core (embedding is the heavy part)
==============================  ==========  ========================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from flows.env import read_number
from flows.semantic.model import BACKENDS, DEFAULT_MODEL


@dataclass(frozen=True)
class SemanticSettings:
    model: str = DEFAULT_MODEL
    backend: str | None = None  # None: the measured default (flows.semantic.encoder.DEFAULT_BACKEND)
    batch_size: int = 64
    device: str = "cpu"
    search_ef: int = 128
    threads: int = 0  # 0: OMP_NUM_THREADS if set, else os.cpu_count() (flows.semantic.encoder.threads)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "SemanticSettings":
        """The settings in ``env`` (default: os.environ); ValueError naming the variable for a bad value."""
        env = os.environ if env is None else env
        backend = env.get("ASSAY_EMBED_BACKEND", "").strip().lower() or None
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"ASSAY_EMBED_BACKEND={backend!r} is not a backend (accepted: {', '.join(BACKENDS)})")
        return cls(
            model=env.get("ASSAY_EMBED_MODEL", "").strip() or cls.model,
            backend=backend,
            batch_size=read_number(env, "ASSAY_EMBED_BATCH", cls.batch_size, minimum=1, integer=True),
            device=env.get("ASSAY_EMBED_DEVICE", "").strip().lower() or cls.device,
            search_ef=read_number(env, "ASSAY_SEARCH_EF", cls.search_ef, minimum=10, integer=True),
            threads=read_number(env, "ASSAY_EMBED_THREADS", cls.threads, minimum=0, integer=True),
        )


def current() -> SemanticSettings:
    """The settings of this process, read from the environment each call (cheap; tests change the environment)."""
    return SemanticSettings.from_env()
