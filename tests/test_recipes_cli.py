"""``noteloom recipes …`` as a user types it: saving, reading, running in this process,
approvals, stop, export/import — on SQLite and PostgreSQL (every command opens the workspace
afresh, as separate invocations in a shell do)."""

from __future__ import annotations

import json
import os
import re
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from typer.testing import CliRunner

import noteloom.plugins
from noteloom.app import App, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.pipeline import BasePipelineJob, PipelineItem, PipelineRun
from noteloom.plugins import hookimpl

PLUGIN = "noteloom_test_recipes_cli_plugin"
Invoke = Callable[..., tuple[int, str, str]]


class TagJob(BasePipelineJob):
    """Offers every note, oldest first; records the verdict's label beside the note's title."""

    name = "tag_notes"
    untrusted_digest = False
    verdict_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"],
        "additionalProperties": False,
    }
    default_prompt = "Label the note with one word."
    recorded: ClassVar[list[tuple[str, str]]] = []

    def next_item(self, run: PipelineRun) -> PipelineItem | None:
        notes = sorted(run.workspace.list_notes(None, limit=1000), key=lambda n: n.id)
        done = run.handled([n.id for n in notes])
        for n in notes:
            if n.id not in done:
                return PipelineItem(n.id, n.title)
        return None

    def digest(self, run: PipelineRun, item: PipelineItem) -> str:
        return run.workspace.get_note(item.key).body

    def record_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any], model: str) -> None:
        TagJob.recorded.append((item.label, str(verdict["label"])))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> Path:
    """A data directory on SQLite or PostgreSQL, with a test pipeline job installed."""
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("NOTELOOM_HOME", str(path))
    monkeypatch.setenv("NOTELOOM_DATABASE_URL", database_url)
    TagJob.recorded = []
    module = types.ModuleType(PLUGIN)

    @hookimpl
    def register_pipeline_jobs(register: Any) -> None:
        register(TagJob())

    module.register_pipeline_jobs = register_pipeline_jobs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, PLUGIN, module)
    monkeypatch.setattr(noteloom.plugins, "DEFAULT_PLUGINS", [*noteloom.plugins.DEFAULT_PLUGINS, PLUGIN])
    return path


@pytest.fixture
def invoke(home: Path) -> Invoke:
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
        result = runner.invoke(cli, ["recipes", *args], input=input)
        return result.exit_code, result.stdout, result.stderr

    return run


def ok(invoke: Invoke, *args: str) -> Any:
    """Run a command with --json; what it printed, parsed."""
    code, out, err = invoke(*args, "--json")
    assert code == 0, (args, out, err)
    return json.loads(out)


def script(home: Path, steps: list[dict[str, Any]]) -> str:
    """Name a scripted model playing ``steps`` in noteloom.toml; its address. Each command
    plays the file from its first step (a new process reads it afresh)."""
    path = home.parent / "script.json"
    path.write_text(json.dumps(steps))
    (home / "noteloom.toml").write_text(f'[providers.play]\ntype = "scripted"\nscript = "{path}"\n')
    return "play"


def setup_app(home: Path) -> App:
    """The workspace the commands open (to prepare notes and tool toggles, and to look after them)."""
    env = {"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": os.environ["NOTELOOM_DATABASE_URL"]}
    return open_app(load_settings(env), load_entry_points=False)


@pytest.mark.postgres
def test_a_bad_cron_exits_2_naming_the_option_and_shows_a_valid_example_with_five_fire_times(invoke: Invoke) -> None:
    code, out, err = invoke("add", "digest", "--prompt", "Summarise", "--schedule", "61 * * * *")
    assert code == 2 and out == ""
    assert err.startswith("error: --schedule '61 * * * *' is not a valid cron expression")
    assert "'0 7 * * 1-5'" in err
    fires = re.findall(r"\d{4}-\d\d-\d\dT07:00\+00:00", err)
    assert len(fires) == 5
    code, out, err = invoke("add", "digest", "--prompt", "x", "--max-cost", "lots")
    assert code == 2 and "--max-cost" in err
    code, out, err = invoke("add", "digest", "--prompt", "x", "--temperature", "7")
    assert code == 2 and err.startswith("error: --temperature")
    assert ok(invoke, "list") == []


