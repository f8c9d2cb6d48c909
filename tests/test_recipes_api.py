"""The recipes' JSON API in-process (httpx2's ASGI transport over the full web app, token
middleware included): saving and reading, runs started in this server and followed by their
events, approvals, stop, export/import, owner scoping, and 4xx naming the field for bad input."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from api_support import client, second_user
from chat_support import scripted
from noteloom.app import RECIPES, App

pytestmark = pytest.mark.anyio
BASE = "/api/v1/recipes"


def sse(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":") and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v[1:] if v.startswith(" ") else v
        if "event" in fields:
            out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


async def settled(c: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """Follow the run's event stream (it ends once the run stops running); its detail then."""
    with anyio.fail_after(120):  # a hang guard only: the stream's end is the signal
        r = await c.get(f"{BASE}/runs/{run_id}/events", headers={"Accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    detail = (await c.get(f"{BASE}/runs/{run_id}")).json()
    assert detail["status"] not in ("running", "queued"), detail
    return detail


async def test_a_bad_schedule_is_a_422_naming_it_with_a_valid_example_and_its_next_five_fire_times(
        any_app: App) -> None:
    async with client(any_app) as c:
        r = await c.post(BASE, json={"name": "digest", "prompt": "Summarise", "schedule": "0 25 * * *"})
        assert r.status_code == 422 and r.json()["field"] == "schedule"
        message = r.json()["message"]
        assert message.startswith("schedule '0 25 * * *' is not a valid cron expression")
        assert "'0 7 * * 1-5'" in message and message.count("T07:00+00:00") == 5

        r = await c.get(f"{BASE}/schedule", params={"schedule": "0 7 * * 1-5", "timezone": "Europe/Paris"})
        assert r.status_code == 200
        assert r.json()["explain"].endswith("(Europe/Paris)") and len(r.json()["next"]) == 5
        r = await c.get(f"{BASE}/schedule", params={"schedule": "* * *"})
        assert r.status_code == 422 and r.json()["field"] == "schedule"
        r = await c.get(f"{BASE}/schedule", params={"schedule": "0 7 * * *", "timezone": "Nowhere/City"})
        assert r.status_code == 422 and r.json()["field"] == "timezone"
        assert (await c.get(BASE)).json() == []


async def test_add_list_get_patch_pause_and_delete_round_trip(any_app: App) -> None:
    async with client(any_app) as c:
        r = await c.post(BASE, json={
            "name": "morning", "prompt": "Summarise yesterday", "tools": ["search_notes"], "model": "echo",
            "schedule": "30 6 * * *", "timezone": "Europe/Paris", "budgets": {"max_cost": "0.25", "max_tool_calls": 7},
        })
        assert r.status_code == 201, r.text
        saved = r.json()
        assert saved["budgets"]["max_cost"] == "0.25" and saved["budgets"]["max_tool_calls"] == 7
        assert saved["warnings"] == [] and len(saved["upcoming"]) == 5
        listed = (await c.get(BASE)).json()
        assert [x["name"] for x in listed] == ["morning"] and listed[0]["spend_this_month"]["runs"] == 0
        by_name = (await c.get(f"{BASE}/morning")).json()
        assert by_name["id"] == saved["id"] and by_name["notes"] == []

        r = await c.patch(f"{BASE}/{saved['id']}", json={"budgets": {"max_cost": None}, "schedule": "manual"})
        assert r.status_code == 200, r.text
        assert r.json()["budgets"] == {**saved["budgets"], "max_cost": None}
        assert r.json()["next_fire"] is None and r.json()["tools"] == ["search_notes"]
        assert (await c.post(f"{BASE}/morning/pause")).json()["enabled"] is False
        assert (await c.post(f"{BASE}/morning/resume")).json()["enabled"] is True
        r = await c.post(f"{BASE}/morning/notes", json={"body": "Mention the garden"})
        assert r.status_code == 201 and r.json()["notes"][0]["body"] == "Mention the garden"

        assert (await c.delete(f"{BASE}/morning")).status_code == 204
        r = await c.get(f"{BASE}/morning")
        assert r.status_code == 404 and r.json()["error"] == "not_found"


async def test_a_run_started_here_is_followed_to_its_end_with_its_trace(any_app: App) -> None:
    any_app.workspace.create_note("Garden plan", "Plant tomatoes in May.")
    scripted(any_app, [{"tool_calls": [{"name": "search_notes", "arguments": {"query": "tomatoes"}}]},
                       {"chunks": ["Tomatoes ", "in May."]}])
    async with any_app.background(RECIPES), client(any_app) as c:
        await c.post(BASE, json={"name": "garden", "prompt": "What do I plan?", "tools": ["search_notes"],
                                 "model": "play:script"})
        r = await c.post(f"{BASE}/garden/runs")
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        detail = await settled(c, run_id)
        assert detail["status"] == "succeeded" and detail["output"] == "Tomatoes in May."
        assert detail["usage"]["input_tokens"] > 0
        [call] = detail["trace"]
        assert call["tool"] == "search_notes" and "Garden plan" in call["output"] and call["is_error"] is False

        events = (await c.get(f"{BASE}/runs/{run_id}/events")).json()
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1)) and events[-1]["kind"] == "done"
        later = (await c.get(f"{BASE}/runs/{run_id}/events", params={"after_seq": 2})).json()
        assert [e["seq"] for e in later] == [e["seq"] for e in events[2:]]
        streamed = sse((await c.get(f"{BASE}/runs/{run_id}/events", headers={"Accept": "text/event-stream",
                                                                               "Last-Event-ID": "1"})).text)
        assert [s[0] for s in streamed] == [e["seq"] for e in events[1:]]
        runs = (await c.get(f"{BASE}/garden/runs")).json()
        assert [x["run_id"] for x in runs] == [run_id]
        spend = (await c.get(f"{BASE}/garden/spend")).json()
        assert spend["month"]["runs"] == 1


