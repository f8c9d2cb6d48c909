"""The built-in pipeline jobs (note_triage, event_extraction, clip_safety), driven the way the
recipes' runner drives them, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import jsonschema
import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.app import App
from noteloom.db import new_id
from noteloom.default_plugins.pipeline_jobs import (
    NO_TAG,
    PAGE,
    PAGE_MAX,
    ClipSafety,
    EventExtraction,
    NoteTriage,
    item_key,
)
from noteloom.errors import InvalidInput, NotFound
from noteloom.pipeline import BasePipelineJob, PipelineItem, PipelineRun, check_job
from noteloom.tools import NotebookScope
from noteloom.verdicts import check_verdict
from noteloom.workspace import Note, Workspace
from noteloom.workspace.annotations import annotations_of, job_output
from noteloom.workspace.model import ms_of

T0 = 1_700_000_000_000  # a fixed "long ago", so the order of notes is the test's, not the clock's


class Log:
    """The processing log of one recipe, as a set; counts how many keys each lookup asked about."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.asked: list[int] = []

    def handled(self, keys: Sequence[str]) -> set[str]:
        self.asked.append(len(keys))
        return self.keys & set(keys)


def run_of(app: App, config: Mapping[str, Any], log: Log, *, scope: Iterable[str] = ()) -> PipelineRun:
    return PipelineRun(
        context=app.tool_context(scope=NotebookScope(scope)), recipe_id=new_id(), run_id=new_id(),
        config=config, handled=log.handled,
    )


def drain(job: BasePipelineJob, run: PipelineRun, log: Log) -> list[PipelineItem]:
    """Every item the job offers, each logged as handled once offered (what the runner does)."""
    items = []
    while (item := job.next_item(run)) is not None:  # type: ignore[attr-defined]
        assert item.key not in log.keys, "an item was offered twice"
        items.append(item)
        log.keys.add(item.key)
    return items


def judged(job: Any, run: PipelineRun, item: PipelineItem, verdict: dict[str, Any], model: str = "scripted:judge") -> None:
    """A verdict the way the runner hands it on: schema first, then the job's own rules."""
    checked = check_verdict(job.verdict_schema, verdict)
    job.validate_verdict(run, item, checked)
    job.record_verdict(run, item, checked, model)


def note_at(ws: Workspace, title: str, book: str, minutes: int, **kw: Any) -> Note:
    t = T0 + minutes * 60_000
    return ws.create_note(title, kw.pop("body", f"body of {title}"), book, created_time=t, updated_time=t, **kw)


def ids(items: Iterable[PipelineItem]) -> list[str]:
    return [i.key.partition("@")[0] for i in items]


# -- registration --------------------------------------------------------------------------------


def test_the_jobs_are_registered_and_keep_the_contract(any_app: App) -> None:
    jobs = any_app.pipeline_jobs
    assert {"note_triage", "event_extraction", "clip_safety"} <= set(jobs)
    for name in ("note_triage", "event_extraction", "clip_safety"):
        job = check_job(jobs[name])
        assert job.name == name
        jsonschema.Draft202012Validator.check_schema(job.config_schema)
        jsonschema.Draft202012Validator.check_schema(job.verdict_schema)
    assert jobs["clip_safety"].untrusted_digest and jobs["note_triage"].untrusted_digest
    assert not jobs["event_extraction"].untrusted_digest


# -- the queue: order, handled, scope, trash --------------------------------------------------


def test_items_come_oldest_first_and_never_twice(any_app: App) -> None:
    ws = any_app.workspace
    inbox, other = ws.create_notebook("Inbox"), ws.create_notebook("Other")
    late = note_at(ws, "late", inbox.id, 30)
    early = note_at(ws, "early", inbox.id, 10)
    # Two notes changed in the same millisecond come in id order.
    tied = sorted([note_at(ws, "tie a", inbox.id, 20), note_at(ws, "tie b", inbox.id, 20)], key=lambda n: n.id)
    note_at(ws, "elsewhere", other.id, 5)
    log = Log()
    items = drain(NoteTriage(), run_of(any_app, {"notebook_id": inbox.id}, log), log)
    assert ids(items) == [early.id, tied[0].id, tied[1].id, late.id]
    assert items[0].label == "early (Inbox)"


