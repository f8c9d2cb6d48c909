"""Budgets of a turn: steps, output tokens, cost (priced by the next call's worst case) and
a wall-clock limit; where they come from (command line or conversation → [agent] →
run-time settings → defaults); the activity line that names the model."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

import test_cli_chat
from chat_support import collect, running_chat, scripted, settle
from llm_support import Ledger, standard_tools
from noteloom.agent import (
    MIN_CALL_TOKENS,
    UNKNOWN_MAX_TOKENS,
    ActivityEvent,
    Budgets,
    DoneEvent,
    RunEvent,
    RunOptions,
    RunResult,
    UsageEvent,
    run,
)
from noteloom.app import App, access_token, open_app
from noteloom.chat import ChatService
from noteloom.chat.conversations import Conversations
from noteloom.chat.records import Controls
from noteloom.cli import chat_cmds
from noteloom.config import load_settings
from noteloom.errors import ConfigError, InvalidInput
from noteloom.messages import Message, TextPart
from noteloom.providers.anthropic import AnthropicProvider
from noteloom.providers.base import (
    ModelRequest,
    ProviderConfig,
    ToolSpec,
    call_max_output,
    estimate_input_tokens,
)
from noteloom.providers.openai_compat import OpenAICompatProvider
from noteloom.providers.scripted import ScriptedProvider
from noteloom.tools import ToolContext, ToolDef
from noteloom.web.app import create_web_app
from test_cli_chat import Invoke, Recorder

pytestmark = pytest.mark.anyio
ASK = [Message.user("please help")]
#: $1 per million input tokens, $9 per million output tokens.
PRICES = {"script": {"input": 1.0, "output": 9.0}}
ADD = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}],
       "usage": {"input_tokens": 1000, "output_tokens": 1000}}  # costs $0.010


class Turn:
    def __init__(self, app: App, steps: list[Any], **provider: Any) -> None:
        self.app = app
        self.ledger = Ledger()
        self.tools: list[ToolDef] = list(standard_tools(self.ledger).values())
        self.provider = ScriptedProvider(steps=steps, **provider)
        self.events: list[RunEvent] = []

    async def on_event(self, event: RunEvent) -> None:
        self.events.append(event)

    async def run(self, options: RunOptions | None = None, tools: list[ToolDef] | None = None) -> RunResult:
        with anyio.fail_after(30):  # a safety net only
            return await run(self.provider, "script", "You help.", ASK, self.tools if tools is None else tools,
                             self.app.tool_context(), options, on_event=self.on_event)

    @property
    def done(self) -> DoneEvent:
        last = self.events[-1]
        assert isinstance(last, DoneEvent)
        return last


def worst_case(request: ModelRequest) -> Decimal:
    assert request.max_tokens is not None
    return (estimate_input_tokens(request) * Decimal(1) + request.max_tokens * Decimal(9)) / Decimal(1_000_000)


async def test_a_call_the_rest_of_the_budget_cannot_pay_for_is_never_made(app: App) -> None:
    turn = Turn(app, [ADD], loop=True, prices=PRICES)
    result = await turn.run(RunOptions(max_cost=Decimal("0.011"), max_tokens=1000))
    # $0.001 is left after the first call: not even MIN_CALL_TOKENS of output fit.
    assert result.stop_reason == "budget_exceeded" and result.limit == "max_cost"
    assert turn.done.reason == "budget_exceeded" and turn.done.limit == "max_cost"
    assert len(turn.provider.requests) == 1 and result.steps == 1
    assert result.cost == Decimal("0.010") and result.cost <= Decimal("0.011")
    # The call's tool ran; the budget stops the turn before the next model call, not after it.
    assert turn.ledger.names() == ["add"]


async def test_the_next_calls_output_limit_is_lowered_to_what_the_budget_affords(app: App) -> None:
    turn = Turn(app, [ADD, {"text": "done", "usage": {"input_tokens": 10, "output_tokens": 10}}], prices=PRICES)
    result = await turn.run(RunOptions(max_cost=Decimal("0.015"), max_tokens=1000))
    assert result.stop_reason == "end_turn"
    first, second = turn.provider.requests
    assert first.max_tokens == 1000  # its worst case fits the whole budget
    assert second.max_tokens is not None and MIN_CALL_TOKENS <= second.max_tokens < 1000
    left = Decimal("0.015") - Decimal("0.010")
    assert worst_case(second) <= left
    # One token more would not have fitted: the limit is the most the budget affords.
    assert worst_case(ModelRequest(second.model, second.messages, second.system, second.tools,
                                   max_tokens=second.max_tokens + 1)) > left


async def test_with_no_known_output_limit_a_priced_call_gets_one_that_fits_the_budget(app: App) -> None:
    turn = Turn(app, [{"text": "hi", "usage": {"input_tokens": 10, "output_tokens": 10}}], prices=PRICES)
    await turn.run(RunOptions(max_cost=Decimal("0.05")))
    (request,) = turn.provider.requests
    assert request.max_tokens is not None and worst_case(request) <= Decimal("0.05")
    assert request.max_tokens > 5000  # about all of the $0.05: 5,555 tokens at $9 per million
    # A budget that would afford more than any model writes: the limit stays one every model takes.
    rich = Turn(app, [{"text": "hi", "usage": {"input_tokens": 10, "output_tokens": 10}}], prices=PRICES)
    await rich.run(RunOptions(max_cost=Decimal("100")))
    assert rich.provider.requests[0].max_tokens == UNKNOWN_MAX_TOKENS


async def test_free_and_unpriced_calls_are_never_limited_by_a_cost_budget(app: App) -> None:
    free = Turn(app, [{"text": "hi"}])
    assert (await free.run(RunOptions(max_cost=Decimal("0.000001")))).stop_reason == "end_turn"
    assert free.provider.requests[0].max_tokens is None
    unknown = Turn(app, [{"text": "hi"}], prices={"another-model": {"input": 1.0}})
    result = await unknown.run(RunOptions(max_cost=Decimal("0.000001")))
    assert result.stop_reason == "end_turn" and result.cost is None


async def test_a_stream_running_past_the_time_limit_is_cut_and_the_turn_stops(app: App) -> None:
    turn = Turn(app, [{"chunks": ["Thinking ", "hard"], "hang": True}, {"text": "never"}])
    result = await turn.run(RunOptions(time_limit=0.2))
    assert result.stop_reason == "budget_exceeded" and result.limit == "time_limit"
    assert turn.done.limit == "time_limit"
    # The text streamed before the cut is kept, and no further call is made.
    assert result.messages == [Message("assistant", (TextPart("Thinking hard"),))]
    assert len(turn.provider.requests) == 1


async def test_a_time_limit_reached_in_a_tool_stops_the_turn_before_the_next_model_call(app: App) -> None:
    async def slow(ctx: ToolContext, args: dict[str, Any]) -> Any:
        await anyio.sleep(0.5)  # longer than the limit: the limit has passed when it returns
        return {"ok": True}

    tool = ToolDef("slow", "Takes its time.", {"type": "object", "properties": {}}, slow, effect="read")
    turn = Turn(app, [{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "never"}])
    result = await turn.run(RunOptions(time_limit=0.1), tools=[tool])
    assert result.stop_reason == "budget_exceeded" and result.limit == "time_limit"
    assert len(turn.provider.requests) == 1
    assert result.messages[-1].tool_results[0].content == '{"ok": true}'


async def test_the_activity_line_names_the_model_it_waits_for(app: App) -> None:
    turn = Turn(app, [{"text": "hi"}])
    await turn.run()
    labels = [e.label for e in turn.events if isinstance(e, ActivityEvent)]
    assert labels[0] == "Waiting for script…"
    assert [e.kind for e in turn.events].index("activity") < [e.kind for e in turn.events].index("text_delta")


async def test_the_step_limit_names_itself_in_the_done_event(app: App) -> None:
    turn = Turn(app, [ADD], loop=True)
    result = await turn.run(RunOptions(max_steps=2))
    assert result.stop_reason == "max_steps" and turn.done.limit == "max_steps"


async def test_a_paid_private_provider_trips_the_budget_like_any_other(app: App) -> None:
    turn = Turn(app, [ADD], loop=True, prices=PRICES, local=True)
    result = await turn.run(RunOptions(max_cost=Decimal("0.025")))
    assert result.stop_reason == "budget_exceeded" and result.limit == "max_cost"
    totals = [e.total_cost for e in turn.events if isinstance(e, UsageEvent)]
    assert totals[0] == Decimal("0.010") and result.cost is not None and result.cost > 0


# -- where the budgets come from -----------------------------------------------------------


def test_the_agent_table_is_read_and_checked_with_the_setting_named() -> None:
    file = {"agent": {"max_steps": 4, "max_output_tokens": 900, "max_cost": 0.25, "time_limit": 120}}
    assert Budgets.from_file(file) == Budgets(4, 900, Decimal("0.25"), 120.0)
    assert Budgets.from_file({}) == Budgets()
    for bad, name in (({"max_steps": 0}, "max_steps"), ({"max_cost": -1}, "max_cost"),
                      ({"max_cost": "lots"}, "max_cost"), ({"time_limit": True}, "time_limit"),
                      ({"max_output_tokens": 1.5}, "max_output_tokens"), ({"max_step": 3}, "max_step")):
        with pytest.raises(ConfigError, match=rf"\[agent\].*{name}"):
            Budgets.from_file({"agent": bad})


def test_run_options_win_over_the_file_which_fills_what_they_leave() -> None:
    file = Budgets.from_file({"agent": {"max_steps": 4, "max_cost": 0.25, "time_limit": 60}})
    options = file.options(RunOptions(max_cost=Decimal("0.10"), max_tokens=500))
    assert (options.max_steps, options.max_cost, options.time_limit, options.max_output_tokens) == (
        4, Decimal("0.10"), 60.0, None)
    assert options.max_tokens == 500


async def test_the_file_budget_wins_over_the_run_time_setting_and_the_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text("[agent]\nmax_steps = 3\n")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        app.workspace.set_setting("agent.max_steps", 5)
        budgets = Budgets.from_file(app.settings.file)
        turn = Turn(app, [ADD], loop=True)
        assert (await turn.run(budgets.options(RunOptions()))).steps == 3
        turn = Turn(app, [ADD], loop=True)
        assert (await turn.run(budgets.options(RunOptions(max_steps=2)))).steps == 2
        turn = Turn(app, [ADD], loop=True)
        assert (await turn.run(Budgets().options(RunOptions()))).steps == 5  # no [agent]: the setting
    finally:
        app.close()


# -- the output limit a provider will send -------------------------------------------------


def test_the_worst_case_output_is_what_the_adapter_sends_else_the_requests_limit() -> None:
    claude = AnthropicProvider("claude", api_key="k", max_tokens=3000)
    plain = ModelRequest("claude-sonnet-4-6", tuple(ASK))
    assert call_max_output(claude, plain) == 3000
    assert call_max_output(claude, ModelRequest("claude-sonnet-4-6", tuple(ASK), max_tokens=700)) == 700
    scripted = ScriptedProvider(steps=[])
    assert call_max_output(scripted, plain) is None
    table = ProviderConfig("big", "openai", {"base_url": "https://llm.example.invalid/v1", "max_output_tokens": 32000},
                           api_key="k")
    big = OpenAICompatProvider.from_config(table)
    assert call_max_output(big, plain) == 32000 and call_max_output(big, ModelRequest("m", (), max_tokens=9)) == 9
    assert call_max_output(OpenAICompatProvider("o", api_key="k"), plain) is None
    for bad in (0, -5, "lots"):
        with pytest.raises(ConfigError, match=r"\[providers.big\]: max_output_tokens"):
            OpenAICompatProvider.from_config(ProviderConfig("big", "openai", {**table.options, "max_output_tokens": bad},
                                                            api_key="k"))
    assert call_max_output(scripted, ModelRequest("m", tuple(ASK), max_tokens=42)) == 42


def test_the_input_estimate_errs_high_and_counts_tools_and_history() -> None:
    text = "word " * 400  # 2,000 characters: about 500 tokens of English
    small = ModelRequest("m", (Message.user(text),))
    assert estimate_input_tokens(small) >= 500
    spec = ToolSpec("search_notes", "Search the notes. " * 20, {"type": "object", "properties": {"q": {"type": "string"}}})
    assert estimate_input_tokens(ModelRequest("m", small.messages, tools=(spec,))) > estimate_input_tokens(small)
    longer = ModelRequest("m", (Message.user(text), Message.assistant(text)))
    assert estimate_input_tokens(longer) >= 2 * estimate_input_tokens(small) - 10


# -- per conversation ------------------------------------------------------------------------


def chat_app(tmp_path: Path, toml: str) -> App:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "noteloom.toml").write_text(toml)
    return open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)


async def test_a_conversations_budget_wins_over_the_agent_table(tmp_path: Path) -> None:
    app = chat_app(tmp_path, "[agent]\nmax_steps = 3\n")
    try:
        owner = app.workspace.ensure_owner()
        play = scripted(app, [{"tool_calls": [{"name": "list_notebooks", "arguments": {}}]}], loop=True)
        async with running_chat(app) as chat:
            sent = await chat.send(owner, "Go", controls={"model": "play:script"})
            first = await settle(chat, owner, sent.message_id, timeout=30)
            assert first["stop_reason"] == "max_steps" and len(play.requests) == 3  # [agent]
            await chat.update_conversation(owner, sent.conversation_id, controls={"max_steps": 2})
            again = await chat.send(owner, "Again", conversation_id=sent.conversation_id)
            second = await settle(chat, owner, again.message_id, timeout=30)
            assert second["stop_reason"] == "max_steps" and len(play.requests) == 5  # the conversation's
            done = [e for e in await collect(chat, owner, again.message_id, timeout=30) if e.kind == "done"]
            assert done and done[-1].data.get("limit") == "max_steps"
    finally:
        app.close()


async def test_a_conversations_time_limit_stops_a_hanging_model(tmp_path: Path) -> None:
    app = chat_app(tmp_path, "")
    try:
        owner = app.workspace.ensure_owner()
        scripted(app, [{"chunks": ["Let me think"], "hang": True}])
        async with running_chat(app) as chat:
            sent = await chat.send(owner, "Go", controls={"model": "play:script", "time_limit": 1})
            view = await settle(chat, owner, sent.message_id, timeout=30)
        assert view["stop_reason"] == "budget_exceeded" and view["content"] == "Let me think"
    finally:
        app.close()


def test_budget_controls_are_checked_and_kept_exactly(app: App) -> None:
    owner = app.workspace.ensure_owner()
    store = Conversations(app.workspace.engine)
    conv = store.create(owner.id, controls=Controls().merged({"max_cost": Decimal("0.10"), "time_limit": 90,
                                                              "max_steps": 4}))
    again = store.get(owner.id, conv.id)
    assert (again.controls.max_cost, again.controls.time_limit, again.controls.max_steps) == ("0.1", 90.0, 4)
    assert again.controls.budgets() == Budgets(4, None, Decimal("0.1"), 90.0)
    for bad in ({"max_cost": "lots"}, {"max_cost": -1}, {"max_steps": 0}, {"time_limit": 0}, {"max_steps": True}):
        with pytest.raises(InvalidInput):
            Controls().merged(bad)


async def test_the_chat_api_sets_and_shows_a_conversations_budgets(app: App) -> None:
    scripted(app, [{"text": "hi"}])
    transport = httpx2.ASGITransport(app=create_web_app(app))
    async with running_chat(app), httpx2.AsyncClient(
        transport=transport, base_url="http://testserver", headers={"Authorization": f"Bearer {access_token(app)}"}
    ) as c:
        sent = (await c.post("/api/v1/chat/send", json={"message": "go", "controls": {
            "model": "play:script", "max_cost": "0.10", "max_steps": 4, "time_limit": 120}})).json()
        path = f"/api/v1/chat/conversations/{sent['conversation_id']}"
        controls = (await c.get(path)).json()["controls"]
        assert (controls["max_cost"], controls["max_steps"], controls["time_limit"]) == ("0.1", 4, 120.0)
        reset = (await c.patch(path, json={"controls": {"max_cost": None, "max_steps": 2}})).json()["controls"]
        assert (reset["max_cost"], reset["max_steps"]) == (None, 2)
        for bad in ({"max_cost": "lots"}, {"max_cost": -1}, {"max_steps": 0}, {"time_limit": 0},
                    {"max_cost": "Infinity"}):
            r = await c.patch(path, json={"controls": bad})
            assert r.status_code == 422 and r.json()["field"] == f"controls.{next(iter(bad))}", r.text
        defaults = (await c.get("/api/v1/chat/models")).json()["defaults"]
        assert {"max_steps", "max_cost", "time_limit"} <= set(defaults)


# -- on the command line -------------------------------------------------------------------


def stored(home: Path) -> list[dict[str, Any]]:
    """The conversations the chat service holds (what the web chat lists)."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        chat = ChatService(app)
        owner = app.workspace.ensure_owner()

        async def load() -> list[dict[str, Any]]:
            return [await chat.conversation(owner, c.id) for c in await chat.conversations(owner)]

        return anyio.run(load)
    finally:
        app.close()