async def test_without_a_runner_here_a_run_is_503(app: App) -> None:
    async with client(app) as c:
        await c.post(BASE, json={"name": "x", "prompt": "hi", "model": "echo"})
        r = await c.post(f"{BASE}/x/runs")
        assert r.status_code == 503 and r.json()["error"] == "unavailable"


async def test_a_run_parked_on_a_confirm_tool_is_pending_and_approved_through_the_api(any_app: App) -> None:
    note = any_app.workspace.create_note("Old list", "milk")
    any_app.registry.set_enabled(any_app.workspace, "delete_note", True)
    scripted(any_app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]},
                       {"text": "Deleted it."}])
    async with any_app.background(RECIPES), client(any_app) as c:
        await c.post(BASE, json={"name": "tidy", "prompt": "Delete the old list", "tools": ["delete_note"],
                                 "model": "play:script"})
        run_id = (await c.post(f"{BASE}/tidy/runs")).json()["run_id"]
        parked = await settled(c, run_id)
        assert parked["status"] == "awaiting_approval" and parked["held"]["tool"] == "delete_note"
        pending = (await c.get(f"{BASE}/pending")).json()
        assert [p["run_id"] for p in pending] == [run_id] and "Old list" in pending[0]["held"]["description"]

        r = await c.post(f"{BASE}/runs/{run_id}/decision", json={"decision": "approve"})
        assert r.status_code == 202, r.text
        done = await settled(c, run_id)
        assert done["status"] == "succeeded" and done["output"] == "Deleted it."
        assert [t.id for t in any_app.workspace.list_trash()] == [note.id]
        assert (await c.get(f"{BASE}/pending")).json() == []
        r = await c.post(f"{BASE}/runs/{run_id}/decision", json={"decision": "approve"})
        assert r.status_code == 422 and r.json()["field"] == "run_id"


async def test_stop_ends_a_running_run_cancelled_and_a_settled_one_says_so(any_app: App) -> None:
    scripted(any_app, [{"chunks": ["thinking about it"], "hang": True}])
    async with any_app.background(RECIPES), client(any_app) as c:
        await c.post(BASE, json={"name": "slow", "prompt": "Take your time", "model": "play:script"})
        run_id = (await c.post(f"{BASE}/slow/runs")).json()["run_id"]
        with anyio.fail_after(120):  # until the run has streamed its text, as a page would see it
            while not any(e["kind"] == "text" for e in (await c.get(f"{BASE}/runs/{run_id}/events")).json()):
                await anyio.sleep(0.02)
        again = (await c.post(f"{BASE}/slow/runs")).json()
        assert again["status"] == "skipped_overlap"
        r = await c.post(f"{BASE}/runs/{run_id}/stop")
        assert r.status_code == 200 and r.json()["stop_requested"] is True
        done = await settled(c, run_id)
        assert done["status"] == "cancelled"
        assert (await c.post(f"{BASE}/runs/{run_id}/stop")).json()["stop_requested"] is False


