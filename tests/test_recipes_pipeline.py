"""Recipe runs in pipeline mode: one item per exchange, a validated verdict, one retry, the
processing log, dry runs, the untrusted fence, stop and budgets, the built-in jobs end to
end, and a run against a real loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from llm_support import Exchange, LoopbackServer
from noteloom import db
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import InvalidInput
from noteloom.pipeline import BasePipelineJob, PipelineItem, PipelineRun
from noteloom.recipes import store
from noteloom.recipes import tables as t
from noteloom.tools import call_tool
from noteloom.verdicts import output_instruction
from recipe_support import running, scripted, service, settled, until_event

pytestmark = pytest.mark.anyio


class Fruit(BasePipelineJob):
    """A job over a fixed list of items; it records what it was told."""

    name = "fruit"
    untrusted_digest = False
    default_prompt = "Say whether each fruit is sweet."
    verdict_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"taste": {"type": "string", "enum": ["sweet", "sour"]},
                       "score": {"type": "integer", "minimum": 0, "maximum": 10}},
        "required": ["taste", "score"], "additionalProperties": False,
    }

    def __init__(self, items: list[str], *, untrusted: bool = False) -> None:
        self.items = items
        self.untrusted_digest = untrusted
        self.recorded: list[tuple[str, dict[str, Any], str]] = []

    def next_item(self, run: PipelineRun) -> PipelineItem | None:
        done = run.handled(self.items)
        return next((PipelineItem(i, i.title()) for i in self.items if i not in done), None)

    def digest(self, run: PipelineRun, item: PipelineItem) -> str:
        return f"Fruit: {item.key}"

    def validate_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any]) -> None:
        if verdict["taste"] == "sweet" and verdict["score"] < 3:
            raise InvalidInput("a sweet fruit scores 3 or more", field="score")

    def record_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any], model: str) -> None:
        self.recorded.append((item.key, dict(verdict), model))


def _job(app: App, items: list[str], **kw: Any) -> Fruit:
    job = Fruit(items, **kw)
    app.pipeline_jobs["fruit"] = job
    return job


def _recipe(app: App, **fields: Any) -> dict[str, Any]:
    owner = app.workspace.ensure_owner()
    if "play" not in app.services.providers.names():
        scripted(app, [])
    return service(app).add(owner, {"name": "fruit", "mode": "pipeline", "job": "fruit", "model": "play",
                                    **fields})


def _answers(*verdicts: Any) -> list[dict[str, Any]]:
    return [{"text": v if isinstance(v, str) else f"Here you go: {json.dumps(v)}"} for v in verdicts]


def _log(app: App) -> list[tuple[str, str]]:
    with db.read_tx(app.engine) as c:
        return sorted((r.item_key, r.status) for r in c.execute(t.recipe_items.select()))


async def test_each_item_is_judged_alone_recorded_and_logged(app: App) -> None:
    job = _job(app, ["apple", "lemon"])
    model = scripted(app, _answers({"taste": "sweet", "score": 8}, {"taste": "sour", "score": 2}))
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["status"] == "succeeded", run
    assert run["items_done"] == 2 and run["items_failed"] == 0
    assert run["output"] == "2 item(s) judged; caught up"
    assert [(k, v["taste"]) for k, v, _ in job.recorded] == [("apple", "sweet"), ("lemon", "sour")]
    assert {m for _, _, m in job.recorded} == {"play:script"}
    assert [(i["key"], i["status"], i["verdict"]) for i in run["items"]] == [
        ("apple", "done", {"taste": "sweet", "score": 8}), ("lemon", "done", {"taste": "sour", "score": 2})]
    assert _log(app) == [("apple", "done"), ("lemon", "done")]
    # One exchange per item, no tools, the item alone; the instruction is the validator's schema.
    first, second = model.requests
    assert first.tools == () and [m.text for m in first.messages] == ["Fruit: apple"]
    assert [m.text for m in second.messages] == ["Fruit: lemon"]
    system = " ".join(b.text for b in first.system)
    assert system.startswith(Fruit.default_prompt) and output_instruction(Fruit.verdict_schema) in system


async def test_an_invalid_verdict_gets_one_retry_told_what_was_wrong(app: App) -> None:
    job = _job(app, ["apple"])
    model = scripted(app, _answers("<think>hm</think> {\"taste\": \"sweet\", \"score\": 1}",
                                   {"taste": "sweet", "score": 7}))
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["status"] == "succeeded" and run["items_done"] == 1
    assert job.recorded[0][1] == {"taste": "sweet", "score": 7}
    retry = model.requests[1]
    assert [m.role for m in retry.messages] == ["user", "assistant", "user"]
    assert retry.messages[1].text.endswith('{"taste": "sweet", "score": 1}')  # its own answer
    assert "a sweet fruit scores 3 or more" in retry.messages[2].text
    assert [e["data"]["status"] for e in run["events"] if e["kind"] == "item"] == ["judging", "retrying", "done"]


async def test_an_item_still_invalid_after_its_retry_is_logged_as_an_error_and_the_queue_moves_on(app: App) -> None:
    job = _job(app, ["apple", "lemon"])
    scripted(app, _answers("no idea", {"taste": "bitter", "score": 3}, {"taste": "sour", "score": 1}))
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["status"] == "succeeded"
    assert (run["items_done"], run["items_failed"]) == (1, 1)
    assert run["output"] == "1 item(s) judged, 1 failed; caught up"
    [failed, good] = run["items"]
    assert good["status"] == "done" and good["verdict"] == {"taste": "sour", "score": 1}
    assert failed["status"] == "error" and '"taste" must be one of sweet, sour' in failed["error"]
    assert [k for k, _, _ in job.recorded] == ["lemon"]
    assert _log(app) == [("apple", "error"), ("lemon", "done")]


async def test_the_processing_log_makes_runs_idempotent_and_deleting_a_row_requeues_its_item(app: App) -> None:
    job = _job(app, ["apple", "lemon"])
    scripted(app, _answers({"taste": "sweet", "score": 8}, {"taste": "sour", "score": 2},
                           {"taste": "sour", "score": 0}))
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        await service(app).run_now(owner, "fruit")
        again = await service(app).run_now(owner, "fruit")
        assert again["status"] == "succeeded" and again["output"] == "0 item(s) judged; caught up"
        assert service(app).forget_items(owner, "fruit", ["lemon"]) == 1
        third = await service(app).run_now(owner, "fruit")
    assert [i["key"] for i in third["items"]] == ["lemon"]
    assert [k for k, _, _ in job.recorded] == ["apple", "lemon", "lemon"]


async def test_a_dry_run_judges_a_sample_and_records_nothing(app: App) -> None:
    job = _job(app, ["apple", "lemon", "plum"])
    scripted(app, _answers({"taste": "sweet", "score": 8}, {"taste": "sour", "score": 2}))
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit", sample=2)
    assert run["status"] == "succeeded" and run["dry_run"] is True
    assert [i["verdict"]["taste"] for i in run["items"]] == ["sweet", "sour"]
    assert run["output"] == "2 item(s) judged (dry run: nothing recorded)"
    assert job.recorded == [] and _log(app) == []


async def test_the_batch_size_caps_a_run(app: App) -> None:
    _job(app, ["a", "b", "c"])
    scripted(app, _answers(*[{"taste": "sour", "score": 1}] * 3))
    _recipe(app, batch_size=2)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["items_done"] == 2
    assert run["output"] == "2 item(s) judged; the batch of 2 is done, more may be waiting for the next run"


async def test_an_untrusted_digest_is_fenced_and_needs_the_taint_acknowledgment(app: App) -> None:
    _job(app, ["apple"], untrusted=True)
    model = scripted(app, _answers({"taste": "sweet", "score": 8}))
    with pytest.raises(InvalidInput) as refused:
        _recipe(app)
    assert refused.value.field == "allow_tainted_writes"
    _recipe(app, allow_tainted_writes=True)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["status"] == "succeeded"
    [request] = model.requests
    text = request.messages[0].text
    assert text.startswith("<<UNTRUSTED_") and "Fruit: apple" in text
    nonce = text.split(">>", 1)[0].removeprefix("<<UNTRUSTED_")
    assert f"<<UNTRUSTED_{nonce}>>" in " ".join(b.text for b in request.system)  # the contract names it


async def test_stop_ends_a_pipeline_run_cancelled_keeping_what_it_recorded(app: App) -> None:
    job = _job(app, ["apple", "lemon", "plum"])
    scripted(app, [*_answers({"taste": "sweet", "score": 8}), {"chunks": ["{"], "hang": True}])
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        started = await service(app).start(owner, "fruit")
        # The second item is being judged: its exchange hangs until the stop.
        await until_event(app, owner, started["run_id"], "item", where=lambda d: d["key"] == "lemon")
        await service(app).stop(owner, started["run_id"])
        run = await settled(app, owner, started["run_id"])
    assert run["status"] == "cancelled"
    assert [k for k, _, _ in job.recorded] == ["apple"]
    assert _log(app) == [("apple", "done")]  # the cut item is not logged: it is offered again


async def test_the_output_budget_ends_a_pipeline_run_before_a_call_that_could_pass_it(app: App) -> None:
    _job(app, ["a", "b", "c"])
    scripted(app, [{"text": json.dumps({"taste": "sour", "score": 1}), "usage": {"output_tokens": 400}}] * 3)
    _recipe(app, budgets={"max_output_tokens": 1000}, controls={"max_tokens": 300})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["status"] == "budget_exceeded" and run["error"].startswith("[max_output_tokens]")
    assert run["items_done"] == 2  # 800 spent: a third call of up to 300 could pass 1000


async def test_the_pipeline_job_config_is_checked_on_save(app: App) -> None:
    owner = app.workspace.ensure_owner()
    scripted(app, [])
    with pytest.raises(InvalidInput) as refused:
        service(app).add(owner, {"name": "t", "mode": "pipeline", "job": "note_triage", "model": "play",
                                 "allow_tainted_writes": True, "job_config": {}})
    assert refused.value.field and refused.value.field.startswith("job_config")
    with pytest.raises(InvalidInput) as unknown:
        service(app).add(owner, {"name": "t", "mode": "pipeline", "job": "no_such_job", "model": "play"})
    assert unknown.value.field == "job"


async def test_clip_safety_scores_clips_end_to_end_and_flags_the_dangerous_ones(app: App) -> None:
    ws = app.workspace
    bad = ws.create_note("Verify your account", "Log in here within 24 hours or lose access: http://bank.example.evil",
                         source_url="https://bank.example.evil/login")
    ws.create_note("My own note", "not a clip")
    scripted(app, _answers({"score": 9, "verdict": "dangerous", "red_flags": ["imitates a bank login"],
                            "summary": "A phishing page."}))
    owner = ws.ensure_owner()
    service(app).add(owner, {"name": "clips", "mode": "pipeline", "job": "clip_safety", "model": "play",
                             "allow_tainted_writes": True})
    async with running(app):
        run = await service(app).run_now(owner, "clips")
    assert run["status"] == "succeeded" and run["items_done"] == 1, run
    ctx = app.tool_context(owner)
    result = await call_tool(ctx, app.registry.get("read_note"), {"id": bad.id})
    assert result.payload["clip_scan"]["score"] == 9 and result.payload["clip_scan"]["verdict"] == "dangerous"
    with db.read_tx(app.engine) as c:
        kinds = [r.kind for r in c.execute(t.notifications.select())]
    assert kinds == ["flagged"]


async def test_note_triage_tags_an_inbox_note_with_an_existing_tag_and_summarises_it(any_app: App) -> None:
    app = any_app
    ws = app.workspace
    inbox = ws.create_notebook("Inbox")
    ws.create_note("Groceries", "milk", tags=["errands"], notebook_id=ws.create_notebook("Errands").id)
    note = ws.create_note("Call the plumber", "the sink leaks", notebook_id=inbox.id)
    scripted(app, _answers({"tag": "errands", "summary": "Book a plumber for the leaking sink."}))
    owner = ws.ensure_owner()
    service(app).add(owner, {"name": "triage", "mode": "pipeline", "job": "note_triage", "model": "play",
                             "job_config": {"notebook_id": inbox.id}, "allow_tainted_writes": True})
    async with running(app):
        run = await service(app).run_now(owner, "triage")
    assert run["status"] == "succeeded" and run["items_done"] == 1, run
    assert "errands" in ws.get_note(note.id).tags
    result = await call_tool(app.tool_context(owner), app.registry.get("read_note"), {"id": note.id})
    assert result.payload["summary"]["text"] == "Book a plumber for the leaking sink."


def test_a_pipeline_run_talks_to_a_real_openai_compatible_server(tmp_path: Any) -> None:
    import anyio

    requests: list[dict[str, Any]] = []

    async def answer(ex: Exchange) -> None:
        requests.append(json.loads(ex.body))
        await ex.start_stream()
        text = json.dumps({"taste": "sweet", "score": 9})
        for delta, finish in (({"content": text}, None), ({}, "stop")):
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await ex.send(f"data: {json.dumps(chunk)}\n\n".encode())
        await ex.send(b"data: [DONE]\n\n")
        await ex.end()

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer(answer)) as server:
        home = tmp_path / "home"
        home.mkdir()
        (home / "noteloom.toml").write_text(f'[providers.local]\ntype = "openai"\nbase_url = "{server.url}/v1"\n')
        app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
        try:
            job = _job(app, ["mango"])
            owner = app.workspace.ensure_owner()
            service(app).add(owner, {"name": "fruit", "mode": "pipeline", "job": "fruit", "model": "local:qwen3:8b"})

            async def go() -> dict[str, Any]:
                async with running(app):
                    return await service(app).run_now(owner, "fruit")

            run = anyio.run(go)
        finally:
            app.close()
    assert run["status"] == "succeeded", run
    assert job.recorded == [("mango", {"taste": "sweet", "score": 9}, "local:qwen3:8b")]
    [req] = requests
    assert req["model"] == "qwen3:8b" and "tools" not in req
    assert req["messages"][-1] == {"role": "user", "content": "Fruit: mango"}


async def test_the_runs_trace_of_a_pipeline_run_is_stored_with_each_items_verdict(app: App) -> None:
    _job(app, ["apple"])
    scripted(app, _answers({"taste": "sweet", "score": 8}))
    _recipe(app)
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    with db.read_tx(app.engine) as c:
        rec = store.get_run(c, run["run_id"])
        items = store.items_of(c, rec.recipe_id if rec else "")
    assert [(i["key"], i["verdict"], i["run_id"]) for i in items] == [("apple", {"taste": "sweet", "score": 8},
                                                                        run["run_id"])]


async def test_the_wall_clock_limit_is_the_runs_over_all_its_items(app: App) -> None:
    job = _job(app, ["apple", "lemon"])
    # The second exchange never ends: only the run's time limit can stop it.
    scripted(app, [*_answers({"taste": "sweet", "score": 8}), {"chunks": ["{"], "hang": True}])
    _recipe(app, budgets={"time_limit": 1})
    owner = app.workspace.ensure_owner()
    async with running(app):
        run = await service(app).run_now(owner, "fruit")
    assert run["status"] == "timeout" and run["error"].startswith("[time_limit]")
    assert [k for k, _, _ in job.recorded] == ["apple"]