home = test_cli_chat.home
invoke = test_cli_chat.invoke
COUNT = {"tool_calls": [{"name": "count_things", "arguments": {}}],
         "usage": {"input_tokens": 1000, "output_tokens": 1000}}  # $0.010 at PRICES


def recorder(home: Path, steps: list[dict[str, Any]], extra: str = "", *, loop: bool = False,
             prices: dict[str, dict[str, float]] | None = None) -> ScriptedProvider:
    (home / "noteloom.toml").write_text('[providers.rec]\ntype = "recorder"\n' + extra)
    Recorder.model = ScriptedProvider("rec", steps=steps, loop=loop, prices=prices)
    return Recorder.model


def test_ask_takes_a_cost_budget_and_names_it_when_it_stops(invoke: Invoke, home: Path) -> None:
    model = recorder(home, [COUNT], loop=True, prices=PRICES)
    code, _out, err = invoke("ask", "-m", "rec", "--max-cost", "0.011", "count them")
    assert code == 0, err
    assert len(model.requests) == 1  # the second call could have passed $0.011
    assert "stopped: the turn reached its cost budget" in err and "$0.0100" in err
    model = recorder(home, [COUNT], loop=True, prices=PRICES)
    code, out, err = invoke("ask", "-m", "rec", "--max-cost", "0.011", "--json", "count them")
    data = json.loads(out)
    assert code == 0 and (data["stop_reason"], data["limit"], data["cost_usd"]) == ("budget_exceeded", "max_cost", "0.01")