async def test_export_then_import_starts_paused(any_app: App) -> None:
    async with client(any_app) as c:
        await c.post(BASE, json={"name": "a", "prompt": "one", "schedule": "0 9 * * *"})
        r = await c.get(f"{BASE}/export")
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/yaml")
        text = r.text
        assert "name: a" in text
        await c.delete(f"{BASE}/a")
        r = await c.post(f"{BASE}/import", content=text.encode(), headers={"Content-Type": "application/yaml"})
        assert r.status_code == 201, r.text
        assert [(x["name"], x["enabled"]) for x in r.json()] == [("a", False)]
        r = await c.post(f"{BASE}/import", content=b"recipes: [{name: b, prompt: x, colour: red}]",
                         headers={"Content-Type": "application/yaml"})
        assert r.status_code == 422 and r.json()["field"] == "recipes[0].colour"
        r = await c.post(f"{BASE}/import", content=b"\xff\xfe", headers={"Content-Type": "application/yaml"})
        assert r.status_code == 422 and r.json()["field"] == "body"
        assert [x["name"] for x in (await c.get(BASE)).json()] == ["a"]


async def test_another_users_token_can_neither_see_nor_run_nor_stop_the_owners_recipes(any_app: App) -> None:
    scripted(any_app, [{"text": "done"}], loop=True)
    _, guest = second_user(any_app)
    async with any_app.background(RECIPES), client(any_app) as owner, client(any_app, guest) as other:
        saved = (await owner.post(BASE, json={"name": "mine", "prompt": "x", "model": "play:script"})).json()
        run_id = (await owner.post(f"{BASE}/mine/runs")).json()["run_id"]
        await settled(owner, run_id)
        assert (await other.get(BASE)).json() == []
        for method, path in [("GET", f"/{saved['id']}"), ("GET", "/mine"), ("POST", "/mine/runs"),
                             ("GET", "/mine/runs"), ("PATCH", "/mine"), ("DELETE", "/mine"),
                             ("GET", f"/runs/{run_id}"), ("POST", f"/runs/{run_id}/stop"),
                             ("GET", f"/runs/{run_id}/events")]:
            r = await other.request(method, BASE + path, json={} if method == "PATCH" else None)
            assert r.status_code == 404, (method, path, r.text)
        r = await other.put(f"{BASE}/cap", json={"tokens": 5})
        assert r.status_code == 403
        # The guest's own recipe of the same name is theirs alone.
        assert (await other.post(BASE, json={"name": "mine", "prompt": "y"})).status_code == 201
        assert (await owner.get(f"{BASE}/mine")).json()["prompt"] == "x"


