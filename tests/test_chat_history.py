"""What a model is sent as history: settled exchanges after the last /clear, tool calls with
their results, and a byte cap that drops whole exchanges from the oldest."""

from __future__ import annotations

import base64

from noteloom.chat.history import NOT_RUN, cap_history, history_before, message_bytes, replayable
from noteloom.chat.records import ChatMessage
from noteloom.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from noteloom.providers.base import CHARS_PER_TOKEN, IMAGE_TOKENS


def _row(pos: int, role: str, content: str = "", status: str = "complete", transcript: tuple[Message, ...] = (),
         command: str | None = None) -> ChatMessage:
    return ChatMessage(
        id=f"{pos:032x}", conversation_id="c" * 32, position=pos, role=role,  # type: ignore[arg-type]
        content=content, status=status, created_time=pos, updated_time=pos,  # type: ignore[arg-type]
        transcript=transcript, command=command,
    )


def _call(cid: str) -> Message:
    return Message("assistant", (ToolCallPart(cid, "search_notes", {"query": "x"}),))


def _result(cid: str, text: str = "ok") -> Message:
    return Message("tool", (ToolResultPart(cid, text),))


def test_failed_turns_are_left_out_with_their_question_and_cancelled_ones_keep_their_text() -> None:
    rows = [
        _row(1, "user", "first"), _row(2, "assistant", "one", transcript=(Message.assistant("one"),)),
        _row(3, "user", "broken"), _row(4, "assistant", "", status="failed"),
        _row(5, "user", "stopped"), _row(6, "assistant", "half", status="cancelled"),
        _row(7, "note", "Tokens so far …", command="cost"),
        _row(8, "user", "now"),
    ]
    history = history_before(rows, 8)
    assert [(m.role, m.text) for m in history] == [
        ("user", "first"), ("assistant", "one"), ("user", "stopped"), ("assistant", "half"),
    ]


def test_history_starts_after_the_last_clear() -> None:
    rows = [
        _row(1, "user", "old"), _row(2, "assistant", "old answer"),
        _row(3, "note", "Context cleared", command="clear"),
        _row(4, "user", "new"), _row(5, "assistant", "new answer"),
        _row(6, "user", "current"),
    ]
    assert [m.text for m in history_before(rows, 6)] == ["new", "new answer"]


def test_a_tool_call_left_without_result_gets_one() -> None:
    fixed = replayable([Message.user("q"), _call("c1"), Message("assistant", ())])
    assert fixed[-1].role == "tool"
    assert fixed[-1].tool_results[0].call_id == "c1" and fixed[-1].tool_results[0].content == NOT_RUN
    assert all(m.parts for m in fixed)


def test_the_cap_drops_oldest_exchanges_but_keeps_the_system_message_and_the_last_exchange() -> None:
    big = "x" * 2000
    msgs = [Message.system("rules")]
    for i in range(5):
        msgs += [Message.user(f"q{i} {big}"), _call(f"c{i}"), _result(f"c{i}", big),
                 Message("assistant", (TextPart(f"a{i}"),))]
    capped = cap_history(msgs, 9000)
    assert capped[0].role == "system"
    assert sum(message_bytes(m) for m in capped) <= 9000
    users = [m.text.split()[0] for m in capped if m.role == "user"]
    assert users == ["q3", "q4"]
    calls = {c.id for m in capped for c in m.tool_calls}
    results = {r.call_id for m in capped for r in m.tool_results}
    assert calls == results  # never a call without its result, or the reverse


def test_the_newest_exchange_stays_even_when_it_alone_is_over_the_cap() -> None:
    msgs = [Message.user("old"), Message.assistant("a"), Message.user("y" * 5000)]
    assert cap_history(msgs, 1024) == [msgs[-1]]


def test_an_exchange_made_of_many_tool_rounds_is_dropped_whole() -> None:
    rounds = [Message.user("q0")]
    for i in range(3):
        rounds += [_call(f"r{i}"), _result(f"r{i}", "z" * 800)]
    msgs = [*rounds, Message.assistant("done"), Message.user("q1")]
    capped = cap_history(msgs, 1500)
    assert capped == [Message.user("q1")]


def test_a_file_weighs_what_a_model_is_charged_for_it_not_its_bytes() -> None:
    """An image counts as its token estimate in bytes of text, whether the history holds its
    bytes or only its ref (as a stored transcript does): a big photo neither evicts the whole
    conversation nor slips past the cap for free."""
    photo = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 3_000_000).decode()
    with_bytes = Message("user", (TextPart("Look"), ImagePart("image/png", photo, ref="a" * 32)))
    only_ref = Message("user", (TextPart("Look"), ImagePart("image/png", "", ref="a" * 32)))
    weight = IMAGE_TOKENS * CHARS_PER_TOKEN
    assert message_bytes(with_bytes) == message_bytes(only_ref) == message_bytes(Message.user("Look")) + len(
        ', {"kind": "image", "media_type": "image/png", "data": "", "ref": "' + "a" * 32 + '"}') + weight
    result = Message("tool", (ToolResultPart("c1", "the file", blocks=(ImagePart("image/png", photo, ref="b" * 32),)),))
    assert weight < message_bytes(result) < weight + 300
    # Three exchanges with a photo each: the cap keeps as many as their estimates allow.
    exchanges = [m for i in range(3) for m in (with_bytes, Message.assistant(f"Seen {i}"))]
    kept = cap_history(exchanges, 2 * weight + 600)
    assert kept == exchanges[2:]
