"""Shared by the semantic tests: the real local model, loaded once per test process."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from noteloom.embedders import LocalEmbedder


@functools.cache
def local_model() -> LocalEmbedder:
    """all-MiniLM-L6-v2 from the installed package, offline; loaded on first use only."""
    embedder = LocalEmbedder()
    embedder.load()
    return embedder


def wait_for(check: Callable[[], bool], timeout: float = 20.0, every: float = 0.05) -> None:
    """Poll ``check`` until it holds; fail after ``timeout`` seconds (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(every)


#: Four notes on unrelated subjects, for checks that an embedder ranks them as MiniLM does.
SENTENCES = [
    "Water basil every morning so it does not wilt.",
    "The train to Porto leaves at nine from platform four.",
    "Back up the database to the external disk every Sunday.",
    "Knead the dough for ten minutes, then let it rise for an hour.",
]
