"""``read_attachment`` end to end on a SQLite workspace: a note with a PDF and a PNG, the
routing by the reading model's capabilities, the notebook scope, another note's file, and
files whose stored type or name lies."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest

from attachment_support import html_with_scripts, png_bytes, scanned_pdf, svg_bytes, text_pdf
from chat_support import running_chat, scripted, settle
from noteloom.app import App
from noteloom.messages import DocumentPart, ImagePart
from noteloom.providers.base import TEXT_ONLY, ModelCapabilities
from noteloom.providers.scripted import ScriptedProvider
from noteloom.tools import SCOPE_KEY, ToolContext, ToolError, ToolResult

pytestmark = pytest.mark.anyio

VISION = ModelCapabilities(vision=True)
DOCUMENT = ModelCapabilities(document=True)


@dataclasses.dataclass
class Files:
    note: str
    pdf: str
    png: str
    other_note: str
    other_file: str
    hidden_note: str
    hidden_file: str


@pytest.fixture
def files(app: App) -> Files:
    ws = app.workspace
    work = ws.create_notebook("Work")
    private = ws.create_notebook("Private")
    note = ws.create_note("Trip", "See the files.", work.id)
    pdf = ws.add_attachment(note.id, text_pdf(2, "Flight LX 123 leaves at 09:40."), "itinerary.pdf")
    png = ws.add_attachment(note.id, png_bytes(), "map.png", title="Map of the old town")
    other = ws.create_note("Budget", "", work.id)
    other_file = ws.add_attachment(other.id, text_pdf(1, "Budget: 900 EUR"), "budget.pdf")
    hidden = ws.create_note("Diary", "", private.id)
    hidden_file = ws.add_attachment(hidden.id, text_pdf(1, "Dear diary"), "diary.pdf")
    return Files(note.id, pdf.id, png.id, other.id, other_file.id, hidden.id, hidden_file.id)


async def call(app: App, note_id: str, attachment_id: str, caps: ModelCapabilities | None = None,
               **settings: Any) -> ToolResult:
    ctx: ToolContext = app.tool_context(app.workspace.ensure_owner(), model_capabilities=caps)
    if settings:
        ctx = dataclasses.replace(ctx, settings={**ctx.settings, "attachments": settings})
    return await app.registry.call(ctx, "read_attachment", {"note_id": note_id, "attachment_id": attachment_id})


async def test_the_tool_is_a_read_on_by_default(app: App) -> None:
    tool = app.registry.get("read_attachment")
    assert tool.effect == "read" and tool.untrusted_output
    assert app.registry.is_enabled(app.workspace, "read_attachment")


@pytest.mark.parametrize("caps", [None, TEXT_ONLY, VISION, DOCUMENT])
async def test_a_pdf_is_read_as_its_text_and_fenced(app: App, files: Files, caps: ModelCapabilities | None) -> None:
    result = await call(app, files.note, files.pdf, caps)
    assert result.untrusted is True and result.blocks == ()
    payload = result.payload
    assert payload["name"] == "itinerary.pdf" and payload["kind"] == "pdf" and payload["status"] == "ok"
    assert payload["text"].count("Flight LX 123 leaves at 09:40.") == 2
    assert payload["attachment_id"] == files.pdf and payload["note_id"] == files.note


@pytest.mark.parametrize("caps", [None, VISION])
async def test_an_image_is_handed_over_whole_where_it_can_be_seen(
    app: App, files: Files, caps: ModelCapabilities | None
) -> None:
    result = await call(app, files.note, files.png, caps)
    assert result.blocks == (ImagePart("image/png", base64.b64encode(png_bytes()).decode(), ref=files.png),)
    assert result.untrusted is True
    assert result.payload["text"] is None and result.payload["kind"] == "image"
    assert "attached to this result as an image" in result.payload["file"]


@pytest.mark.parametrize("caps", [TEXT_ONLY, DOCUMENT])
async def test_an_image_for_a_model_without_vision_is_refused(app: App, files: Files, caps: ModelCapabilities) -> None:
    with pytest.raises(ToolError, match="switch to a model with vision") as refused:
        await call(app, files.note, files.png, caps)
    assert "Map of the old town" in str(refused.value)


async def test_a_scanned_pdf_goes_whole_to_a_reader_of_documents_else_says_it_has_no_text(app: App) -> None:
    ws = app.workspace
    note = ws.create_note("Scans", "")
    scan = ws.add_attachment(note.id, scanned_pdf(), "receipt.pdf")
    whole = await call(app, note.id, scan.id, None)
    assert whole.blocks == (DocumentPart("application/pdf", base64.b64encode(scanned_pdf()).decode(),
                                         title="receipt.pdf", ref=scan.id),)
    assert whole.payload["status"] == "no_text" and "scanned PDF" in whole.payload["note"]
    assert (await call(app, note.id, scan.id, DOCUMENT)).blocks == whole.blocks
    text_only = await call(app, note.id, scan.id, TEXT_ONLY)
    assert text_only.blocks == ()
    assert "no text could be read" in text_only.payload["text"]
    assert "does not read PDFs" in text_only.payload["note"]


async def test_html_is_read_without_its_scripts(app: App) -> None:
    ws = app.workspace
    note = ws.create_note("Saved page", "")
    page = ws.add_attachment(note.id, html_with_scripts(), "page.html")
    result = await call(app, note.id, page.id, TEXT_ONLY)
    assert "Bring the blue raincoat." in result.payload["text"]
    assert "secretScript" not in result.payload["text"]


async def test_the_kind_comes_from_the_bytes_not_the_stored_type_or_name(app: App) -> None:
    ws = app.workspace
    note = ws.create_note("Liar", "")
    fake = ws.add_attachment(note.id, png_bytes(), "report.pdf", mime="application/pdf")
    result = await call(app, note.id, fake.id, None)
    assert result.payload["kind"] == "image" and result.payload["mime"] == "image/png"
    assert isinstance(result.blocks[0], ImagePart)


async def test_an_svg_attachment_is_refused(app: App) -> None:
    ws = app.workspace
    note = ws.create_note("Drawing", "")
    svg = ws.add_attachment(note.id, svg_bytes(), "drawing.png", mime="image/png")
    with pytest.raises(ToolError, match="SVG"):
        await call(app, note.id, svg.id, None)


async def test_the_caps_of_the_settings_apply(app: App, files: Files) -> None:
    with pytest.raises(ToolError, match="at most 1,000 bytes"):
        await call(app, files.note, files.pdf, None, pdf_bytes=1000)
    long = app.workspace.add_attachment(files.note, text_pdf(5, "word " * 50), "long.pdf")
    capped = await call(app, files.note, long.id, None, text_chars=100)
    body, marker = capped.payload["text"].split("\n\n[truncated", 1)
    assert len(body) == 100 and "100 characters" in marker


async def test_another_notes_attachment_is_not_found_and_the_notes_own_are_listed(app: App, files: Files) -> None:
    with pytest.raises(ToolError) as refused:
        await call(app, files.note, files.other_file)
    message = str(refused.value)
    assert f"has no attachment {files.other_file!r}" in message
    assert files.pdf in message and "itinerary.pdf" in message and "Map of the old town" in message
    assert "budget.pdf" not in message
    with pytest.raises(ToolError, match="has no attachment"):
        await call(app, files.note, "0" * 32)


async def test_a_note_outside_the_scope_reads_as_missing(app: App, files: Files) -> None:
    app.workspace.set_setting(SCOPE_KEY, ["Work"])
    with pytest.raises(ToolError) as out_of_scope:
        await call(app, files.hidden_note, files.hidden_file)
    with pytest.raises(ToolError) as missing:
        await call(app, "f" * 32, files.hidden_file)
    assert str(out_of_scope.value) == str(missing.value).replace("f" * 32, files.hidden_note)
    assert "Dear diary" not in str(out_of_scope.value) and "diary.pdf" not in str(out_of_scope.value)
    # An attachment of a hidden note, asked for through a visible note, is not found either.
    with pytest.raises(ToolError, match="has no attachment"):
        await call(app, files.note, files.hidden_file)
    assert (await call(app, files.note, files.pdf)).payload["status"] == "ok"


async def test_a_trashed_note_is_not_read(app: App, files: Files) -> None:
    app.workspace.delete_note(files.note)
    with pytest.raises(ToolError, match="in the trash"):
        await call(app, files.note, files.pdf)


async def test_a_missing_file_is_reported(app: App, files: Files) -> None:
    att = app.workspace.get_attachment(files.pdf)
    app.workspace.attachment_path(att.id, att.filename).unlink()
    with pytest.raises(ToolError, match="missing"):
        await call(app, files.note, files.pdf)


async def test_on_sqlite_and_postgresql_a_notes_pdf_and_png_are_read(any_app: App) -> None:
    ws = any_app.workspace
    note = ws.create_note("Trip", "")
    other = ws.create_note("Other", "")
    pdf = ws.add_attachment(note.id, text_pdf(1, "Gate B12"), "boarding.pdf")
    png = ws.add_attachment(note.id, png_bytes(), "seat.png")
    foreign = ws.add_attachment(other.id, text_pdf(1, "not yours"), "other.pdf")
    assert (await call(any_app, note.id, pdf.id, TEXT_ONLY)).payload["text"] == "Gate B12"
    assert isinstance((await call(any_app, note.id, png.id, None)).blocks[0], ImagePart)
    with pytest.raises(ToolError, match="has no attachment"):
        await call(any_app, note.id, foreign.id)


async def test_a_chat_model_reads_a_notes_pdf_fenced(app: App, files: Files) -> None:
    owner = app.workspace.ensure_owner()
    provider = scripted(app, [
        {"tool_calls": [{"name": "read_attachment", "arguments": {"note_id": files.note, "attachment_id": files.pdf}}]},
        {"text": "Your flight leaves at 09:40."},
    ])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "When does my flight leave?", controls={"model": "play:script"})
        message = await settle(chat, owner, sent.message_id)
    assert message["status"] == "complete", message
    assert "read_attachment" in {t.name for t in provider.requests[0].tools}
    result = next(r for m in provider.requests[1].messages for r in m.tool_results)
    assert not result.is_error
    assert result.content.startswith("<<UNTRUSTED_")
    fenced = result.content.split(">>\n", 1)[1]
    assert "Flight LX 123 leaves at 09:40." in fenced


@pytest.mark.parametrize(("caps", "handed_over"), [(TEXT_ONLY, False), (VISION, True)])
async def test_a_recipe_run_hands_a_notes_image_only_to_a_model_that_sees(
    app: App, files: Files, caps: ModelCapabilities, handed_over: bool
) -> None:
    """A recipe's tools learn what its model reads: the note's picture goes to a model with
    vision, and a text-only model is told it cannot see it (never sent a file it refuses)."""
    from recipe_support import running, service

    owner = app.workspace.ensure_owner()
    provider = ScriptedProvider("play", [
        {"tool_calls": [{"name": "read_attachment", "arguments": {"note_id": files.note, "attachment_id": files.png}}]},
        {"text": "Looked."},
    ], capabilities=caps)
    app.services.providers.add(provider)
    service(app).add(owner, {"name": "map", "prompt": "Describe the map.", "model": "play",
                             "tools": ["read_attachment"]})
    async with running(app):
        run = await service(app).run_now(owner, "map")
    assert run["status"] == "succeeded", run
    result = next(r for m in provider.requests[1].messages for r in m.tool_results)
    assert bool(result.blocks) is handed_over
    if handed_over:
        assert isinstance(result.blocks[0], ImagePart) and result.blocks[0].media_type == "image/png"
    else:
        assert result.is_error and "vision" in result.content