def test_handled_items_are_passed_over_a_page_at_a_time(any_app: App) -> None:
    ws = any_app.workspace
    inbox = ws.create_notebook("Inbox")
    notes = [note_at(ws, f"n{i:03d}", inbox.id, i) for i in range(PAGE * 3 + 5)]
    log = Log()
    log.keys = {item_key(n.id, n.updated_time) for n in notes[: PAGE * 2 + 20]}
    job = NoteTriage()
    run = run_of(any_app, {"notebook_id": inbox.id}, log)
    first = job.next_item(run)
    assert first is not None and ids([first]) == [notes[PAGE * 2 + 20].id]
    # Pages grow, so a long handled history costs a few lookups, never the whole vault in one.
    assert log.asked[0] == PAGE and max(log.asked) <= PAGE_MAX and len(log.asked) <= 3
    log.keys.add(first.key)
    asked = len(log.asked)
    rest = drain(job, run, log)
    assert ids(rest) == [n.id for n in notes[PAGE * 2 + 21 :]]
    # The run goes on from its last item instead of paging through the history again: one
    # lookup per item, and one to find it is caught up.
    assert len(log.asked) - asked == len(rest) + 1


def test_a_note_edited_after_it_was_judged_is_offered_again(any_app: App) -> None:
    ws = any_app.workspace
    inbox = ws.create_notebook("Inbox")
    note = note_at(ws, "draft", inbox.id, 1)
    job, log = NoteTriage(), Log()
    run = run_of(any_app, {"notebook_id": inbox.id}, log)
    assert ids(drain(job, run, log)) == [note.id]
    ws.update_note(note.id, body="the text changed, so the summary must too")
    again = drain(job, run_of(any_app, {"notebook_id": inbox.id}, log), log)
    assert ids(again) == [note.id] and again[0].key != item_key(note.id, note.updated_time)


def test_trashed_notes_and_notebooks_are_never_offered(any_app: App) -> None:
    ws = any_app.workspace
    inbox, old = ws.create_notebook("Inbox"), ws.create_notebook("Old clips")
    kept = note_at(ws, "kept", inbox.id, 1, source_url="https://example.org/kept")
    ws.delete_note(note_at(ws, "binned", inbox.id, 2, source_url="https://example.org/binned").id)
    note_at(ws, "in a binned notebook", old.id, 3, source_url="https://example.org/old")
    ws.delete_notebook(old.id)
    log = Log()
    assert ids(drain(NoteTriage(), run_of(any_app, {"notebook_id": inbox.id}, log), log)) == [kept.id]
    log = Log()
    assert ids(drain(ClipSafety(), run_of(any_app, {}, log), log)) == [kept.id]