async def test_bad_bodies_and_unknown_ids_are_4xx_naming_the_field(app: App) -> None:
    async with client(app) as c:
        async def field(method: str, path: str, body: Any = None, content: bytes | None = None) -> str:
            headers = {"Content-Type": "application/json"} if content is not None else None
            r = await c.request(method, BASE + path, json=body if content is None else None, content=content,
                                headers=headers)
            assert r.status_code == 422, (path, body, r.text)
            assert r.json()["message"].startswith(r.json()["field"])
            return str(r.json()["field"])

        assert await field("POST", "", {}) == "name"
        assert await field("POST", "", {"name": "x", "prompt": "p", "colour": "red"}) == "colour"
        assert await field("POST", "", {"name": "x", "prompt": "p", "batch_size": "many"}) == "batch_size"
        assert await field("POST", "", {"name": "x", "prompt": "p", "budgets": {"max_cost": -1}}) == "budgets.max_cost"
        assert await field("POST", "", {"name": "x", "prompt": "p", "controls": {"temperature": 9}}) == \
            "controls.temperature"
        assert await field("POST", "", {"name": "x", "mode": "agent"}) == "prompt"
        assert await field("POST", "", {"name": "x", "prompt": "p", "model": "nope:model"}) == "model"
        assert await field("POST", "", content=b'{"name": "x", "prompt": NaN}') == "prompt"
        assert await field("POST", "", content=b'{"name": ') == "body"
        assert await field("POST", "", {"name": "x", "prompt": "p", "tools": "search_notes"}) == "tools"
        assert await field("PUT", "/cap", {"tokens": 0}) == "tokens"
        assert await field("GET", "/runs/not-a-run") == "run_id"
        await c.post(BASE, json={"name": "ok", "prompt": "p"})
        assert await field("PATCH", "/ok", {"schedule": None}) == "schedule"
        assert await field("POST", "/ok/runs", {"sample": 0}) == "sample"
        assert await field("POST", "/runs/" + "a" * 32 + "/decision", {"decision": "maybe"}) == "decision"
        r = await c.get(f"{BASE}/runs/{'a' * 32}")
        assert r.status_code == 404 and "no recipe run" in r.json()["message"]
        r = await c.post(BASE, content=b"x" * (app.settings.limits.max_body_bytes + 1),
                         headers={"Content-Type": "application/json"})
        assert r.status_code == 413


async def test_the_openapi_document_lists_the_recipe_routes(app: App) -> None:
    async with client(app) as c:
        doc = (await c.get("/api/v1/openapi.json")).json()
    paths = {p: set(ops) for p, ops in doc["paths"].items() if p.startswith(BASE)}
    assert paths == {
        BASE: {"get", "post"}, f"{BASE}/jobs": {"get"}, f"{BASE}/options": {"get"}, f"{BASE}/schedule": {"get"},
        f"{BASE}/pending": {"get"},
        f"{BASE}/spend": {"get"}, f"{BASE}/cap": {"get", "put"}, f"{BASE}/export": {"get"},
        f"{BASE}/import": {"post"}, f"{BASE}/runs/{{run_id}}": {"get"}, f"{BASE}/runs/{{run_id}}/stop": {"post"},
        f"{BASE}/runs/{{run_id}}/decision": {"post"}, f"{BASE}/runs/{{run_id}}/events": {"get"},
        f"{BASE}/{{ref}}": {"get", "patch", "delete"}, f"{BASE}/{{ref}}/pause": {"post"},
        f"{BASE}/{{ref}}/resume": {"post"}, f"{BASE}/{{ref}}/runs": {"get", "post"}, f"{BASE}/{{ref}}/notes": {"post"},
        f"{BASE}/{{ref}}/items": {"get", "delete"}, f"{BASE}/{{ref}}/spend": {"get"},
    }
    assert doc["paths"][BASE]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/RecipeIn")
    assert "application/yaml" in doc["paths"][f"{BASE}/import"]["post"]["requestBody"]["content"]
    assert all("recipes" in op["tags"] for p, ops in doc["paths"].items() if p.startswith(BASE) for op in ops.values())




async def test_the_form_options_list_every_tool_with_its_effect_enablement_and_taint_and_the_defaults(
    app: App,
) -> None:
    app.registry.set_enabled(app.workspace, "delete_note", True)
    async with client(app) as c:
        r = await c.get(f"{BASE}/options")
    assert r.status_code == 200
    data = r.json()
    tools = {t["name"]: t for t in data["tools"]}
    assert {n for n in tools} == {t.name for t in app.registry.all()}
    assert (tools["delete_note"]["effect"], tools["delete_note"]["enabled"]) == ("destructive", True)
    assert (tools["update_note"]["effect"], tools["update_note"]["enabled"]) == ("write", False)
    assert tools["search_notes"]["untrusted_output"] is True and tools["list_tags"]["untrusted_output"] is False
    assert data["recipe_tools"] == ["get_workspace", "set_workspace", "get_recent_outputs", "add_recipe_note"]
    assert data["defaults"]["budgets"] == {"max_input_tokens": 200000, "max_output_tokens": 20000, "max_cost": None,
                                           "max_tool_calls": 50, "time_limit": 900.0}
    assert "name" not in data["defaults"] and data["defaults"]["schedule"] == "manual"
