"""Chunks fit the model's window, and cutting a very long note stays linear in its length."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from noteloom import chunks as chunking
from noteloom.chunks import Chunk, ChunkSpec, chunk_note
from test_chunks import covered

NOTE = "n" * 32


class CountingTokens:
    """A tokenizer stand-in: one token per CJK character, one per word otherwise; it
    records how many characters it was asked to count."""

    def __init__(self) -> None:
        self.calls = 0
        self.chars = 0

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls += 1
        self.chars += sum(len(t) for t in texts)
        return [self.count(t) for t in texts]

    @staticmethod
    def count(text: str) -> int:
        dense = sum(1 for ch in text if "\u3040" <= ch <= "\u9fff")
        return dense + len(text.split()) + 2


def test_dense_text_is_cut_until_every_chunk_fits_the_models_window() -> None:
    body = "# 東京\n\n" + "東京の電車は朝早くから混んでいます。" * 200 + "\n\nAnd a short English line."
    counter = CountingTokens()
    spec = ChunkSpec(max_tokens=128)
    plain = chunk_note(NOTE, "旅行", body)
    fitted = chunk_note(NOTE, "旅行", body, spec, counter)
    assert max(CountingTokens.count(c.text) for c in plain) > 128, "the test needs chunks that do not fit"
    assert all(CountingTokens.count(c.text) <= 128 for c in fitted)
    assert covered(fitted, body)
    assert [c.ordinal for c in fitted] == list(range(len(fitted)))
    assert all(c.text.startswith("旅行 > 東京") for c in fitted)


def test_text_that_fits_is_cut_exactly_as_without_a_counter() -> None:
    body = "# Garden\n\n" + "Water the basil every morning. " * 80 + "\n\n## Tomatoes\n\nThey need sun."
    counter = CountingTokens()
    assert chunk_note(NOTE, "Garden", body, ChunkSpec(max_tokens=256), counter) == chunk_note(NOTE, "Garden", body)
    assert counter.calls == 1, "every chunk is counted in one call"


def test_the_token_window_is_part_of_the_chunking_key() -> None:
    assert ChunkSpec().key != ChunkSpec(max_tokens=256).key
    with pytest.raises(ValueError, match="max_tokens"):
        ChunkSpec(max_tokens=8)


class _ScanCounter:
    """Wraps a boundary pattern, adding up the characters its searches scan."""

    def __init__(self, inner: Any, tally: list[int]) -> None:
        self.inner = inner
        self.tally = tally

    def finditer(self, text: str, pos: int, endpos: int) -> Any:
        self.tally[0] += endpos - pos
        return self.inner.finditer(text, pos, endpos)


def _work(body: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, list[Chunk]]:
    tally = [0]
    monkeypatch.setattr(chunking, "_BOUNDARIES", tuple(_ScanCounter(p, tally) for p in chunking._BOUNDARIES))
    counter = CountingTokens()
    out = chunk_note(NOTE, "Log", body, ChunkSpec(max_tokens=256), counter)
    return tally[0], counter.chars, out


@pytest.mark.parametrize("dense", [False, True])
def test_a_very_long_note_is_chunked_in_linear_work(monkeypatch: pytest.MonkeyPatch, dense: bool) -> None:
    line = "東京の電車は朝早くから混んでいます。\n" if dense else "The backup ran at night and copied every file. "
    small = "# Log\n\n" + line * (50_000 // len(line))
    large = "# Log\n\n" + line * (200_000 // len(line))
    scan_small, counted_small, chunks_small = _work(small, monkeypatch)
    scan_large, counted_large, chunks_large = _work(large, monkeypatch)
    assert covered(chunks_large, large)
    # Four times the text: about four times the chunks, the scanning and the counting.
    ratio = len(large) / len(small)
    assert len(chunks_large) <= ratio * len(chunks_small) * 1.1
    assert scan_large <= ratio * scan_small * 1.1
    assert counted_large <= ratio * counted_small * 1.1
    # Counted a few times at most, however long.
    assert counted_large <= 5 * len(large)
