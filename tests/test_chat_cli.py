"""``noteloom chat`` decides on a web conversation's held tool call and finishes the turn."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from chat_support import running_chat, scripted, settle
from noteloom.app import open_app
from noteloom.chat import ChatService
from noteloom.cli import cli
from noteloom.config import load_settings


@pytest.fixture
def parked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    """A workspace with a web turn waiting to delete a note; the settings file's scripted
    model plays what the model says once the call has run."""
    home = tmp_path / "home"
    home.mkdir()
    after = tmp_path / "after.json"
    after.write_text(json.dumps([{"text": "Gone to the trash."}]))
    (home / "noteloom.toml").write_text(f'[providers.play]\ntype = "scripted"\nscript = "{after}"\n')
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        owner = app.workspace.ensure_owner()
        note = app.workspace.create_note("Old", "x")
        app.registry.set_enabled(app.workspace, "delete_note", True)
        scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}])

        async def park() -> str:
            async with running_chat(app) as chat:
                sent = await chat.send(owner, "delete the old note", controls={"model": "play:script"})
                assert (await settle(chat, owner, sent.message_id))["status"] == "awaiting_confirmation"
                return sent.message_id

        message_id = anyio.run(park)
    finally:
        app.close()
    return home, message_id, note.id


def test_pending_lists_the_waiting_calls_and_approve_finishes_the_turn(parked: tuple[Path, str, str]) -> None:
    home, message_id, note_id = parked
    runner = CliRunner()
    listed = runner.invoke(cli, ["chat", "--pending"])
    assert listed.exit_code == 0, listed.output
    assert message_id in listed.stdout and "Move 'Old' (Notes) to the trash." in listed.stdout

    done = runner.invoke(cli, ["chat", "--approve", message_id[:8]])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "Gone to the trash."
    assert "approved" in done.stderr and "complete" in done.stderr
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        owner = app.workspace.ensure_owner()
        view = anyio.run(ChatService(app).message, owner, message_id)
        assert view["status"] == "complete" and view["content"] == "Gone to the trash."
        assert app.workspace.get_note(note_id, include_deleted=True).deleted_time is not None
    finally:
        app.close()
    assert "No tool call is waiting" in runner.invoke(cli, ["chat", "--pending"]).stdout


def test_declining_an_unknown_message_says_how_to_find_the_right_one(parked: tuple[Path, str, str]) -> None:
    result = CliRunner().invoke(cli, ["chat", "--decline", "ffffffff"])
    assert result.exit_code == 1
    assert "no waiting tool call for message 'ffffffff'" in result.stderr and "--pending" in result.stderr
