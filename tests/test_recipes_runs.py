"""Recipe runs in agent mode: the run record, the trace, budgets, stop, approval, retries,
self-pause, the taint gate and the workspace's monthly cap."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import anyio
import pytest

from noteloom import db
from noteloom.app import App
from noteloom.errors import InvalidInput
from noteloom.recipes import store
from noteloom.recipes import tables as t
from noteloom.runs import tables as rt
from recipe_support import running, scripted, service, settled, until_event

pytestmark = pytest.mark.anyio


def _recipe(app: App, name: str = "digest", **fields: Any) -> dict[str, Any]:
    owner = app.workspace.ensure_owner()
    if "play" not in app.services.providers.names():  # a test that runs nothing scripts nothing
        scripted(app, [])
    spec: dict[str, Any] = {"name": name, "prompt": "Summarise yesterday's notes.", "model": "play",
                            "tools": ["search_notes"]}
    spec.update(fields)
    return service(app).add(owner, spec)


def _notifications(app: App) -> list[tuple[str, str]]:
    with db.read_tx(app.engine) as c:
        rows = c.execute(t.notifications.select().order_by(t.notifications.c.created_time)).all()
    return [(r.kind, r.title) for r in rows]


async def test_a_run_records_its_trigger_model_tokens_trace_and_output(app: App) -> None:
    app.workspace.create_note("Standup", "Ship the importer on Friday.")
    scripted(app, [
        {"text": "Looking.", "tool_calls": [{"name": "search_notes", "arguments": {"query": "importer"}}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "Yesterday: the importer ships Friday.", "usage": {"input_tokens": 150, "output_tokens": 12}},
    ])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "succeeded", run
    assert run["trigger"] == "manual" and run["mode"] == "agent"
    assert run["model"] == "play:script"
    assert run["output"].endswith("Yesterday: the importer ships Friday.")
    assert run["usage"] == {"input_tokens": 250, "output_tokens": 22}
    assert run["error"] is None and run["finished_time"] is not None
    [call] = run["trace"]
    assert call["tool"] == "search_notes" and call["input"] == {"query": "importer"}
    assert call["is_error"] is False and "Standup" in call["output"]
    assert call["started_time"] <= call["finished_time"]
    assert run["tool_calls"] == 1


async def test_only_the_recipes_tools_are_offered_and_unknown_ones_are_said_in_the_trace(app: App) -> None:
    seen: list[list[str]] = []

    def step(request: Any) -> dict[str, Any]:
        seen.append(sorted(s.name for s in request.tools))
        return {"text": "Nothing to report."}

    scripted(app, [step])
    _recipe(app, tools=["list_tags", "no_such_tool", "delete_note"])
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "succeeded"
    # delete_note is not enabled in the workspace; the recipe-only tools are always there.
    assert seen == [["add_recipe_note", "get_recent_outputs", "get_workspace", "list_tags", "set_workspace"]]
    assert any("'no_such_tool'" in n and "no such tool" in n for n in run["notes"])
    assert any("'delete_note'" in n and "not enabled" in n for n in run["notes"])


async def test_saving_warns_of_tools_the_app_does_not_have(app: App) -> None:
    saved = _recipe(app, tools=["search_notes", "from_a_plugin_gone"])
    assert any("from_a_plugin_gone" in w for w in saved["warnings"])


async def test_the_scratch_workspace_and_earlier_outputs_carry_over_between_runs(app: App) -> None:
    scripted(app, [
        {"tool_calls": [{"name": "get_workspace", "arguments": {}}]},
        {"tool_calls": [{"name": "set_workspace", "arguments": {"text": "seen: note A"}}]},
        {"text": "First report."},
        {"tool_calls": [{"name": "get_workspace", "arguments": {}},
                        {"name": "get_recent_outputs", "arguments": {"count": 2}}]},
        {"text": "Second report."},
    ])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        first = await service(app).run_now(owner, "digest")
        second = await service(app).run_now(owner, "digest")
    assert first["status"] == second["status"] == "succeeded"
    assert json.loads(first["trace"][0]["output"])["workspace"] == ""
    read, outputs = second["trace"]
    assert json.loads(read["output"])["workspace"] == "seen: note A"
    assert [o["output"] for o in json.loads(outputs["output"])["outputs"]] == ["First report."]
    assert service(app).get(owner, "digest")["scratch"] == "seen: note A"


async def test_recipe_notes_reach_the_prompt_and_the_agent_can_answer(app: App) -> None:
    prompts: list[str] = []

    def step(request: Any) -> dict[str, Any]:
        prompts.append(" ".join(b.text for b in request.system))
        return {"tool_calls": [{"name": "add_recipe_note", "arguments": {"text": "Will do from tomorrow."}}]}

    scripted(app, [step, {"text": "Report."}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    service(app).add_note(owner, "digest", "Please also list open to-dos.")
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "succeeded"
    assert "Please also list open to-dos." in prompts[0]
    notes = service(app).get(owner, "digest")["notes"]
    assert [(n["author"], n["body"]) for n in notes] == [
        ("user", "Please also list open to-dos."), ("recipe", "Will do from tomorrow.")]


async def test_a_confirm_tool_parks_the_run_until_approved_then_it_goes_on(app: App) -> None:
    note = app.workspace.create_note("Old list", "- socks")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [
        {"text": "Cleaning up.", "tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]},
        {"text": "Moved the old list to the trash."},
    ])
    _recipe(app, tools=["list_tags", "delete_note"])
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
        assert run["status"] == "awaiting_approval", run
        assert run["held"]["tool"] == "delete_note" and "Old list" in run["held"]["description"]
        assert app.workspace.get_note(note.id).deleted_time is None  # nothing happened yet
        [pending] = service(app).pending(owner)
        assert pending["run_id"] == run["run_id"]
        assert ("approval", "Recipe 'digest' waits for your approval") in _notifications(app)
        await service(app).decide(owner, run["run_id"], "approve")
        done = await settled(app, owner, run["run_id"])
    assert done["status"] == "succeeded", done
    assert done["output"].endswith("Moved the old list to the trash.")
    assert app.workspace.get_note(note.id, include_deleted=True).deleted_time is not None
    assert [(c["tool"], c["outcome"]) for c in done["trace"]] == [("delete_note", "ok")]  # once, as it ran
    assert service(app).pending(owner) == []


async def test_a_declined_call_is_not_made_and_the_run_finishes(app: App) -> None:
    note = app.workspace.create_note("Keep me", "x")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}, {"text": "Left it."}])
    _recipe(app, tools=["delete_note"])
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
        await service(app).decide(owner, run["run_id"], "decline")
        done = await settled(app, owner, run["run_id"])
    assert done["status"] == "succeeded" and done["output"] == "Left it."
    assert app.workspace.get_note(note.id).deleted_time is None


async def test_a_recipe_signed_off_for_a_tool_runs_it_unattended(app: App) -> None:
    note = app.workspace.create_note("Old list", "- socks")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}, {"text": "Done."}])
    _recipe(app, tools=["delete_note"], signed_off=["delete_note"])
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "succeeded"
    assert app.workspace.get_note(note.id, include_deleted=True).deleted_time is not None


async def test_a_deny_policy_still_wins_over_a_sign_off(app: App) -> None:
    from noteloom.policy import set_policy

    note = app.workspace.create_note("Old list", "- socks")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    set_policy(app.workspace, "delete_note", "deny")
    scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}, {"text": "Could not."}])
    _recipe(app, tools=["delete_note"], signed_off=["delete_note"])
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "succeeded"
    assert run["trace"][0]["outcome"] == "denied"
    assert app.workspace.get_note(note.id).deleted_time is None


async def test_the_tool_call_ceiling_ends_the_run_before_the_call_that_would_pass_it(app: App) -> None:
    scripted(app, [
        {"tool_calls": [{"name": "search_notes", "arguments": {"query": "a"}}]},
        {"tool_calls": [{"name": "search_notes", "arguments": {"query": "b"}},
                        {"name": "search_notes", "arguments": {"query": "c"}}]},
        {"text": "never reached"},
    ])
    _recipe(app, budgets={"max_tool_calls": 2})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "budget_exceeded"
    assert run["error"].startswith("[max_tool_calls]")
    ran = [c for c in run["trace"] if c["outcome"] == "ok"]
    assert [c["input"]["query"] for c in ran] == ["a"]  # the batch of two was answered "not run"
    assert ("budget", "Recipe 'digest' budget exceeded") in _notifications(app)


async def test_the_output_token_ceiling_caps_each_call_and_ends_the_run(app: App) -> None:
    limits: list[int | None] = []

    def step(request: Any) -> dict[str, Any]:
        limits.append(request.max_tokens)
        return {"tool_calls": [{"name": "search_notes", "arguments": {"query": "x"}}],
                "usage": {"input_tokens": 10, "output_tokens": 60}}

    scripted(app, [step], loop=True)
    _recipe(app, budgets={"max_output_tokens": 100})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "budget_exceeded" and run["error"].startswith("[max_output_tokens]")
    assert limits == [100, 40]  # the second call may write only what is left
    assert run["usage"]["output_tokens"] == 120


async def test_the_input_token_ceiling_stops_before_a_call_that_would_pass_it(app: App) -> None:
    calls = 0

    def step(request: Any) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"tool_calls": [{"name": "search_notes", "arguments": {"query": "x" * 4000}}],
                "usage": {"input_tokens": 900, "output_tokens": 5}}

    scripted(app, [step], loop=True)
    _recipe(app, budgets={"max_input_tokens": 1500})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "budget_exceeded" and run["error"].startswith("[max_input_tokens]")
    assert calls == 1
    assert run["usage"]["input_tokens"] <= 1500


async def test_the_cost_ceiling_is_checked_against_the_next_calls_worst_case(app: App) -> None:
    limits: list[int | None] = []

    def step(request: Any) -> dict[str, Any]:  # a model that writes as much as it may, at most 1000
        limits.append(request.max_tokens)
        return {"tool_calls": [{"name": "search_notes", "arguments": {"query": "x"}}],
                "usage": {"input_tokens": 10, "output_tokens": min(1000, request.max_tokens or 1000)}}

    # $0.001 a token: a call of 1000 output tokens costs a dollar.
    scripted(app, [step], loop=True, prices={"script": {"input": 1000.0, "output": 1000.0}})
    _recipe(app, budgets={"max_cost": "2.5", "max_output_tokens": None})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "budget_exceeded" and run["error"].startswith("[max_cost]")
    assert Decimal(run["cost_usd"]) <= Decimal("2.5")
    assert limits[-1] is not None and limits[-1] < 1000  # the last call was cut to what was left


async def test_stop_ends_a_run_mid_generation_keeping_its_partial_output(app: App) -> None:
    scripted(app, [
        {"tool_calls": [{"name": "search_notes", "arguments": {"query": "x"}}]},
        {"chunks": ["Half of ", "the report"], "hang": True},
    ])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        started = await service(app).start(owner, "digest")
        run_id = started["run_id"]
        await until_event(app, owner, run_id, "text")
        stopped = await service(app).stop(owner, run_id)
        assert stopped["stop_requested"] is True
        done = await settled(app, owner, run_id)
    assert done["status"] == "cancelled", done
    assert done["error"] == "[cancelled] stopped by its owner"
    assert [c["tool"] for c in done["trace"]] == ["search_notes"]
    assert "Half of" in (done["output"] or "")


async def test_a_second_start_while_a_run_is_in_progress_is_recorded_as_skipped_overlap(app: App) -> None:
    scripted(app, [{"chunks": ["..."], "hang": True}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        first = await service(app).start(owner, "digest")
        second = await service(app).start(owner, "digest")
        assert second["status"] == "skipped_overlap"
        assert first["run_id"] in second["error"]
        await service(app).stop(owner, first["run_id"])
        await settled(app, owner, first["run_id"])
    statuses = [r["status"] for r in service(app).runs(owner, "digest")]
    assert sorted(statuses) == ["cancelled", "skipped_overlap"]


async def test_a_transient_failure_is_retried_once(app: App) -> None:
    delays: list[tuple[int, bool]] = []
    scripted(app, [{"error": "api_rate_limited"}, {"text": "Fine now."}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app, retry_delay=lambda a, r: delays.append((a, r)) or 0.0):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "succeeded" and run["output"] == "Fine now."
    assert delays == [(1, True)]


async def test_a_failure_that_persists_fails_the_run_with_its_classified_error(app: App) -> None:
    scripted(app, [{"error": "api_server_error"}, {"error": "api_server_error"}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "failed"
    assert run["error"].startswith("[api_server_error] ")
    assert ("failure", "Recipe 'digest' failed") in _notifications(app)


async def test_a_recipe_pauses_itself_after_its_failures_in_a_row_and_says_so(app: App) -> None:
    scripted(app, [{"error": "api_auth_failed"}], loop=True)
    _recipe(app, pause_after=2, schedule="0 7 * * *")
    owner = app.workspace.ensure_owner()
    async with running(app):
        await service(app).run_now(owner, "digest")
        assert service(app).get(owner, "digest")["enabled"] is True
        await service(app).run_now(owner, "digest")
    recipe = service(app).get(owner, "digest")
    assert recipe["enabled"] is False and recipe["next_fire_time"] is None
    assert "paused after 2 failed runs in a row" in recipe["paused_reason"]
    assert ("paused", "Recipe 'digest' paused itself") in _notifications(app)
    resumed = service(app).resume(owner, "digest")
    assert resumed["enabled"] and resumed["failures"] == 0 and resumed["paused_reason"] is None
    assert resumed["next_fire_time"] is not None


async def test_a_success_resets_the_failure_count(app: App) -> None:
    scripted(app, [{"error": "api_auth_failed"}, {"text": "ok"}])
    _recipe(app, pause_after=2)
    owner = app.workspace.ensure_owner()
    async with running(app):
        await service(app).run_now(owner, "digest")
        assert service(app).get(owner, "digest")["failures"] == 1
        await service(app).run_now(owner, "digest")
    assert service(app).get(owner, "digest")["failures"] == 0


async def test_the_taint_gate_needs_an_acknowledgment_to_save_and_records_who_gave_it(app: App) -> None:
    with pytest.raises(InvalidInput) as refused:
        _recipe(app, tools=["read_note", "delete_note"])
    assert refused.value.field == "allow_tainted_writes"
    assert "read_note" in str(refused.value) and "delete_note" in str(refused.value)
    saved = _recipe(app, tools=["read_note", "delete_note"], allow_tainted_writes=True)
    owner = app.workspace.ensure_owner()
    assert saved["tainted_ack"]["user_id"] == owner.id
    # Taking the acknowledgment back is refused while the tools stay.
    with pytest.raises(InvalidInput):
        service(app).edit(owner, "digest", {"allow_tainted_writes": False})


async def test_a_tainted_recipe_without_acknowledgment_does_not_run(app: App) -> None:
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [{"text": "should not run"}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    # Saved before the writing tool joined (a plugin's tool could start reading clips later).
    with db.write_tx(app.engine) as c:
        c.execute(t.recipes.update().values(tools=["read_note", "delete_note"]))
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "failed" and run["error"].startswith("[taint_gate]")


async def test_the_monthly_cap_stops_recipe_runs_and_says_why(app: App) -> None:
    scripted(app, [{"text": "one", "usage": {"input_tokens": 600, "output_tokens": 500}}, {"text": "two"}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    service(app).set_cap(tokens=1000)
    async with running(app):
        first = await service(app).run_now(owner, "digest")
        second = await service(app).run_now(owner, "digest")
    assert first["status"] == "succeeded"
    assert second["status"] == "budget_exceeded"
    assert second["error"].startswith("[workspace_cap] the workspace's monthly cap of 1000 tokens is reached")
    kinds = [k for k, _ in _notifications(app)]
    assert kinds.count("budget") == 2  # the 80 % alert once, then the refused run


async def test_a_run_of_a_reaped_process_is_failed_and_counted(app: App) -> None:
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app) as runner:
        with db.write_tx(app.engine) as c:
            recipe = store.find(c, owner.id, "digest")
            run_id, launch = runner.begin(c, recipe, trigger="manual")
            # As a process that died would leave it: running, by a runner that is gone.
            c.execute(rt.runs.update().where(rt.runs.c.id == run_id).values(runner_id="f" * 32, heartbeat_time=0))
        assert launch
        reaped = await anyio.to_thread.run_sync(runner.engine.reap, db.now_ms())
    assert reaped == [run_id]
    run = service(app).run(owner, run_id)
    assert run["status"] == "failed" and run["error"].startswith("[interrupted]")
    assert service(app).get(owner, "digest")["failures"] == 1


async def test_the_monthly_cap_counts_chat_turns_and_recipe_runs_together_and_stops_both(app: App) -> None:
    from chat_support import running_chat, settle

    scripted(app, [{"text": "chatted", "usage": {"input_tokens": 900, "output_tokens": 200}}, {"text": "no"}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    service(app).set_cap(tokens=1000)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "hello", controls={"model": "play"})
        first = await settle(chat, owner, sent.message_id)
        assert first["status"] == "complete"
        again = await chat.send(owner, "and again", controls={"model": "play"})
        refused = await settle(chat, owner, again.message_id)
    assert refused["status"] == "failed"
    assert refused["error"]["code"] == "workspace_cap"
    assert "monthly cap of 1000 tokens is reached" in refused["error"]["message"]
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "budget_exceeded" and run["error"].startswith("[workspace_cap]")
    assert service(app).spend(owner)["month"]["by_kind"]["chat_turn"]["input_tokens"] == 900


async def test_a_run_past_its_time_limit_ends_as_timeout_with_its_partial_trace(app: App) -> None:
    scripted(app, [{"tool_calls": [{"name": "search_notes", "arguments": {"query": "x"}}]},
                   {"chunks": ["Still writing"], "hang": True}])
    _recipe(app, budgets={"time_limit": 1})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "digest")
    assert run["status"] == "timeout" and run["error"].startswith("[time_limit]")
    assert [c["tool"] for c in run["trace"]] == ["search_notes"]


async def test_a_model_whose_provider_needs_a_key_not_set_here_is_saved_with_a_warning(app: App) -> None:
    owner = app.workspace.ensure_owner()
    providers = app.services.providers
    keyed = next(name for name, kind in providers.types.items() if kind.key_env and name not in providers.names())
    saved = service(app).add(owner, {"name": "later", "prompt": "x", "model": f"{keyed}:some-model"})
    assert any(providers.types[keyed].key_env in w for w in saved["warnings"])
    with pytest.raises(InvalidInput) as refused:
        service(app).add(owner, {"name": "never", "prompt": "x", "model": "nosuchprovider:m"})
    assert refused.value.field == "model"


async def test_what_a_run_tells_its_owner_reaches_the_notification_channels_even_for_a_reaped_run(
    app: App,
) -> None:
    from noteloom.plugins import Notification, hookimpl

    got: list[Notification] = []

    class Recorder:
        name = "recorder"

        async def send(self, notification: Notification) -> None:
            got.append(notification)

    class Plugin:
        @hookimpl
        def register_notification_channels(self, register: Any) -> None:
            register(Recorder())

    app.plugins.register(Plugin())
    scripted(app, [{"error": "api_auth_failed"}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app) as runner:
        run = await service(app).run_now(owner, "digest")
        assert run["status"] == "failed"
        assert [(n.kind, n.run_id) for n in got] == [("failure", run["run_id"])]  # sent once the end committed
        with db.write_tx(app.engine) as c:
            recipe = store.find(c, owner.id, "digest")
            reaped_id, _ = runner.begin(c, recipe, trigger="manual")
            c.execute(rt.runs.update().where(rt.runs.c.id == reaped_id).values(runner_id="f" * 32, heartbeat_time=0))
        assert await anyio.to_thread.run_sync(runner.engine.reap, db.now_ms()) == [reaped_id]
        with anyio.fail_after(60):  # bounds a delivery that never comes; the sweep looks every 2 s
            while len(got) < 2:
                await anyio.sleep(0.05)
    assert [(n.kind, n.run_id) for n in got][1] == ("failure", reaped_id)