def test_only_notes_in_the_notebook_scope_are_offered(any_app: App) -> None:
    ws = any_app.workspace
    work, private = ws.create_notebook("Work"), ws.create_notebook("Private")
    todos = ws.create_notebook("Agenda", work.id)
    seen = note_at(ws, "seen", work.id, 1, source_url="https://example.org/a", body="Meeting 2026-05-04")
    note_at(ws, "hidden", private.id, 2, source_url="https://example.org/b", body="Meeting 2026-05-05")
    log = Log()
    assert ids(drain(ClipSafety(), run_of(any_app, {}, log, scope=["Work"]), log)) == [seen.id]
    mine = note_at(ws, "mine", work.id, 3, body="Dentist 2026-06-01")
    note_at(ws, "not mine", private.id, 4, body="Dentist 2026-06-02")
    log = Log()
    run = run_of(any_app, {"target_notebook_id": todos.id}, log, scope=["Work"])
    assert ids(drain(EventExtraction(), run, log)) == [mine.id]  # clips are never sources
    # A notebook out of scope does not exist for a recipe's settings either.
    with pytest.raises(InvalidInput) as info:
        NoteTriage().validate_config({"notebook_id": private.id}, any_app.tool_context(scope=NotebookScope(["Work"])))
    assert info.value.field == "notebook_id"
    # … nor for a job that had it in its settings before the scope narrowed.
    log = Log()
    assert drain(NoteTriage(), run_of(any_app, {"notebook_id": private.id}, log, scope=["Work"]), log) == []


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "config", "field"),
    [
        (NoteTriage, {}, "notebook_id"),
        (NoteTriage, {"notebook_id": "0" * 32}, "notebook_id"),
        (NoteTriage, {"notebook_id": 7}, "notebook_id"),
        (NoteTriage, {"notebook_id": "TRASHED"}, "notebook_id"),
        (EventExtraction, {}, "target_notebook_id"),
        (EventExtraction, {"target_notebook_id": "0" * 32}, "target_notebook_id"),
        (EventExtraction, {"target_notebook_id": "LIVE", "source_notebook_id": "0" * 32}, "source_notebook_id"),
        (EventExtraction, {"target_notebook_id": "LIVE", "source_notebook_id": "LIVE"}, "target_notebook_id"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(
    any_app: App, job: type[BasePipelineJob], config: dict[str, Any], field: str
) -> None:
    ws = any_app.workspace
    live, trashed = ws.create_notebook("Live"), ws.create_notebook("Trashed")
    ws.delete_notebook(trashed.id)
    config = {k: {"LIVE": live.id, "TRASHED": trashed.id}.get(v, v) if isinstance(v, str) else v
              for k, v in config.items()}
    with pytest.raises(InvalidInput) as info:
        job().validate_config(config, any_app.tool_context())
    assert info.value.field == field and field in str(info.value)


def test_good_settings_pass(any_app: App) -> None:
    ws = any_app.workspace
    a, b = ws.create_notebook("A"), ws.create_notebook("B")
    ctx = any_app.tool_context()
    NoteTriage().validate_config({"notebook_id": a.id}, ctx)
    EventExtraction().validate_config({"target_notebook_id": b.id}, ctx)
    EventExtraction().validate_config({"source_notebook_id": a.id, "target_notebook_id": b.id}, ctx)
    for job in (NoteTriage(), EventExtraction(), ClipSafety()):
        jsonschema.validate({"notebook_id": a.id} if job.name == "note_triage" else
                            {"target_notebook_id": b.id} if job.name == "event_extraction" else {},
                            job.config_schema)


# -- note_triage ------------------------------------------------------------------------------


def triage_setup(app: App) -> tuple[NoteTriage, PipelineRun, Log, Note]:
    ws = app.workspace
    inbox = ws.create_notebook("Inbox")
    for title in ("Work", "Home", "None"):
        ws.ensure_tag(title)
    note = note_at(ws, "Quarterly numbers", inbox.id, 1, body="Revenue went up.")
    job, log = NoteTriage(), Log()
    run = run_of(app, {"notebook_id": inbox.id}, log)
    job.validate_config(run.config, run.context)
    return job, run, log, note


def test_the_tag_choice_is_the_existing_tags_read_afresh_plus_none(any_app: App) -> None:
    job, run, _, _ = triage_setup(any_app)
    enum = job.verdict_schema["properties"]["tag"]["enum"]
    # A tag named "None" (any case) is not offered: the sentinel owns the word.
    assert sorted(enum) == sorted(["Home", "Work", NO_TAG])
    any_app.workspace.ensure_tag("Travel")
    any_app.workspace.delete_tag("Home")
    assert job.next_item(run) is not None
    assert sorted(job.verdict_schema["properties"]["tag"]["enum"]) == sorted(["Travel", "Work", NO_TAG])


def test_triage_applies_an_existing_tag_and_keeps_the_summary(any_app: App) -> None:
    ws = any_app.workspace
    job, run, log, note = triage_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    tags_before = {t.title for t in ws.list_tags()}
    judged(job, run, item, {"tag": "Work", "summary": "Revenue went up this quarter."})
    assert ws.get_note(note.id).tags == ("Work",)
    with ws.read() as c:
        found = annotations_of(c, note.id)
    assert found is not None and found.summary is not None and found.scan is None
    assert (found.summary.text, found.summary.model) == ("Revenue went up this quarter.", "scripted:judge")
    assert {t.title for t in ws.list_tags()} == tags_before  # never a new tag
    # Its own writes leave the note's change time alone: it is not offered again.
    assert ws.get_note(note.id).updated_time == note.updated_time
    log.keys.add(item.key)
    assert job.next_item(run) is None


def test_triage_never_makes_a_tag(any_app: App) -> None:
    ws = any_app.workspace
    job, run, _, note = triage_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    with pytest.raises(InvalidInput):  # the schema refuses a tag that is not offered
        judged(job, run, item, {"tag": "Finance", "summary": "Numbers."})
    judged(job, run, item, {"tag": NO_TAG, "summary": "Numbers."})
    assert ws.get_note(note.id).tags == ()
    assert "Finance" not in {t.title for t in ws.list_tags()} and NO_TAG not in {t.title for t in ws.list_tags()}
    # Even a verdict that got past the schema cannot create one.
    job.record_verdict(run, item, {"tag": "Finance", "summary": "Numbers."}, "m")
    assert "Finance" not in {t.title for t in ws.list_tags()}


def test_a_tag_deleted_before_the_verdict_is_skipped_but_the_summary_kept(any_app: App) -> None:
    ws = any_app.workspace
    job, run, _, note = triage_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    checked = check_verdict(job.verdict_schema, {"tag": "Home", "summary": "Chores to do."})
    ws.delete_tag("Home")
    job.record_verdict(run, item, checked, "m")
    assert ws.get_note(note.id).tags == ()
    with ws.read() as c:
        found = annotations_of(c, note.id)
    assert found is not None and found.summary is not None and found.summary.text == "Chores to do."


def test_a_note_that_left_the_inbox_is_not_written(any_app: App) -> None:
    ws = any_app.workspace
    job, run, _, note = triage_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    ws.update_note(note.id, notebook_id=ws.create_notebook("Elsewhere").id)
    job.record_verdict(run, item, {"tag": "Work", "summary": "x"}, "m")
    with ws.read() as c:
        assert annotations_of(c, note.id) is None
    assert ws.get_note(note.id).tags == ()
    with pytest.raises(NotFound):
        job.digest(run, item)


# -- event_extraction -------------------------------------------------------------------------


BERLIN = ZoneInfo("Europe/Berlin")


def events_setup(app: App) -> tuple[EventExtraction, PipelineRun, Log, Note, str]:
    ws = app.workspace
    notes, agenda = ws.create_notebook("Notes"), ws.create_notebook("Agenda")
    note = note_at(ws, "Planning", notes.id, 1, body="Kick-off on 1 July at 9:30, report due 15 January.")
    job, log = EventExtraction(zone=BERLIN), Log()
    run = run_of(app, {"source_notebook_id": notes.id, "target_notebook_id": agenda.id}, log)
    job.validate_config(run.config, run.context)
    return job, run, log, note, agenda.id


def todos_in(ws: Workspace, notebook_id: str) -> dict[str, Note]:
    listed = ws.list_notes(notebook_id)
    return {n.title: ws.get_note(n.id) for n in listed}


EVENTS = {"events": [
    {"title": "Kick-off", "date": "2026-07-01", "time": "09:30", "kind": "meeting"},
    {"title": "Report due", "date": "2027-01-15", "kind": "deadline"},
]}


def test_events_become_to_dos_due_in_the_owners_zone(any_app: App) -> None:
    ws = any_app.workspace
    job, run, _, note, agenda = events_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    judged(job, run, item, EVENTS)
    made = todos_in(ws, agenda)
    assert set(made) == {"Kick-off", "Report due"}
    # Berlin keeps summer time in July (UTC+2) and winter time in January (UTC+1).
    assert made["Kick-off"].todo_due == ms_of(datetime(2026, 7, 1, 7, 30, tzinfo=UTC))
    assert made["Report due"].todo_due == ms_of(datetime(2027, 1, 14, 23, 0, tzinfo=UTC))
    for todo in made.values():
        assert todo.is_todo and f"(:/{note.id})" in todo.body and "Europe/Berlin" in todo.body


def test_a_rerun_updates_the_same_to_dos_and_remakes_a_deleted_one(any_app: App) -> None:
    ws = any_app.workspace
    job, run, log, note, agenda = events_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    judged(job, run, item, EVENTS)
    first = todos_in(ws, agenda)
    ws.delete_note(first["Report due"].id)
    # The processing-log row is deleted: the item is judged again, and the model words it anew.
    log.keys.clear()
    again = job.next_item(run_of(any_app, run.config, log))
    assert again is not None and again.key == item.key
    judged(job, run, again, {"events": [
        {"title": "Project kick-off", "date": "2026-07-01", "time": "10:00", "kind": "meeting"},
        {"title": "Report due", "date": "2027-01-15", "kind": "deadline"},
    ]})
    now = todos_in(ws, agenda)
    assert set(now) == {"Project kick-off", "Report due"}
    assert now["Project kick-off"].id == first["Kick-off"].id  # updated, not repeated
    assert now["Project kick-off"].todo_due == ms_of(datetime(2026, 7, 1, 8, 0, tzinfo=UTC))
    assert now["Report due"].id != first["Report due"].id  # the user deleted it: made again
    with ws.read() as c:
        assert job_output(c, job.name, note.id, "1") == now["Report due"].id


def test_the_made_to_dos_and_clips_are_never_read_for_events(any_app: App) -> None:
    ws = any_app.workspace
    notes, agenda = ws.create_notebook("Notes"), ws.create_notebook("Agenda")
    source = note_at(ws, "Trip", notes.id, 1, body="Flight on 2026-08-01")
    note_at(ws, "Clipped offer", notes.id, 2, source_url="https://example.org/deal", body="Sale ends 2026-08-02")
    note_at(ws, "Already on the agenda", agenda.id, 3, body="Dentist 2026-08-03")
    job, log = EventExtraction(zone=BERLIN), Log()
    run = run_of(any_app, {"target_notebook_id": agenda.id}, log)  # every notebook but the target
    item = job.next_item(run)
    assert item is not None and ids([item]) == [source.id]
    judged(job, run, item, {"events": [{"title": "Flight", "date": "2026-08-01", "kind": "booking"}]})
    made = todos_in(ws, agenda.id)["Flight"]
    ws.update_note(made.id, notebook_id=notes.id)  # the user files the to-do among the notes
    log.keys.add(item.key)
    assert job.next_item(run) is None


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"title": "x", "date": "2026-02-30", "kind": "other"}, "events[0].date"),
        ({"title": "x", "date": "2026-13-01", "kind": "other"}, "events[0].date"),
        ({"title": "x", "date": "0999-01-01", "kind": "other"}, "events[0].date"),
        ({"title": "x", "date": "2026-01-01", "time": "24:00", "kind": "other"}, "events[0].time"),
        ({"title": "x", "date": "2026-01-01", "time": "12:61", "kind": "other"}, "events[0].time"),
    ],
)
def test_impossible_dates_and_times_are_refused_naming_the_field(
    any_app: App, event: dict[str, Any], field: str
) -> None:
    job, run, _, _, _ = events_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    with pytest.raises(InvalidInput) as info:
        judged(job, run, item, {"events": [event]})
    assert info.value.field == field and f'"{field}"' in str(info.value)