def test_ask_takes_step_and_output_token_budgets_over_the_agent_table(invoke: Invoke, home: Path) -> None:
    model = recorder(home, [COUNT], "[agent]\nmax_steps = 3\n", loop=True)
    assert invoke("ask", "-m", "rec", "go")[0] == 0
    assert len(model.requests) == 3  # [agent]
    model = recorder(home, [COUNT], "[agent]\nmax_steps = 3\n", loop=True)
    code, _out, err = invoke("ask", "-m", "rec", "--max-steps", "2", "go")
    assert code == 0 and len(model.requests) == 2, err
    assert "limit of model calls" in err
    model = recorder(home, [COUNT], loop=True)
    code, _out, err = invoke("ask", "-m", "rec", "--max-tokens", "1500", "go")
    assert [r.max_tokens for r in model.requests] == [1500, 500]
    assert "budget of output tokens" in err


def test_ask_stops_a_hanging_model_at_its_timeout(invoke: Invoke, home: Path) -> None:
    recorder(home, [{"chunks": ["Still thinking"], "hang": True}])
    code, out, err = invoke("ask", "-m", "rec", "--timeout", "0.3", "go")
    assert code == 0, err
    assert out.startswith("Still thinking") and "time limit (--timeout" in err


def test_bad_budgets_are_one_line_naming_the_option(invoke: Invoke, home: Path) -> None:
    recorder(home, [{"text": "never"}])
    for args, option in ((["--max-cost", "lots"], "--max-cost"), (["--max-steps", "0"], "--max-steps"),
                         (["--timeout", "-1"], "--timeout"), (["--max-tokens", "0"], "--max-tokens")):
        code, _out, err = invoke("ask", "-m", "rec", *args, "go")
        assert code == 2 and err.startswith(f"error: {option} ") and err.count("\n") == 1, err
    (home / "noteloom.toml").write_text('[providers.rec]\ntype = "recorder"\n[agent]\nmax_cost = "lots"\n')
    code, _out, err = invoke("ask", "-m", "rec", "go")
    assert code != 0 and "[agent] max_cost" in err and "Traceback" not in err


