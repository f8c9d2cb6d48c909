"""The recipes page in a real Chromium against a live ``noteloom serve`` with scripted models:
an agent recipe made through the form (its schedule read back as it is typed), run now and
its trace; a pipeline job's settings drawn from its schema, and its run's verdicts; a run
that waits for approval, approved from its card; a slow run stopped; the notifications badge.

A pipeline job of the test's own (``recipes_test_job``, found through an entry point on the
server's import path) has one setting of each kind the form draws.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from page_support import TRIP, Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from plugin_site import install_plugin

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"
REPORT = "Report: the trip leaves on Friday; bring the tent."
JOB = "recipes_test_job"

JOB_MODULE = textwrap.dedent('''
    """A pipeline job for the recipes page test: says keep or drop for each note of a notebook."""

    from noteloom.pipeline import BasePipelineJob, PipelineItem
    from noteloom.plugins import hookimpl


    class Labeller(BasePipelineJob):
        name = "recipes_test_job"
        label = "Keep or drop (test)"
        untrusted_digest = False
        config_schema = {
            "type": "object",
            "properties": {
                "notebook_id": {"type": "string", "title": "Notebook to read", "minLength": 1},
                "style": {"type": "string", "enum": ["terse", "chatty"], "title": "Style"},
                "max_words": {"type": "integer", "minimum": 1, "maximum": 50, "title": "Most words"},
                "only_look": {"type": "boolean", "title": "Only look"},
                "prefix": {"type": "string", "title": "Prefix", "description": "Put before each label"},
            },
            "required": ["notebook_id"],
            "additionalProperties": False,
        }
        verdict_schema = {
            "type": "object",
            "properties": {"label": {"type": "string", "enum": ["keep", "drop"]}},
            "required": ["label"],
            "additionalProperties": False,
        }
        default_prompt = "Say whether the note is worth keeping."

        def next_item(self, run):
            notes = run.workspace.list_notes(run.config["notebook_id"], limit=100)
            done = run.handled([n.id for n in notes])
            fresh = [n for n in notes if n.id not in done]
            return PipelineItem(fresh[0].id, fresh[0].title) if fresh else None

        def digest(self, run, item):
            return run.workspace.get_note(item.key).body

        def record_verdict(self, run, item, verdict, model):
            return None


    @hookimpl
    def register_pipeline_jobs(register):
        register(Labeller())
''')


def _scripts(notes: dict[str, str]) -> dict[str, Any]:
    return {
        "agent": [
            {"text": "Let me look.", "tool_calls": [{"name": "search_notes", "arguments": {"query": "tent"}}]},
            {"text": REPORT, "usage": {"input_tokens": 300, "output_tokens": 20}},
        ],
        "confirm": [
            {"text": "I will trash the old list.", "tool_calls": [{"name": "delete_note", "arguments": {"id": notes["old"]}}]},
            {"text": "Done: the old list is in the trash."},
        ],
        "slow": [{"chunks": ["Thinking ", "slowly "], "chunk_delay": 0.05, "hang": True}],
        "judge": [{"text": '{"label": "keep"}'}],
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("recipes-browser")
    plugin = install_plugin(home / "plugin", JOB, JOB_MODULE)

    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        travel = ws.create_notebook("Travel")
        inbox = ws.create_notebook("Inbox")
        notes = {
            "trip": ws.create_note("Trip", TRIP, travel.id).id,
            "old": ws.create_note("Old packing list", "- socks", travel.id).id,
            "a": ws.create_note("Receipt", "a receipt", inbox.id).id,
            "b": ws.create_note("Idea", "an idea", inbox.id).id,
            "inbox": inbox.id,
        }
        app.registry.set_enabled(ws, "delete_note", True)
        token = access_token(app)
    finally:
        app.close()
    tables = []
    for name, steps in _scripts(notes).items():
        path = home / f"{name}.json"
        path.write_text(json.dumps({"steps": steps, "loop": True}), encoding="utf-8")
        tables.append(f'[providers.{name}]\ntype = "scripted"\nscript = "{path}"\nloop = true\n')
    (home / "noteloom.toml").write_text('[data]\nworkspace = ["notes", "todos"]\n\n[providers]\ndefault = "agent"\n\n'
                                        + "\n".join(tables), encoding="utf-8")
    with served(home, pythonpath=plugin) as url:
        yield Live(url, token, home, notes)


@pytest.fixture
def page(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page on /recipes, ready once its list is drawn; a browser dialog or a script
    error fails the test, and a screenshot named after the test is kept."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    pg = context.new_page()
    problems: list[str] = []

    def on_dialog(dialog: Any) -> None:
        problems.append(f"browser dialog: {dialog.message}")
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    pg.goto(live.page_url("/recipes"))
    expect(pg.locator("body")).to_have_attribute("data-ready", "1")
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"recipes-{request.node.name}.png"), full_page=True)
        context.close()
    assert not problems, problems


def add_recipe(live: Live, **spec: Any) -> dict[str, Any]:
    made: dict[str, Any] = live.api("POST", "/api/v1/recipes", json=spec)
    return made


def reload_list(page: Any) -> None:
    """The page afresh on /recipes (a recipe added through the API shows), once it is drawn."""
    page.goto(page.url.split("/recipes")[0] + "/recipes")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")


def open_recipe(page: Any, name: str) -> None:
    reload_list(page)
    page.locator(".recipe-item", has_text=name).locator(".recipe-link").click()
    expect(page.locator("#recipe-name")).to_have_text(name)


def test_an_agent_recipe_made_in_the_form_runs_now_and_shows_its_trace_and_report(page: Any, live: Live) -> None:
    page.click("#new-recipe")
    expect(page.locator("#form-title")).to_have_text("New recipe")
    page.fill("#f-name", "Trip digest")
    page.fill("#f-prompt", "Summarise what my notes say about the trip.")
    page.check("#tool-search_notes")
    # Every tool of the app is offered; one the workspace keeps off says it would be skipped,
    # one that reads others' text says so (the taint gate's reason), and budgets start at the server's defaults.
    expect(page.locator(".tool-choice", has=page.locator("#tool-update_note"))).to_contain_text(
        "off in this workspace")
    expect(page.locator(".tool-choice", has=page.locator("#tool-search_notes"))).to_contain_text(
        "may read text others wrote")
    expect(page.locator('[data-budget="max_tool_calls"]')).to_have_value("50")
    page.select_option("#f-model", "agent:script")
    page.fill("#f-timezone", "Europe/Paris")

    page.fill("#f-schedule", "61 7 * * *")
    error = page.locator('.field-error[data-error-for="schedule"]')
    expect(error).to_be_visible()
    expect(error).to_contain_text("61")  # the server's reason, beside the field
    expect(page.locator("#schedule-preview li")).to_have_count(0)

    page.fill("#f-schedule", "0 7 * * 1-5")
    expect(error).to_be_hidden()
    preview = live.api("GET", "/api/v1/recipes/schedule", params={"schedule": "0 7 * * 1-5", "timezone": "Europe/Paris"})
    expect(page.locator("#schedule-preview .explain")).to_have_text(preview["explain"])
    times = page.locator("#schedule-preview li")
    expect(times).to_have_count(5)
    for n in range(5):
        assert re.match(r"^\d{4}-\d\d-\d\d 07:00 \+0[12]:00$", times.nth(n).inner_text()), times.nth(n).inner_text()

    page.click("#f-save")
    expect(page.locator("#recipe-name")).to_have_text("Trip digest")
    saved = next(r for r in live.api("GET", "/api/v1/recipes") if r["name"] == "Trip digest")
    assert saved["tools"] == ["search_notes"] and saved["model"] == "agent:script"
    assert saved["schedule"] == "0 7 * * 1-5" and saved["timezone"] == "Europe/Paris"
    item = page.locator(".recipe-item", has_text="Trip digest")
    expect(item.locator(".next")).to_contain_text(saved["next_fire"].replace("T", " ")[:16])
    expect(item.locator(".sched")).to_have_text(saved["explain"])

    page.click("#recipe-run")
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", "succeeded")
    expect(page).to_have_url(re.compile(r"/recipes/runs/[0-9a-f]{32}$"))
    run_id = page.url.rsplit("/", 1)[1]
    detail = live.api("GET", f"/api/v1/recipes/runs/{run_id}")
    assert REPORT in detail["output"]
    expect(page.locator("#run-output")).to_have_text(detail["output"])
    call = page.locator('#trace .trace-call[data-tool="search_notes"]')
    expect(call).to_have_count(1)
    expect(call).not_to_have_class(re.compile(r"\berror\b"))
    expect(call.locator(".call-input pre")).to_contain_text('"query": "tent"')
    output = call.locator(".call-output")
    expect(output).not_to_have_attribute("open", "")  # folded until opened
    output.locator("summary").click()
    expect(output.locator("pre")).to_contain_text("Trip")
    expect(page.locator("#run-view .facts")).to_contain_text(f"{detail['usage']['input_tokens']:,} in")

    # The list and the recipe's history show the run.
    expect(item.locator(".last .status")).to_have_attribute("data-status", "succeeded")
    expect(item.locator(".spend")).to_contain_text("1 run")
    open_recipe(page, "Trip digest")
    row = page.locator(f'table.runs tr[data-run="{run_id}"]')
    expect(row.locator(".status")).to_have_attribute("data-status", "succeeded")
    expect(row).to_contain_text("manual")
    # What it spent, today and this month, as the API counts it.
    spend = live.api("GET", f"/api/v1/recipes/{detail['recipe_id']}/spend")
    today = next(d for d in spend["days"] if d["runs"])
    expect(page.locator("#recipe-spend")).to_contain_text(today["day"])
    expect(page.locator("#recipe-spend tr.total")).to_contain_text(f"{spend['month']['input_tokens']:,} in")
    # The page with no recipe open shows the workspace's month against its cap.
    page.goto(live.page_url("/recipes"))
    expect(page.locator("#cap-line")).to_contain_text("No monthly cap is set")
    expect(page.locator("#workspace-spend-table tr.total")).to_contain_text("tokens")


def test_the_pipeline_form_draws_its_jobs_settings_and_a_run_lists_each_items_verdict(page: Any, live: Live) -> None:
    job = next(j for j in live.api("GET", "/api/v1/recipes/jobs") if j["name"] == JOB)
    books = live.api("GET", "/api/v1/notebooks")
    page.click("#new-recipe")
    expect(page.locator("#agent-fields")).to_be_visible()
    page.check("#f-mode-pipeline")
    expect(page.locator("#agent-fields")).to_be_hidden()
    page.select_option("#f-job", JOB)
    expect(page.locator("#f-prompt")).to_have_attribute("placeholder", job["default_prompt"])

    props = job["config_schema"]["properties"]
    fields = page.locator("#job-config-fields .config-field")
    expect(fields).to_have_count(len(props))
    for key, prop in props.items():
        control = page.locator(f"#cfg-{key}")
        if key.endswith("notebook_id"):
            expect(control).to_have_js_property("tagName", "SELECT")
            for b in books:
                expect(control.locator(f'option[value="{b["id"]}"]')).to_have_text(b["title"])
        elif "enum" in prop:
            expect(control).to_have_js_property("tagName", "SELECT")
            texts = control.locator("option").all_inner_texts()
            assert [t for t in texts if t != "—"] == prop["enum"]
        elif prop["type"] == "boolean":
            expect(control).to_have_attribute("type", "checkbox")
        elif prop["type"] == "integer":
            expect(control).to_have_attribute("type", "number")
            expect(control).to_have_attribute("max", str(prop["maximum"]))
        else:
            expect(control).to_have_js_property("type", "text")
        label = page.locator(f'#job-config-fields .config-field[data-field="{key}"]')
        expect(label).to_contain_text(prop["title"])

    page.fill("#f-name", "Inbox sorter")
    page.select_option("#f-model", "judge:script")
    page.click("#f-save")  # no notebook chosen: the server says so, beside the job's settings
    expect(page.locator('.field-error[data-error-for="job_config"]')).to_contain_text("notebook_id")
    page.select_option("#cfg-notebook_id", live.notes["inbox"])
    page.fill("#cfg-max_words", "500")  # above the schema's maximum: the reason shows beside that field
    page.click("#f-save")
    expect(page.locator('.field-error[data-error-for="job_config.max_words"]')).to_contain_text("max_words")
    expect(page.locator('.field-error[data-error-for="job_config"]')).to_be_hidden()
    page.fill("#cfg-max_words", "12")
    page.select_option("#cfg-style", label="chatty")
    page.check("#cfg-only_look")
    page.click("#f-save")
    expect(page.locator("#recipe-name")).to_have_text("Inbox sorter")
    saved = next(r for r in live.api("GET", "/api/v1/recipes") if r["name"] == "Inbox sorter")
    assert saved["job_config"] == {"notebook_id": live.notes["inbox"], "style": "chatty", "max_words": 12,
                                   "only_look": True}

    page.click("#recipe-run")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    rows = page.locator("#items tbody tr")
    expect(rows).to_have_count(2)
    for title in ("Receipt", "Idea"):
        row = page.locator("#items tbody tr", has_text=title)
        expect(row.locator(".status")).to_have_attribute("data-status", "done")
        expect(row.locator(".verdict")).to_contain_text('"label": "keep"')

    # Editing shows the saved settings again.
    open_recipe(page, "Inbox sorter")
    page.click("#recipe-edit")
    expect(page.locator("#cfg-max_words")).to_have_value("12")
    expect(page.locator("#cfg-only_look")).to_be_checked()
    expect(page.locator("#cfg-notebook_id")).to_have_value(live.notes["inbox"])


def test_a_run_awaiting_approval_shows_its_card_and_approve_lets_it_finish(page: Any, live: Live) -> None:
    add_recipe(live, name="Tidy up", prompt="Trash my old packing list.", tools=["delete_note"],
               model="confirm:script")
    open_recipe(page, "Tidy up")
    page.click("#recipe-run")
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", "awaiting_approval")
    card = page.locator("#approval")
    run_id = page.url.rsplit("/", 1)[1]
    held = live.api("GET", f"/api/v1/recipes/runs/{run_id}")["held"]
    expect(card.locator(".held-description")).to_have_text(held["description"])
    expect(page.locator("#run-stop")).to_be_visible()
    expect(page.locator("#pending-list")).to_contain_text("Tidy up")

    # The approval was notified: the badge counts it, the list shows it.
    unread = live.api("GET", "/api/v1/notifications/count")["unread"]
    assert unread >= 1
    expect(page.locator("#notif-count")).to_have_text(str(unread))
    page.click("#notif-button")
    notes = live.api("GET", "/api/v1/notifications")["notifications"]
    mine = next(n for n in notes if n["run_id"] == run_id)
    expect(page.locator(f'#notif-list .notif-item[data-id="{mine["id"]}"]')).to_contain_text(mine["title"])
    page.click("#notif-read-all")
    expect(page.locator("#notif-count")).to_be_hidden()
    assert live.api("GET", "/api/v1/notifications/count")["unread"] == 0
    page.click("#notif-button")

    card.get_by_role("button", name="Approve").click()
    expect(status).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#approval")).to_have_count(0)
    expect(page.locator("#run-stop")).to_have_count(0)
    expect(page.locator("#run-output")).to_have_text("Done: the old list is in the trash.")
    expect(page.locator('#trace .trace-call[data-tool="delete_note"]')).to_have_count(1)
    assert live.api("GET", f"/api/v1/notes/{live.notes['trip']}")["title"] == "Trip"
    with pytest.raises(httpx.HTTPStatusError, match="404"):
        live.api("GET", f"/api/v1/notes/{live.notes['old']}")


def test_stop_ends_a_slow_run_cancelled(page: Any, live: Live) -> None:
    add_recipe(live, name="Slow thinker", prompt="Think about it at length.", model="slow:script")
    open_recipe(page, "Slow thinker")
    page.click("#recipe-run")
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", "running")
    page.click("#run-stop")
    expect(status).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#run-stop")).to_have_count(0)
    run_id = page.url.rsplit("/", 1)[1]
    assert live.api("GET", f"/api/v1/recipes/runs/{run_id}")["status"] == "cancelled"
    # The run's address opens it afresh (a deep link, read by the page's own script).
    page.goto(live.page_url(f"/recipes/runs/{run_id}"))
    expect(page.locator("#run-status")).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#run-title")).to_contain_text("Slow thinker")


def test_pause_and_resume_from_the_list(page: Any, live: Live) -> None:
    add_recipe(live, name="Morning brief", prompt="Brief me.", schedule="0 7 * * *")
    reload_list(page)
    item = page.locator(".recipe-item", has_text="Morning brief")
    expect(item.locator(".next")).to_contain_text("Next:")
    item.get_by_role("button", name="Pause").click()
    expect(item.locator(".paused-reason")).to_contain_text("Paused")
    expect(item.locator(".next")).to_have_text("Not scheduled")
    assert next(r for r in live.api("GET", "/api/v1/recipes") if r["name"] == "Morning brief")["enabled"] is False
    item.get_by_role("button", name="Resume").click()
    expect(item.locator(".paused-reason")).to_have_count(0)
    expect(item.locator(".next")).to_contain_text("Next:")


def test_the_form_picks_the_data_sources_among_those_the_workspace_opted_in(page: Any, live: Live) -> None:
    page.click("#new-recipe")
    page.fill("#f-name", "Due list")
    page.fill("#f-prompt", "List what is due.")
    page.check("#tool-query_data")
    # Every opted-in source by default: the boxes wait until that is unticked.
    expect(page.locator("#f-data-all")).to_be_checked()
    expect(page.locator("#data-list input[name=data_source]")).to_have_count(2)
    expect(page.locator("#data-todos")).to_be_disabled()
    page.uncheck("#f-data-all")
    page.check("#data-todos")
    page.click("#f-save")
    expect(page.locator("#recipe-name")).to_have_text("Due list")
    saved = next(r for r in live.api("GET", "/api/v1/recipes") if r["name"] == "Due list")
    assert saved["data_sources"] == ["todos"]
    expect(page.locator("#recipe-view .facts")).to_contain_text("Data sources")
    expect(page.locator("#recipe-view .facts")).to_contain_text("todos")
    page.click("#recipe-edit")
    expect(page.locator("#f-data-all")).not_to_be_checked()
    expect(page.locator("#data-todos")).to_be_checked()
    expect(page.locator("#data-notes")).not_to_be_checked()
    page.check("#f-data-all")
    page.click("#f-save")
    # Saved once the view is drawn again without the fact (null: every source, not listed).
    expect(page.locator("#recipe-view .facts")).not_to_contain_text("Data sources")
    expect(page.locator("#recipe-view .facts")).to_contain_text("Tools")
    assert live.api("GET", f"/api/v1/recipes/{saved['id']}")["data_sources"] is None