def test_no_events_make_no_to_dos(any_app: App) -> None:
    job, run, _, _, agenda = events_setup(any_app)
    item = job.next_item(run)
    assert item is not None
    judged(job, run, item, {"events": []})
    assert todos_in(any_app.workspace, agenda) == {}


# -- clip_safety ------------------------------------------------------------------------------


def clip_setup(app: App) -> tuple[ClipSafety, PipelineRun, PipelineItem, Note]:
    ws = app.workspace
    book = ws.create_notebook("Clips")
    note_at(ws, "my own note", book.id, 1)
    clip = note_at(ws, "Verify your account", book.id, 2, source_url="https://paypa1-secure.example/login",
                   body="Log in at [PayPal](https://paypa1-secure.example/x) within 24 hours.")
    job, log = ClipSafety(), Log()
    run = run_of(app, {}, log)
    item = job.next_item(run)
    assert item is not None and ids([item]) == [clip.id]
    return job, run, item, clip


@pytest.mark.parametrize(("score", "verdict"), [(0, "safe"), (2, "safe"), (3, "suspicious"), (6, "suspicious"),
                                                (7, "dangerous"), (10, "dangerous")])
def test_a_verdict_in_its_score_band_is_accepted(any_app: App, score: int, verdict: str) -> None:
    job, run, item, _ = clip_setup(any_app)
    job.validate_verdict(run, item, {"score": score, "verdict": verdict, "red_flags": [], "summary": "s"})
    # The owner hears of every page that is not safe.
    assert job.flagged({"score": score, "verdict": verdict}) is (verdict != "safe")