def test_chat_budgets_become_the_conversations_own(invoke: Invoke, home: Path) -> None:
    model = recorder(home, [COUNT], loop=True)
    code, _out, err = invoke("chat", "-m", "rec", "--max-steps", "2", "--max-cost", "0.5", input="go\n")
    assert code == 0, err
    assert len(model.requests) == 2 and "limit of model calls" in err
    (conversation,) = stored(home)
    controls = conversation["controls"]
    assert isinstance(controls, dict) and (controls["max_steps"], controls["max_cost"]) == (2, "0.5")


def test_the_terminal_shows_which_model_it_waits_for(invoke: Invoke, home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    recorder(home, [{"text": "Hi"}, {"text": "Hello"}])
    assert "Waiting for" not in invoke("ask", "-m", "rec", "hi")[2]  # not when stderr is no terminal
    monkeypatch.setattr(chat_cmds, "status_is_tty", lambda: True)
    assert "Waiting for script…" in invoke("ask", "-m", "rec", "hi")[2]
    recorder(home, [{"text": "Hi"}])
    assert "Waiting for script…" in invoke("chat", "-m", "rec", input="hi\n")[2]


async def test_a_turn_resumed_after_a_confirmation_keeps_what_it_spent(app: App) -> None:
    owner = app.workspace.ensure_owner()
    note = app.workspace.create_note("Old", "stale")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    play = scripted(app, [
        {"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]},
        {"tool_calls": [{"name": "list_notebooks", "arguments": {}}]},
        {"tool_calls": [{"name": "list_notebooks", "arguments": {}}]},
        {"text": "never"},
    ])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "delete it", controls={"model": "play:script", "max_steps": 2})
        parked = await settle(chat, owner, sent.message_id, timeout=30)
        assert parked["status"] == "awaiting_confirmation" and len(play.requests) == 1
        await chat.confirm(owner, sent.message_id, "approve")
        view = await settle(chat, owner, sent.message_id, timeout=30)
    # Two model calls in all: the one before the question and one after it, not two more.
    assert view["stop_reason"] == "max_steps" and len(play.requests) == 2
