"""Wiring: the index the ``[embeddings]`` settings describe (its worker runs as one of the app's
background services, ``noteloom.app``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from noteloom.chunks import ChunkSpec
from noteloom.embedders import DEFAULT_LOCAL_MODEL, Embedder, EmbedderFactory, local_model_available
from noteloom.errors import ConfigError
from noteloom.semantic.embed_service import RemoteEmbedder, ServiceEndpoint
from noteloom.semantic.index import DEFAULT_THRESHOLDS, SemanticIndex

log = logging.getLogger("noteloom.semantic")


def open_index(
    engine: Engine,
    config: Mapping[str, Any],
    factories: Mapping[str, EmbedderFactory],
    env: Mapping[str, str],
    *,
    endpoint: ServiceEndpoint | None = None,
) -> SemanticIndex | None:
    """The semantic index the ``[embeddings]`` settings describe, or ``None`` when it is off.

    With no ``[embeddings]`` table, it is on with the local all-MiniLM-L6-v2 model when the
    ``embeddings`` extra is installed and the database can hold vectors, and off otherwise
    (keyword search works either way). ``enabled = false`` turns it off. The kind of
    embedder is ``type``, or the prefix of ``model`` (``local:…``, ``openai:…``).

    With the ``endpoint`` of a shared embedding service (``serve --workers N`` hands its
    workers one, see :mod:`noteloom.semantic.embed_service`), the index embeds through it
    and this process never builds the embedder, nor loads its model.
    """
    if config.get("enabled", True) is False:
        return None
    explicit = bool(config)
    kind = _kind(config)
    if kind == "local" and not explicit and not local_model_available(DEFAULT_LOCAL_MODEL):
        return None
    factory = _factory(kind, factories)
    embedder: Embedder = RemoteEmbedder(endpoint) if endpoint is not None else factory(config, env)
    thresholds = config.get("thresholds", {})
    if not isinstance(thresholds, Mapping) or not all(
        k in DEFAULT_THRESHOLDS and isinstance(v, int | float) for k, v in thresholds.items()
    ):
        raise ConfigError("[embeddings.thresholds] takes numbers for strict, normal and loose (cosine similarity)")
    spec = ChunkSpec(
        max_chars=_setting(config, "chunk_chars", ChunkSpec.max_chars),
        overlap=_setting(config, "chunk_overlap", ChunkSpec.overlap),
    )
    index = SemanticIndex(engine, embedder, spec=spec, thresholds={k: float(v) for k, v in thresholds.items()})
    reason = index.unavailable_reason()
    if reason is not None:
        if not explicit:
            log.info("semantic search is off: %s", reason)
            return None
        raise ConfigError(f"[embeddings] is set, but {reason}")
    return index


def build_embedder(
    config: Mapping[str, Any], factories: Mapping[str, EmbedderFactory], env: Mapping[str, str]
) -> Embedder:
    """The embedder the ``[embeddings]`` settings describe (what a shared embedding service runs)."""
    return _factory(_kind(config), factories)(config, env)


def _kind(config: Mapping[str, Any]) -> str:
    kind = str(config.get("type") or "")
    model = str(config.get("model") or "")
    if not kind:
        kind = model.split(":", 1)[0] if ":" in model and not Path(model).is_absolute() else "local"
    return kind


def _factory(kind: str, factories: Mapping[str, EmbedderFactory]) -> EmbedderFactory:
    factory = factories.get(kind)
    if factory is None:
        known = ", ".join(sorted(factories)) or "none"
        raise ConfigError(f"[embeddings] names the embedder type {kind!r}, which no plugin provides (known: {known})")
    return factory


def _setting(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"[embeddings] {key} must be a whole number, not {value!r}")
    return value