@pytest.mark.postgres
def test_add_list_show_edit_and_rm_round_trip(invoke: Invoke) -> None:
    saved = ok(invoke, "add", "morning", "--prompt", "Summarise yesterday's notes", "--schedule", "0 7 * * 1-5",
               "--timezone", "Europe/Paris", "--model", "echo", "--tool", "search_notes", "--max-cost", "0.50",
               "--max-tool-calls", "10", "--notify-success")
    assert saved["name"] == "morning" and saved["schedule"] == "0 7 * * 1-5"
    assert saved["budgets"]["max_cost"] == "0.50" and saved["budgets"]["max_tool_calls"] == 10
    assert saved["notify"]["on_success"] is True and saved["next_fire"].endswith(("+01:00", "+02:00"))

    listed = ok(invoke, "list")
    assert [r["name"] for r in listed] == ["morning"]
    assert listed[0]["explain"].endswith("(Europe/Paris)") and listed[0]["last_run"] is None
    code, out, _ = invoke("list")
    assert code == 0 and "morning" in out and "Europe/Paris" in out

    shown = ok(invoke, "show", "morning")
    assert shown["id"] == saved["id"] and len(shown["upcoming"]) == 5
    assert ok(invoke, "show", saved["id"])["name"] == "morning"

    # Only what is given changes: a budget given alone leaves the others as they were.
    edited = ok(invoke, "edit", "morning", "--max-cost", "none", "--schedule", "manual", "--name", "daily")
    assert edited["name"] == "daily" and edited["schedule"] == "manual" and edited["next_fire"] is None
    assert edited["budgets"]["max_cost"] is None and edited["budgets"]["max_tool_calls"] == 10
    assert edited["tools"] == ["search_notes"] and edited["notify"]["on_success"] is True
    code, _, err = invoke("edit", "daily", "--schedule", "every day")
    assert code == 2 and "--schedule" in err

    paused = ok(invoke, "pause", "daily")
    assert paused["enabled"] is False
    assert ok(invoke, "resume", "daily")["enabled"] is True
    assert ok(invoke, "note", "daily", "Mention the garden too")["notes"][0]["body"] == "Mention the garden too"

    assert ok(invoke, "rm", "daily")["name"] == "daily"
    assert ok(invoke, "list") == []
    code, _, err = invoke("show", "daily")
    assert code == 1 and "no recipe 'daily'" in err


@pytest.mark.postgres
def test_run_json_prints_a_succeeded_run_with_output_tokens_and_trace(invoke: Invoke, home: Path) -> None:
    app = setup_app(home)
    try:
        app.workspace.create_note("Garden plan", "Plant tomatoes in May.")
    finally:
        app.close()
    model = script(home, [
        {"tool_calls": [{"name": "search_notes", "arguments": {"query": "tomatoes"}}]},
        {"text": "You plan to plant tomatoes in May."},
    ])
    ok(invoke, "add", "garden", "--prompt", "What do I plan?", "--tool", "search_notes", "--model", model)
    run = ok(invoke, "run", "garden")
    assert run["status"] == "succeeded" and run["trigger"] == "manual"
    assert run["output"] == "You plan to plant tomatoes in May."
    assert run["usage"]["input_tokens"] > 0 and run["usage"]["output_tokens"] > 0
    assert run["model"] == "play:script"
    [call] = run["trace"]
    assert call["tool"] == "search_notes" and call["input"] == {"query": "tomatoes"}
    assert call["is_error"] is False and "Garden plan" in call["output"], call
    assert call["started_time"] <= call["finished_time"]

    runs = ok(invoke, "runs", "garden")
    assert [r["run_id"] for r in runs] == [run["run_id"]]
    detail = ok(invoke, "show", run["run_id"])
    assert detail["trace"][0]["tool"] == "search_notes" and detail["recipe"]["name"] == "garden"
    code, out, _ = invoke("show", run["run_id"])
    assert code == 0 and "✓ search_notes" in out and "You plan to plant tomatoes in May." in out
    assert ok(invoke, "list")[0]["last_run"]["status"] == "succeeded"
    assert ok(invoke, "spend", "garden")["month"]["runs"] == 1