@pytest.mark.parametrize(("score", "verdict", "band"), [(2, "suspicious", "safe"), (3, "safe", "suspicious"),
                                                        (6, "dangerous", "suspicious"), (7, "suspicious", "dangerous")])
def test_a_verdict_outside_its_score_band_is_refused(any_app: App, score: int, verdict: str, band: str) -> None:
    job, run, item, _ = clip_setup(any_app)
    with pytest.raises(InvalidInput) as info:
        job.validate_verdict(run, item, {"score": score, "verdict": verdict, "red_flags": [], "summary": "s"})
    assert info.value.field == "verdict"
    assert f'"{verdict}"' in str(info.value) and f"score of {score} is \"{band}\"" in str(info.value)


def test_a_scan_is_recorded_on_the_note_only(any_app: App) -> None:
    ws = any_app.workspace
    job, run, item, clip = clip_setup(any_app)
    flags = ["The domain imitates PayPal.", "It asks for a login under time pressure."]
    judged(job, run, item, {"score": 9.0, "verdict": "dangerous", "red_flags": flags, "summary": "Phishing."})
    with ws.read() as c:
        found = annotations_of(c, clip.id)
    assert found is not None and found.summary is None and found.scan is not None
    assert (found.scan.score, found.scan.verdict, found.scan.red_flags, found.scan.model) == (
        9, "dangerous", tuple(flags), "scripted:judge")
    assert ws.get_note(clip.id) == clip  # the note itself is untouched


