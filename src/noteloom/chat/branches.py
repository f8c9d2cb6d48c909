"""Branches of a conversation: pure functions over its stored messages.

Each message names the one it follows (``parent_id``; ``None`` for a first message), so a
conversation's messages form a tree. Messages of the same role with the same parent are
branches of one another: regenerating an answer adds an answer to the same question, and
editing a question adds a question after the same message. The conversation shows one
path, from a first message down to its ``leaf_id``; that path is also the history a new
turn sends to the model. Positions only grow, so a path is in position order too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from noteloom.chat.records import ChatMessage


class Linked(Protocol):
    """What the tree needs of a message (a ``ChatMessage``, or just its ids: ``Node``)."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def position(self) -> int: ...


@dataclass(frozen=True)
class Node:
    """A message's place in the tree, read without its content."""

    id: str
    parent_id: str | None
    position: int


M = TypeVar("M", bound=Linked)


def path_to(rows: Sequence[M], leaf_id: str | None) -> list[M]:
    """The messages from the first one down to ``leaf_id`` (``None`` or unknown: the last
    message by position), in order."""
    by_id = {r.id: r for r in rows}
    leaf = by_id.get(leaf_id) if leaf_id else None
    if leaf is None:
        if not rows:
            return []
        leaf = max(rows, key=lambda r: r.position)
    out: list[M] = []
    seen: set[str] = set()
    node: M | None = leaf
    while node is not None and node.id not in seen:
        seen.add(node.id)
        out.append(node)
        node = by_id.get(node.parent_id) if node.parent_id else None
    out.reverse()
    return out


def siblings(rows: Sequence[ChatMessage], message: ChatMessage) -> list[ChatMessage]:
    """``message`` and its branches (same parent, same role), oldest first."""
    return sorted((r for r in rows if r.parent_id == message.parent_id and r.role == message.role),
                  key=lambda r: r.position)


def deepest(rows: Sequence[Linked], message_id: str) -> str:
    """The last message of the path through ``message_id``: from it, the newest child each step."""
    children: dict[str, list[Linked]] = {}
    for r in rows:
        if r.parent_id is not None:
            children.setdefault(r.parent_id, []).append(r)
    node, seen = message_id, {message_id}
    while children.get(node):
        nxt = max(children[node], key=lambda r: r.position).id
        if nxt in seen:
            break
        seen.add(nxt)
        node = nxt
    return node


def branch_info(rows: Sequence[ChatMessage], message: ChatMessage) -> dict[str, object] | None:
    """Which of its branches ``message`` is (``index`` from 1, ``count``, the ``ids`` in
    order), or ``None`` when it has none."""
    sibs = siblings(rows, message)
    if len(sibs) < 2:
        return None
    ids = [s.id for s in sibs]
    return {"index": ids.index(message.id) + 1, "count": len(ids), "ids": ids}