@pytest.mark.postgres
def test_a_sample_run_judges_items_and_records_nothing_in_the_processing_log(invoke: Invoke, home: Path) -> None:
    app = setup_app(home)
    try:
        for title in ("one", "two", "three"):
            app.workspace.create_note(title, f"body of {title}")
    finally:
        app.close()
    model = script(home, [{"text": '{"label": "fine"}'}] * 5)
    jobs = ok(invoke, "jobs")
    assert [j["name"] for j in jobs] == ["tag_notes"] or "tag_notes" in [j["name"] for j in jobs]
    ok(invoke, "add", "tagger", "--mode", "pipeline", "--job", "tag_notes", "--model", model, "--batch", "10")

    dry = ok(invoke, "run", "tagger", "--sample", "2")
    assert dry["status"] == "succeeded" and dry["dry_run"] is True
    assert dry["items_done"] == 2 and [i["status"] for i in dry["items"]] == ["done", "done"]
    assert dry["items"][0]["verdict"] == {"label": "fine"}
    assert ok(invoke, "items", "tagger") == [] and TagJob.recorded == []

    real = ok(invoke, "run", "tagger")
    assert real["items_done"] == 3 and len(TagJob.recorded) == 3
    assert sorted(i["label"] for i in ok(invoke, "items", "tagger")) == ["one", "three", "two"]
    keys = [i["key"] for i in ok(invoke, "items", "tagger")]
    assert ok(invoke, "forget", "tagger", keys[0])["forgotten"] == 1
    assert ok(invoke, "forget", "tagger", "--all")["forgotten"] == 2
    code, _, err = invoke("forget", "tagger")
    assert code == 2 and "--all" in err


@pytest.mark.postgres
def test_export_then_import_starts_every_recipe_paused(invoke: Invoke, tmp_path: Path) -> None:
    ok(invoke, "add", "a", "--prompt", "first", "--schedule", "0 9 * * *")
    ok(invoke, "add", "b", "--prompt", "second", "--schedule", "manual", "--max-tool-calls", "3")
    code, text, _ = invoke("export")
    assert code == 0
    doc = yaml.safe_load(text)
    assert [r["name"] for r in doc["recipes"]] == ["a", "b"]
    ok(invoke, "rm", "a")
    ok(invoke, "rm", "b")
    path = tmp_path / "recipes.yaml"
    path.write_text(text)
    imported = ok(invoke, "import", str(path))
    assert [(r["name"], r["enabled"]) for r in imported] == [("a", False), ("b", False)]
    listed = {r["name"]: r for r in ok(invoke, "list")}
    assert listed["a"]["enabled"] is False and listed["a"]["next_fire"] is None
    assert listed["b"]["budgets"]["max_tool_calls"] == 3

    path.write_text(text.replace("schedule: 0 9 * * *", "schedule: 0 9 * *"))
    code, _, err = invoke("import", str(path))
    assert code == 1 and "recipes[0].schedule" in err
    assert len(ok(invoke, "list")) == 2  # all or nothing


def park(invoke: Invoke, home: Path) -> tuple[str, str]:
    """A run parked on a delete_note call (its policy is confirm); (run id, note id)."""
    app = setup_app(home)
    try:
        note = app.workspace.create_note("Old list", "milk")
        app.registry.set_enabled(app.workspace, "delete_note", True)
    finally:
        app.close()
    model = script(home, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}])
    ok(invoke, "add", "tidy", "--prompt", "Delete the old list", "--tool", "delete_note", "--model", model)
    run = ok(invoke, "run", "tidy")
    assert run["status"] == "awaiting_approval"
    assert run["held"]["tool"] == "delete_note" and "Old list" in run["held"]["description"]
    return run["run_id"], note.id


