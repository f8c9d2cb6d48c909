"""Synthetic embeddings shaped like a model's: for tests of the vector copies and indexes."""

from __future__ import annotations

from typing import Any

import numpy as np


def _unit(v: Any) -> Any:
    v = v.astype(np.float32, copy=False)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def clustered(rng: np.random.Generator, n: int, dims: int, centres: int = 200, noise: float = 0.5) -> Any:
    """Unit vectors around a few hundred directions, as a model's embeddings of many
    notes on fewer subjects are (random vectors are all nearly orthogonal: no neighbours)."""
    base = _unit(rng.standard_normal((centres, dims)))
    spread = _unit(rng.standard_normal((n, dims)))
    return _unit(base[rng.integers(0, centres, n)] * (1 - noise) + spread * noise)


def queries_near(rng: np.random.Generator, vectors: Any, n: int, noise: float = 0.6) -> Any:
    """Queries about what the notes hold: each near one stored vector (cosine ~0.6)."""
    picked = vectors[rng.integers(0, len(vectors), n)]
    spread = _unit(rng.standard_normal((n, vectors.shape[1])))
    return _unit(picked * (1 - noise) + spread * noise)
