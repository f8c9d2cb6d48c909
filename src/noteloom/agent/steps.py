"""The visible text of a run: the text of its model calls, joined the same way whether
it is read at the end or watched as it streams (a blank line between two calls)."""

from __future__ import annotations

from collections.abc import Sequence

from noteloom.messages import Message

__all__ = ["STEP_BREAK", "StepJoiner", "visible_text"]

#: What separates the text of two model calls of one turn, in the final text and as it streams.
STEP_BREAK = "\n\n"


def visible_text(messages: Sequence[Message]) -> str:
    return STEP_BREAK.join(m.text for m in messages if m.role == "assistant" and m.text)


class StepJoiner:
    """Joins streamed text the way ``visible_text`` joins the final one: the first text of
    a model call after an earlier call wrote text is preceded by ``STEP_BREAK``.

    Feed it every agent event in order; ``text`` gives what to show for a text delta.
    """

    def __init__(self) -> None:
        self._wrote = False  # some earlier model call of this run wrote text
        self._step_wrote = False  # the current model call did

    def boundary(self) -> None:
        """An activity event: the current model call is over (a tool runs, or another call starts)."""
        self._wrote = self._wrote or self._step_wrote
        self._step_wrote = False

    def text(self, delta: str) -> str:
        if not delta:
            return delta
        head = STEP_BREAK if self._wrote and not self._step_wrote else ""
        self._step_wrote = True
        return head + delta