@pytest.mark.postgres
def test_pending_lists_a_run_parked_on_a_confirm_tool_and_approve_finishes_it_here(
        invoke: Invoke, home: Path) -> None:
    run_id, note_id = park(invoke, home)
    pending = ok(invoke, "pending")
    assert [p["run_id"] for p in pending] == [run_id] and pending[0]["recipe"]["name"] == "tidy"
    code, out, _ = invoke("pending")
    assert code == 0 and run_id in out and "Old list" in out

    script(home, [{"text": "Deleted the old list."}])  # the rest of the run, in the approving process
    done = ok(invoke, "approve", run_id)
    assert done["status"] == "succeeded" and done["output"] == "Deleted the old list."
    # The call held for approval shows once in the trace, as it ran once approved.
    assert [(c["tool"], c["outcome"]) for c in done["trace"]] == [("delete_note", "ok")]
    assert len({c["call_id"] for c in done["trace"]}) == 1
    assert ok(invoke, "pending") == []
    app = setup_app(home)
    try:
        assert [t.id for t in app.workspace.list_trash()] == [note_id]
    finally:
        app.close()
    code, _, err = invoke("approve", run_id)
    assert code == 2 and "is succeeded, not waiting for approval" in err
    code, _, err = invoke("run", "no such recipe")
    assert code == 1 and "no recipe 'no such recipe'" in err


@pytest.mark.postgres
def test_decline_tells_the_model_and_nothing_is_deleted(invoke: Invoke, home: Path) -> None:
    run_id, note_id = park(invoke, home)
    script(home, [{"text": "I left the list alone."}])
    done = ok(invoke, "decline", run_id)
    assert done["status"] == "succeeded" and done["output"] == "I left the list alone."
    app = setup_app(home)
    try:
        assert app.workspace.get_note(note_id).title == "Old list"
    finally:
        app.close()


@pytest.mark.postgres
def test_stop_cancels_a_parked_run_at_once(invoke: Invoke, home: Path) -> None:
    run_id, _ = park(invoke, home)
    stopped = ok(invoke, "stop", run_id)
    assert stopped["stop_requested"] is True and stopped["status"] == "cancelled"
    assert ok(invoke, "pending") == []
    again = ok(invoke, "stop", run_id)
    assert again["stop_requested"] is False
    code, _, err = invoke("stop", "f" * 32)
    assert code == 1 and "no recipe run" in err


@pytest.mark.postgres
def test_cap_sets_and_clears_the_monthly_ceilings(invoke: Invoke) -> None:
    assert ok(invoke, "cap")["cap_tokens"] is None
    out = ok(invoke, "cap", "--tokens", "100000", "--cost", "5")
    assert out["cap_tokens"] == 100000 and out["cap_cost_usd"] == "5"
    out = ok(invoke, "cap", "--tokens", "none")
    assert out["cap_tokens"] is None and out["cap_cost_usd"] == "5"
    code, _, err = invoke("cap", "--tokens", "many")
    assert code == 2 and "--tokens" in err
    code, _, err = invoke("cap", "--timezone", "Mars/Base")
    assert code == 2 and "--timezone" in err


def test_a_recipe_file_gives_the_fields_and_its_errors_name_the_file(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("name: weekly\nprompt: Plan the week\nschedule: 0 18 * * 0\nbudgets:\n  max_tool_calls: 4\n")
    saved = ok(invoke, "add", "--file", str(path), "--max-cost", "1")
    assert saved["name"] == "weekly" and saved["budgets"]["max_tool_calls"] == 4
    assert saved["budgets"]["max_cost"] == "1"
    path.write_text("name: broken\nprompt: x\nschedule: nope\n")
    code, _, err = invoke("add", "--file", str(path))
    assert code == 1 and err.startswith(f"error: {path}: schedule 'nope' is not a valid cron expression")
