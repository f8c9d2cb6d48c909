"""Inverted lists over the vectors' in-memory copy: the nearest chunks of a large index
without scoring every vector.

Past ``IVF_MIN`` chunks, the copy of the SQLite vectors (:mod:`noteloom.vectors`) is a faiss
``IndexIVFScalarQuantizer``: the unit vectors are grouped around ``nlist`` centres (k-means
on a sample of them), each kept as one byte a dimension (392 bytes a chunk with its id at
384 dimensions), and a query scores only the groups of its ``nprobe`` nearest centres.
Measured at 100,000 notes (631,537 chunks, the real model's queries over synthetic vectors,
a loaded 2-core machine): 3-6 ms of CPU a query with 1,024 groups and 64 probed, and 93% of
the exact top 20 kept, where the sign-bit shortlist it replaces took 15 ms and kept 62%
(those vectors sit in near ties: 256 directions plus noise). An HNSW graph (usearch 2.26,
int8) kept 64-70% and took 56 s of CPU to build per 100,000 chunks.

A search within a filter probes every group, scoring only the allowed chunks: exact, as
the smaller copies are, up to the one-byte codes (scores within ~0.005 of the cosine).
"""

from __future__ import annotations

import math
from typing import Any

#: The fewest chunks for which the copy is kept as inverted lists (below, the sign-bit
#: shortlist and int8 rescoring of noteloom.vectors cost a few ms at most).
IVF_MIN = 100_000
#: Training vectors per group (faiss asks for 39 at least).
TRAIN_PER_LIST = 40


def available() -> bool:
    """Whether faiss can be imported (the ``embeddings`` extra installs it)."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def lists_for(n: int) -> int:
    """How many groups for ``n`` vectors: about the square root, a power of two."""
    return int(min(16_384, max(64, 2 ** round(math.log2(max(1.0, math.sqrt(n)))))))


class InvertedLists:
    """Unit vectors (with their chunk ids) grouped around centres trained on ``sample``."""

    def __init__(self, dims: int, nlist: int, sample: Any) -> None:
        import faiss
        import numpy as np

        # One thread: a query is one small scan, and OpenMP workers spin on the shared CPU.
        faiss.omp_set_num_threads(1)
        self.dims = dims
        self.nlist = nlist
        self.nprobe = max(16, nlist // 16)
        self._quantizer = faiss.IndexFlatIP(dims)  # held here: the index does not own it
        self.index = faiss.IndexIVFScalarQuantizer(
            self._quantizer, dims, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        # Each dimension's range is the sample's, widened by a tenth on either side: a
        # value past it is clipped, which costs far more than the coarser step.
        self.index.sq.rangestat = faiss.ScalarQuantizer.RS_minmax
        self.index.sq.rangestat_arg = 0.1
        self.index.train(np.ascontiguousarray(sample, dtype=np.float32))
        self.ids = np.zeros(0, dtype=np.int64)  # the ids held, in the order added
        self.n = 0

    def add(self, ids: Any, unit: Any) -> None:
        """Add rows: ids not held yet, and their unit vectors."""
        import numpy as np

        if not len(ids):
            return
        self.index.add_with_ids(np.ascontiguousarray(unit, dtype=np.float32), np.ascontiguousarray(ids, dtype=np.int64))
        if self.n + len(ids) > len(self.ids):
            grown = np.zeros(max(self.n + len(ids), len(self.ids) * 3 // 2), dtype=np.int64)
            grown[: self.n] = self.ids[: self.n]
            self.ids = grown
        self.ids[self.n : self.n + len(ids)] = ids
        self.n += len(ids)

    def keep(self, live: Any) -> None:
        """Drop the rows whose ids are not in ``live``."""
        import faiss
        import numpy as np

        held = self.ids[: self.n]
        mask = np.isin(held, live)
        gone = held[~mask]
        if len(gone):
            self.index.remove_ids(faiss.IDSelectorBatch(np.ascontiguousarray(gone, dtype=np.int64)))
            self.ids = held[mask].copy()
            self.n = len(self.ids)

    def nearest(self, q: Any, k: int, allowed: Any = None) -> list[tuple[int, float]]:
        """Up to ``k`` (chunk id, score) nearest the unit vector ``q``, best first (equal
        scores: the older chunk first); only ids in ``allowed``, when given, all groups probed."""
        import faiss
        import numpy as np

        params = faiss.SearchParametersIVF()
        params.nprobe = self.nprobe
        if allowed is not None:
            selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
            params.sel = selector
            params.nprobe = self.nlist
        k = max(1, min(k, self.n))
        scores, ids = self.index.search(np.ascontiguousarray(q[None, :], dtype=np.float32), k, params=params)
        found = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        found.sort(key=lambda x: (-x[1], x[0]))
        return found
