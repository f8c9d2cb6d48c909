"""Chat turns across restarts: a turn whose server died reads interrupted on the first read
of the next server, a turn of a live server is left running whoever starts, and a turn
approved after a restart goes on where it stopped, numbered on from its last event."""

from __future__ import annotations

import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa

from chat_support import collect, running_chat
from livesrv import served_url
from noteloom.app import App, open_app
from noteloom.chat import ChatService
from noteloom.chat import tables as t
from noteloom.config import load_settings
from noteloom.runs import tables as rt

TIMEOUT = 60.0  # a safety net only: every wait below ends on an event


def _home(tmp_path: Path, steps: Sequence[dict[str, Any]], *, name: str = "home") -> Path:
    """A workspace whose ``play`` model plays ``steps``; only a turn's owner settles it early
    (a heartbeat silent for ten minutes, far longer than any test, is the other way)."""
    home = tmp_path / name
    home.mkdir()
    script = tmp_path / f"{name}-script.json"
    script.write_text(json.dumps(list(steps)), encoding="utf-8")
    (home / "noteloom.toml").write_text(
        "[embeddings]\nenabled = false\n\n"
        "[chat]\nstale_after = 600\n\n"
        f"[providers.play]\ntype = \"scripted\"\nscript = {json.dumps(str(script))}\n",
        encoding="utf-8",
    )
    return home


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    token: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=TIMEOUT)

    def kill(self) -> None:
        """SIGKILL the server and every process it started: nothing gets to clean up."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(TIMEOUT)


def _die_with_parent() -> None:
    """In the child: a test run that is killed takes its servers along (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@contextmanager
def serve(home: Path, *args: str, database_url: str | None = None) -> Iterator[Served]:
    """``noteloom serve --port 0 ARGS`` on ``home``, in a session of its own (so a kill
    reaches its workers); it listens once it prints its token, and answers once ready."""
    env = {**os.environ, "NOTELOOM_HOME": str(home)}
    env.pop("NOTELOOM_DATABASE_URL", None)
    if database_url:
        env["NOTELOOM_DATABASE_URL"] = database_url
    proc = subprocess.Popen(
        [sys.executable, "-m", "noteloom", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in out], daemon=True).start()
    try:
        url = token = ""
        seen: list[str] = []
        while not token:
            try:
                line = lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError("noteloom serve printed no token:\n" + "".join(seen)) from None
            seen.append(line)
            key, _, value = line.strip().partition(":")
            if key == "web":
                url = served_url(value)
            elif key == "token":
                token = value.strip()
        yield Served(proc, url, token)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(TIMEOUT)


def start_hanging_turn(c: httpx.Client) -> tuple[str, int]:
    """Send a message whose answer streams some text and then never ends; return its
    message id and the last event seen once that text arrived."""
    r = c.post("/api/v1/chat/send", json={"message": "go", "controls": {"model": "play"}})
    assert r.status_code == 202, r.text
    message_id = r.json()["message_id"]
    fields: dict[str, str] = {}
    with c.stream("GET", f"/api/v1/chat/messages/{message_id}/events?after_seq=0") as stream:
        for line in stream.iter_lines():
            if line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
            elif fields.get("event") == "text":  # a blank line ends an event
                return message_id, int(fields["id"])
            else:
                fields = {}
    raise AssertionError("the turn ended before it streamed its text")


def sse(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    """``(id, event, data)`` of each event in an SSE body."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.partition(": ")[::2] for line in block.split("\n") if ": " in line)
        if "event" in fields:
            out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


HANG = [{"chunks": ["still going"], "hang": True}]


@pytest.mark.slow
def test_a_turn_whose_server_was_killed_reads_interrupted_on_the_first_read_after_a_restart(
    tmp_path: Path, database_url: str
) -> None:
    home = _home(tmp_path, HANG)
    url = database_url if database_url.startswith("postgresql") else None
    with serve(home, database_url=url) as first, first.client() as c:
        message_id, _ = start_hanging_turn(c)
        assert c.get(f"/api/v1/chat/messages/{message_id}").json()["status"] == "running"
        first.kill()
    with serve(home, database_url=url) as second, second.client() as c:
        view = c.get(f"/api/v1/chat/messages/{message_id}").json()  # answered once the server is ready
        assert view["status"] == "failed" and view["error"]["code"] == "interrupted"
        conversation = c.get(f"/api/v1/chat/conversations/{view['conversation_id']}").json()
        events = c.get(f"/api/v1/chat/messages/{message_id}/events?after_seq=0").text
    assert "Send the message again" in view["error"]["message"]
    assert [m["status"] for m in conversation["messages"]] == ["complete", "failed"]
    stored = sse(events)
    assert [seq for seq, _, _ in stored] == list(range(1, len(stored) + 1))
    assert [kind for _, kind, _ in stored][-2:] == ["error", "done"] and stored[-1][2]["status"] == "failed"


@pytest.mark.slow
def test_a_turn_of_a_live_server_stays_running_while_another_server_starts_and_settles_once_it_dies(
    tmp_path: Path, database_url: str
) -> None:
    home = _home(tmp_path, HANG)
    url = database_url if database_url.startswith("postgresql") else None
    with serve(home, "--workers", "2", database_url=url) as workers, workers.client() as c:
        message_id, _ = start_hanging_turn(c)
        with serve(home, database_url=url) as other, other.client() as o:
            # The newcomer probed the runner of the turn at start-up and found it alive.
            assert o.get(f"/api/v1/chat/messages/{message_id}").json()["status"] == "running"
            assert c.get(f"/api/v1/chat/messages/{message_id}").json()["status"] == "running"
            workers.kill()
            with serve(home, database_url=url) as third, third.client() as t:
                view = t.get(f"/api/v1/chat/messages/{message_id}").json()
    assert view["status"] == "failed" and view["error"]["code"] == "interrupted"


@pytest.mark.slow
def test_a_server_settles_the_turn_of_a_server_that_died_beside_it_without_a_restart(
    tmp_path: Path, database_url: str
) -> None:
    home = _home(tmp_path, HANG)
    url = database_url if database_url.startswith("postgresql") else None
    with serve(home, database_url=url) as doomed, doomed.client() as c:
        message_id, _ = start_hanging_turn(c)
        with serve(home, database_url=url) as survivor, survivor.client() as s:
            assert s.get(f"/api/v1/chat/messages/{message_id}").json()["status"] == "running"
            doomed.kill()
            # Followed through the survivor: its reaper finds the dead runner's lease free
            # (the heartbeat alone would wait ten minutes) and the stream ends with the turn.
            events = sse(s.get(f"/api/v1/chat/messages/{message_id}/events?after_seq=0").text)
            view = s.get(f"/api/v1/chat/messages/{message_id}").json()
    assert [kind for _, kind, _ in events][-2:] == ["error", "done"]
    assert events[-1][2]["error"]["code"] == "interrupted"
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    assert view["status"] == "failed" and view["error"]["code"] == "interrupted"


# -- a confirmation across a restart (in-process: the App closed and opened again) ---------


def _open(home: Path) -> App:
    return open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)


@dataclass
class Parked:
    """A turn that asked to trash a note, held for approval when its server stopped."""

    home: Path
    script: Path
    owner: Any
    note_id: str
    message_id: str
    events: list[Any]
    view: dict[str, Any]


async def _park_a_delete(tmp_path: Path, title: str, message: str) -> Parked:
    home = _home(tmp_path, [])
    script = tmp_path / "home-script.json"
    first = _open(home)
    owner = first.workspace.ensure_owner()
    note = first.workspace.create_note(title, "x")
    first.registry.set_enabled(first.workspace, "delete_note", True)
    script.write_text(json.dumps([
        {"text": "I will delete it.", "tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]},
    ]))
    try:
        async with running_chat(first) as chat:
            sent = await chat.send(owner, message, controls={"model": "play"})
            events = await collect(chat, owner, sent.message_id, timeout=TIMEOUT)
            view = await chat.message(owner, sent.message_id)
    finally:
        first.close()
    return Parked(home, script, owner, note.id, sent.message_id, events, view)


@pytest.mark.anyio
async def test_approving_after_a_restart_goes_on_from_the_held_call_without_repeating_anything(
    tmp_path: Path,
) -> None:
    p = await _park_a_delete(tmp_path, "Old plans", "delete the old plans")
    home, script, owner, before, parked = p.home, p.script, p.owner, p.events, p.view
    assert parked["status"] == "awaiting_confirmation" and parked["content"] == "I will delete it."
    # The card names the note as a person knows it.
    assert parked["pending_action"]["description"] == "Move 'Old plans' (Notes) to the trash."
    assert [e.kind for e in before].count("tool_call") == 1

    # The model's next answer, for the process that runs the turn after the restart.
    script.write_text(json.dumps([{"chunks": ["Done, ", "it is in the trash."]}]))
    second = _open(home)
    try:
        async with running_chat(second) as chat:
            seen = parked["last_seq"]
            assert seen == before[-1].seq
            await chat.confirm(owner, p.message_id, "approve")
            after = await collect(chat, owner, p.message_id, after=seen, timeout=TIMEOUT)
            view = await chat.message(owner, p.message_id)
            replay = await collect(chat, owner, p.message_id, timeout=TIMEOUT)
    finally:
        second.close()
    # Numbered on from the last event before the restart: nothing missed, nothing twice.
    assert [e.seq for e in after] == list(range(seen + 1, seen + 1 + len(after)))
    assert [e.seq for e in replay] == list(range(1, len(replay) + 1)) and replay == [*before, *after]
    assert after[0].kind == "status" and after[0].data == {"status": "running", "resumed": True}
    # The held call was announced once, before the restart; after it, only its result.
    assert [e.kind for e in replay].count("tool_call") == 1
    assert [e.data["call_id"] for e in after if e.kind == "tool_result"] == ["call_1"]
    assert "".join(e.data["text"] for e in after if e.kind == "text") == "Done, it is in the trash."
    assert view["status"] == "complete"
    assert view["content"] == "I will delete it.\n\nDone, it is in the trash."
    assert view["content"].count("I will delete it.") == 1
    assert view["tool_calls"] == [{"id": "call_1", "name": "delete_note", "arguments": {"id": p.note_id},
                                   "status": "done", "untrusted": False, "render": None,
                                   "result": json.dumps({"id": p.note_id, "title": "Old plans", "in_trash": True,
                                                         "message": "Moved to the trash; restore_note brings it back."},
                                                        ensure_ascii=False)}]


@pytest.mark.anyio
async def test_the_partial_answer_of_a_turn_resumed_after_a_restart_holds_the_earlier_text_once(
    tmp_path: Path,
) -> None:
    p = await _park_a_delete(tmp_path, "Old", "delete it")
    home, script, owner = p.home, p.script, p.owner
    script.write_text(json.dumps([{"chunks": ["Gone"], "hang": True}]))
    second = _open(home)
    try:
        async with running_chat(second) as chat:
            confirmed = await chat.confirm(owner, p.message_id, "approve")
            assert confirmed["status"] == "running"
            last = confirmed["last_seq"]
            async for event in chat.events(owner, p.message_id, last):
                if event.kind == "text":
                    break
            here = await chat.message(owner, p.message_id)
            elsewhere = await ChatService(second).message(owner, p.message_id)  # as another process reads it
    finally:
        second.close()
    assert here["partial_text"] == "I will delete it.\n\nGone"
    assert elsewhere["status"] == "running"
    assert elsewhere["partial_text"] is not None and elsewhere["partial_text"].count("I will delete it.") == 1


@pytest.mark.anyio
async def test_a_new_turn_is_stored_running_with_its_model_heartbeat_and_runner_and_a_newcomer_leaves_it(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path, [{"hang": True}])
    app = _open(home)
    owner = app.workspace.ensure_owner()
    try:
        async with running_chat(app) as chat:
            sent = await chat.send(owner, "go", controls={"model": "play"})
            with app.workspace.read() as c:
                row = c.execute(sa.select(t.messages).where(t.messages.c.id == sent.message_id)).one()
                run = c.execute(sa.select(rt.runs).where(rt.runs.c.id == sent.message_id)).one()
            assert row.status == "running" and run.runner_id == chat.runner.id
            assert run.heartbeat_time is not None and row.started_time is not None
            assert (await chat.message(owner, sent.message_id))["model"] == "play:script"
            newcomer = ChatService(app)  # another runner starting on the workspace meanwhile
            async with newcomer.runner.running():
                assert (await newcomer.message(owner, sent.message_id))["status"] == "running"
    finally:
        app.close()
