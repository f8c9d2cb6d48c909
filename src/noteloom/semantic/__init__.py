"""The semantic index: note chunks as vectors, kept current from the change feed.

Every write to a note appends to ``note_changes`` in its own transaction. The
index follows that feed with a cursor stored in the database (``semantic_index``),
so it survives restarts and sees changes made by any process. When the index is
first built, or rebuilt for another model, it also walks every note once (the
*back-fill*, with its own stored position); fresh edits go first, so an edited
note is findable within about a second even during a long back-fill.

For each changed note it re-chunks the body (``noteloom.chunks``), embeds only the
chunks whose content hash is new, keeps the vectors of the others, and removes the
chunks of notes that were trashed or purged. All of one note's changes are
written in one transaction; the cursor moves in the same transaction, so a
crash repeats a little work and loses none.

``SemanticIndex.running()`` is the background worker: an async context manager
(``App.background`` enters it) that owns one task, loads the model off the
request path, and on exit stops at the next batch boundary without committing
half a batch. ``SemanticIndex.sync()`` does the same work in the foreground
(``noteloom index``).

Modules: ``index`` (the index and its worker), ``hybrid`` (keyword and semantic
search fused), ``wiring`` (settings to index).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noteloom.semantic.hybrid import (
        HybridResult,
        Mode,
        NoteHit,
        fuse,
        hybrid_search,
        query_shape,
    )
    from noteloom.semantic.index import (
        DEFAULT_THRESHOLDS,
        ChunkHit,
        IndexStatus,
        Relevance,
        SemanticIndex,
        SemanticResult,
        snippet_of,
    )
    from noteloom.semantic.wiring import open_index

#: Where each name lives: the package imports a module when one of its names is first
#: used, so that opening a workspace does not import hybrid ranking and the query
#: parser (start-up of the command line).
_HOMES = {
    "hybrid": ("HybridResult", "Mode", "NoteHit", "fuse", "hybrid_search", "query_shape"),
    "index": ("DEFAULT_THRESHOLDS", "ChunkHit", "IndexStatus", "Relevance", "SemanticIndex", "SemanticResult",
              "snippet_of"),
    "wiring": ("open_index",),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_THRESHOLDS",
    "ChunkHit",
    "HybridResult",
    "IndexStatus",
    "Mode",
    "NoteHit",
    "Relevance",
    "SemanticIndex",
    "SemanticResult",
    "fuse",
    "hybrid_search",
    "open_index",
    "query_shape",
    "snippet_of",
]
