"""``create_recipe``: a recipe made from the chat through a confirmation card that shows the
parsed schedule, its next five fire times and the budget."""

from __future__ import annotations

import re

import pytest

from chat_support import running_chat, scripted, settle
from noteloom.app import App

pytestmark = pytest.mark.anyio

ASKED = {"name": "Morning digest", "prompt": "Summarise yesterday's notes in five bullets.",
         "schedule": "0 7 * * 1-5", "timezone": "Europe/Paris", "tools": ["search_notes", "read_note"],
         "max_cost": 0.05}


async def test_every_weekday_at_7_becomes_a_recipe_after_the_user_signs_the_card(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    app.registry.set_enabled(app.workspace, "create_recipe", True)
    scripted(app, [
        {"text": "I'll set that up.", "tool_calls": [{"name": "create_recipe", "arguments": ASKED}]},
        {"text": "Done: it runs at 07:00 on weekdays."},
    ])
    assert app.services.recipes is not None
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "every weekday at 7 make me a digest of yesterday's notes",
                               controls={"model": "play:script"})
        parked = await settle(chat, owner, sent.message_id)
        assert parked["status"] == "awaiting_confirmation"
        card = parked["pending_action"]["description"]
        assert "At 07:00 on Monday through Friday (Europe/Paris)" in card
        assert len(re.findall(r"\d{4}-\d\d-\d\dT07:00\+0[12]:00", card)) == 5  # its next five fire times
        assert "$0.05 per run" in card and "output tokens" in card
        assert app.services.recipes.listing(owner) == []  # nothing saved before the sign-off
        await chat.confirm(owner, sent.message_id, "approve")
        view = await settle(chat, owner, sent.message_id)
    assert view["status"] == "complete"
    [recipe] = app.services.recipes.listing(owner)
    assert (recipe["name"], recipe["schedule"], recipe["timezone"]) == ("Morning digest", "0 7 * * 1-5",
                                                                        "Europe/Paris")
    assert recipe["tools"] == ["search_notes", "read_note"] and recipe["budgets"]["max_cost"] == "0.05"
    assert recipe["next_fire_time"] is not None


async def test_a_cron_the_model_got_wrong_comes_back_to_it_as_an_error_it_can_correct(app: App) -> None:
    owner = app.workspace.ensure_owner()
    app.registry.set_enabled(app.workspace, "create_recipe", True)
    bad = {**ASKED, "schedule": "at 7 on weekdays"}
    scripted(app, [
        {"tool_calls": [{"id": "c1", "name": "create_recipe", "arguments": bad}]},
        {"tool_calls": [{"id": "c2", "name": "create_recipe", "arguments": ASKED}]},
        {"text": "Saved."},
    ])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "weekday digest at 7", controls={"model": "play:script",
                                                                        "tool_policies": {"create_recipe": "auto"}})
        view = await settle(chat, owner, sent.message_id)
    assert view["status"] == "complete"
    first, second = view["tool_calls"]
    assert first["status"] == "error" and "not a valid cron expression" in first["result"]
    assert second["status"] == "done"
    assert [r["name"] for r in app.services.recipes.listing(owner)] == ["Morning digest"]  # type: ignore[union-attr]


def test_create_recipe_is_off_until_the_user_enables_it(app: App) -> None:
    assert "create_recipe" not in [t.name for t in app.registry.enabled(app.workspace)]


async def test_the_chat_starts_a_recipe_by_name_as_a_chat_triggered_run(app: App) -> None:
    from recipe_support import running, service, settled

    owner = app.workspace.ensure_owner()
    app.registry.set_enabled(app.workspace, "run_recipe", True)
    # The chat and the recipe's run each have a model of their own: they run at the same time.
    scripted(app, [{"tool_calls": [{"id": "c1", "name": "run_recipe", "arguments": {"name": "Ad hoc"}}]},
                   {"text": "Started it."}])
    scripted(app, [{"text": "The recipe's report."}], name="recipe")
    service(app).add(owner, {"name": "Ad hoc", "prompt": "Report.", "model": "recipe:script",
                             "schedule": "interactive"})
    async with running(app), running_chat(app) as chat:
        sent = await chat.send(owner, "run my ad hoc recipe", controls={"model": "play:script",
                                                                         "tool_policies": {"run_recipe": "auto"}})
        view = await settle(chat, owner, sent.message_id)
        assert view["status"] == "complete"
        [run] = service(app).runs(owner, "Ad hoc")
        done = await settled(app, owner, run["run_id"])
    assert done["trigger"] == "chat" and done["status"] == "succeeded"
    assert done["output"] == "The recipe's report."
