"""Splits ``<think>…</think>`` reasoning out of streamed answer text.

Many OpenAI-compatible servers put a model's reasoning inline in the content. The
tags arrive cut anywhere (``"<thi"`` + ``"nk>"``), and templates that open the block
in the prompt make the model emit only the closing tag. ``ThinkSplitter`` is a small
state machine fed chunk by chunk; it holds back at most a partial tag.
"""

from __future__ import annotations

from typing import Literal

#: ``absorb`` (empty text) marks a closing tag that was never opened: everything before it was reasoning.
Kind = Literal["text", "thinking", "absorb"]
OPEN = "<think>"
CLOSE = "</think>"


class ThinkSplitter:
    """Feed content chunks; get back ``(kind, text)`` segments in order.

    ``start_inside`` is for models whose template opens the block in the prompt.
    Otherwise a closing tag that was never opened yields an ``absorb`` segment:
    every character before it was reasoning, including text already handed out,
    which the caller re-labels.
    """

    def __init__(self, *, start_inside: bool = False) -> None:
        self.inside = start_inside
        self.seen_open = start_inside
        self.orphan_close = False
        self._held = ""
        self._strip = True  # leading whitespace of the answer (and after a block) is noise

    def feed(self, chunk: str) -> list[tuple[Kind, str]]:
        out: list[tuple[Kind, str]] = []
        s = self._held + chunk
        self._held = ""
        while s:
            tags = (CLOSE,) if self.inside else (OPEN, CLOSE)
            at, tag = _first(s, tags)
            if tag is None:
                keep = _partial_suffix(s, tags)
                self._emit(out, s[: len(s) - keep])
                self._held = s[len(s) - keep :]
                break
            before, s = s[:at], s[at + len(tag) :]
            if tag == OPEN:
                self._emit(out, before)
                self.inside = self.seen_open = True
            elif self.inside:
                self._emit(out, before)
                self.inside = False
                self._strip = True
            elif not self.seen_open:
                if before:
                    out.append(("thinking", before))
                out.append(("absorb", ""))
                self.orphan_close = self.seen_open = True
                self._strip = True
            else:  # a stray closing tag after a finished block is just text
                self._emit(out, before + tag)
        return out

    def flush(self) -> list[tuple[Kind, str]]:
        """The held-back remainder, once the stream has ended."""
        out: list[tuple[Kind, str]] = []
        held, self._held = self._held, ""
        self._emit(out, held)
        return out

    def _emit(self, out: list[tuple[Kind, str]], text: str) -> None:
        if self.inside:
            if text:
                out.append(("thinking", text))
            return
        if self._strip:
            text = text.lstrip()
            if not text:
                return
            self._strip = False
        if text:
            out.append(("text", text))


def _first(s: str, tags: tuple[str, ...]) -> tuple[int, str | None]:
    best, found = len(s), None
    for tag in tags:
        i = s.find(tag)
        if i != -1 and i < best:
            best, found = i, tag
    return best, found


def _partial_suffix(s: str, tags: tuple[str, ...]) -> int:
    """How many trailing characters of ``s`` could start one of ``tags``."""
    keep = 0
    for tag in tags:
        for k in range(min(len(tag) - 1, len(s)), keep, -1):
            if s.endswith(tag[:k]):
                keep = k
                break
    return keep