# -- digests ------------------------------------------------------------------------------------


def test_digests_are_capped_and_say_what_was_left_out(any_app: App) -> None:
    ws = any_app.workspace
    inbox, agenda = ws.create_notebook("Inbox"), ws.create_notebook("Agenda")
    huge = "word " * 40_000
    long_url = "https://example.org/" + "p" * 5000
    links = " ".join(f"https://site{i}.example/x" for i in range(200))
    tags = [f"tag number {i}" for i in range(300)]
    clip = note_at(ws, "T" * 3000, inbox.id, 1, body=links + " " + huge, source_url=long_url, tags=tags)
    mine = note_at(ws, "M" * 3000, inbox.id, 2, body=huge)
    cases: list[tuple[Any, dict[str, Any], Note]] = [
        (NoteTriage(), {"notebook_id": inbox.id}, clip),
        (EventExtraction(), {"target_notebook_id": agenda.id}, mine),
        (ClipSafety(), {}, clip),
    ]
    for job, config, note in cases:
        log = Log()
        run = run_of(any_app, config, log)
        item = job.next_item(run)
        assert item is not None and ids([item]) == [note.id]
        text = job.digest(run, item)
        assert len(text) <= job.digest_max < 12_000, job.name
        assert "more characters not shown" in text, job.name
        assert f"({len(note.body)} characters)" in text, job.name
        assert len(item.label) <= 200
    clip_digest = ClipSafety().digest(run_of(any_app, {}, Log()), PipelineItem(item_key(clip.id, clip.updated_time), "x"))
    assert "site0.example" in clip_digest and "more" in clip_digest.split("Sites it links to:")[1].splitlines()[0]


def test_a_triage_digest_shows_a_clips_source(any_app: App) -> None:
    ws = any_app.workspace
    inbox = ws.create_notebook("Inbox")
    clip = note_at(ws, "Recipe", inbox.id, 1, source_url="https://cooking.example/soup", body="Boil water.",
                   tags=["food"])
    job, log = NoteTriage(), Log()
    run = run_of(any_app, {"notebook_id": inbox.id}, log)
    item = job.next_item(run)
    assert item is not None
    text = job.digest(run, item)
    assert "https://cooking.example/soup" in text and "Boil water." in text and "food" in text
    assert clip.title in text


# -- read_note shows what jobs found ------------------------------------------------------------


@pytest.mark.anyio
async def test_read_note_shows_a_summary_and_scan_only_when_there_are_some(any_app: App) -> None:
    ws = any_app.workspace
    job, run, item, clip = clip_setup(any_app)
    plain = ws.create_note("plain", "nothing found about it")

    async def read(note_id: str) -> dict[str, Any]:
        result = await any_app.registry.call(any_app.tool_context(), "read_note", {"id": note_id})
        jsonschema.validate(result.payload, any_app.registry.get("read_note").output_schema or {})
        payload: dict[str, Any] = result.payload
        return payload

    before = await read(clip.id)
    assert "summary" not in before and "clip_scan" not in before
    assert "summary" not in await read(plain.id)
    judged(job, run, item, {"score": 1, "verdict": "safe", "red_flags": [], "summary": "A login page."})
    with ws.write() as c:
        from noteloom.workspace.annotations import set_summary

        set_summary(c, clip.id, "A page asking to log in.", model="scripted:triage")
    after = await read(clip.id)
    # The fields there were come first and unchanged; what jobs found is added after them.
    assert list(after)[: len(before)] == list(before)
    assert {k: after[k] for k in before} == before
    assert list(after)[len(before):] == ["summary", "clip_scan"]
    assert after["summary"]["text"] == "A page asking to log in." and after["summary"]["model"] == "scripted:triage"
    assert (after["clip_scan"]["score"], after["clip_scan"]["verdict"], after["clip_scan"]["red_flags"]) == (1, "safe", [])


def test_annotations_go_with_a_purged_note(any_app: App) -> None:
    ws = any_app.workspace
    job, run, item, clip = clip_setup(any_app)
    judged(job, run, item, {"score": 0, "verdict": "safe", "red_flags": [], "summary": "Fine."})
    ws.delete_note(clip.id)
    ws.purge(clip.id)
    with ws.read() as c:
        left = c.execute(sa.select(sa.func.count()).select_from(db.metadata.tables["note_annotations"])).scalar_one()
    assert left == 0
