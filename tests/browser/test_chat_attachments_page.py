"""Files in the chat, in a real Chromium against a live ``noteloom serve``: a PDF chosen with
the attach button and an image dropped on the transcript go with a message (as
``multipart/form-data``), are listed on it (the image as a thumbnail fetched with the
page's credential), the model's answer quotes the PDF, and deleting the conversation
deletes the bytes. The server's refusal (an SVG, an image for a text-only model) is shown
with the typed text and the chosen files kept; a sixth file is refused at once; the
attachment mode is saved with the chat's settings.

The model is a plugin (``reader``): it reads images (not whole PDFs) and answers with what
its last message carried, so an answer quoting the PDF can only come from the file.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from page_support import Live, served
from playwright.sync_api import expect

from attachment_support import png_bytes, scanned_pdf, svg_bytes, text_pdf
from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from plugin_site import install_plugin

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"
SECRET = "The heron nests by the old mill every Tuesday."

PLUGIN = '''
from decimal import Decimal

from noteloom.messages import ImagePart, StreamEnd, TextDelta, Usage, UsageUpdate
from noteloom.plugins import ProviderType, hookimpl
from noteloom.providers.base import ModelCapabilities


class Reader:
    """Says how many images its last user message carried, and quotes that message's text."""

    local = True
    default_model = "reader"

    def __init__(self, name):
        self.name = name

    def models(self):
        return ["reader"]

    def capabilities(self, model):
        return ModelCapabilities(vision=True, document=False)

    def cost(self, model, usage):
        return Decimal(0)

    async def aclose(self):
        return None

    async def stream(self, request):
        user = next(m for m in reversed(request.messages) if m.role == "user")
        images = sum(isinstance(p, ImagePart) for p in user.parts)
        yield TextDelta(f"I was shown {images} image{'s' if images != 1 else ''}. I read: " + " ".join(user.text.split()))
        yield UsageUpdate(Usage(10, 10))
        yield StreamEnd("end_turn")


@hookimpl
def register_providers(register):
    register(ProviderType("reader", lambda config: Reader(config.name), "answers with what it was sent", offline=True))
'''


PDF = text_pdf(1, SECRET)
SCAN = scanned_pdf()
PICTURE = png_bytes(48, 48, (30, 110, 200))
SVG = svg_bytes()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("chat-attachments")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        token = access_token(app)
    finally:
        app.close()
    site = install_plugin(home / "site", "reader_model", PLUGIN)
    (home / "noteloom.toml").write_text('[providers]\ndefault = "reader"\n\n[providers.reader]\ntype = "reader"\n',
                                        encoding="utf-8")
    with served(home, pythonpath=site) as url:
        yield Live(url, token, home, {})


@pytest.fixture(autouse=True)
def signed_in(page: Any) -> None:
    """The page has signed in and wired its controls: a file chosen or dropped before that
    would have no listener to take it."""
    expect(page.locator("#chat-app")).to_be_visible()


def file_input(name: str, mime: str, data: bytes) -> dict[str, Any]:
    return {"name": name, "mimeType": mime, "buffer": data}


def drag_files(page: Any, selector: str, files: list[tuple[str, str, bytes]], events: list[str]) -> None:
    """Dispatch drag events carrying ``files`` (name, type, bytes) on ``selector``, as a
    drag from the desktop does; one DataTransfer for them all."""
    page.evaluate(
        """([selector, files, events]) => {
            const dt = new DataTransfer();
            for (const [name, type, b64] of files) {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                dt.items.add(new File([bytes], name, { type }));
            }
            const target = document.querySelector(selector);
            for (const kind of events) {
                target.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true }));
            }
        }""",
        [selector, [[n, t, base64.b64encode(d).decode()] for n, t, d in files], events],
    )


def loaded(page: Any, image: Any) -> None:
    """Wait until ``image`` has been decoded from a blob: URL (fetched with the credential)."""
    page.wait_for_function("img => img.complete && img.naturalWidth > 0 && img.src.startsWith('blob:')",
                           arg=image.element_handle())


def files_holding(root: Path, data: bytes) -> list[Path]:
    """Every file under ``root`` whose bytes are ``data``, wherever the store keeps them."""
    return [p for p in root.rglob("*") if p.is_file() and p.stat().st_size == len(data) and p.read_bytes() == data]


def fetch_attachment(live: Live, attachment_id: str) -> httpx.Response:
    return httpx.get(f"{live.url}/api/v1/chat/attachments/{attachment_id}",
                     headers={"Authorization": f"Bearer {live.token}"}, timeout=30)


def test_a_pdf_and_a_dropped_image_go_with_a_message_and_go_with_its_conversation(page: Any, live: Live) -> None:
    page.set_input_files("#attach-input", [file_input("heron.pdf", "application/pdf", PDF)])
    drag_files(page, "#transcript", [("mill.png", "image/png", PICTURE)], ["dragenter", "dragover"])
    expect(page.locator(".conversation")).to_have_class("conversation dropping")
    expect(page.locator("#drop-hint")).to_be_visible()
    drag_files(page, "#transcript", [("mill.png", "image/png", PICTURE)], ["drop"])
    expect(page.locator("#drop-hint")).to_be_hidden()
    expect(page.locator(".conversation")).to_have_class("conversation")
    chips = page.locator("#attach-list .attach-chip")
    expect(chips).to_have_count(2)
    expect(chips.nth(0)).to_contain_text("heron.pdf")
    expect(chips.nth(0).locator(".kind-badge")).to_have_text("PDF")
    expect(chips.nth(1)).to_contain_text("mill.png")
    loaded_preview = chips.nth(1).locator("img.attach-preview")
    expect(loaded_preview).to_be_visible()
    expect(page.get_by_role("button", name="Remove heron.pdf")).to_be_visible()
    page.fill("#message", "What does the PDF say?")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#composer").screenshot(path=str(ARTIFACTS / "chat-attachments-composer.png"))

    with page.expect_request(lambda r: r.url.endswith("/api/v1/chat/send") and r.method == "POST") as sent:
        page.press("#message", "Enter")
    # (Chromium does not hand the body of a request with files to Playwright: its parts are
    # checked by the answer below.)
    assert sent.value.headers["content-type"].startswith("multipart/form-data; boundary=")

    user = page.locator(".msg.user").last
    files = user.locator(".msg-files .msg-file")
    expect(files).to_have_count(2)
    pdf_chip = user.locator(".msg-file.pdf")
    expect(pdf_chip.get_by_role("link", name="heron.pdf")).to_be_visible()
    expect(pdf_chip).to_contain_text("PDF")
    expect(pdf_chip.locator(".not-readable")).to_have_count(0)  # its text was read
    thumb = user.locator(".msg-file.image img.msg-thumb")
    expect(thumb).to_have_attribute("alt", "mill.png")
    loaded(page, thumb)
    answer = page.locator(".msg.assistant").last
    expect(answer).to_have_attribute("data-status", "complete")
    expect(answer.locator(".bubble")).to_contain_text("I was shown 1 image.")
    expect(answer.locator(".bubble")).to_contain_text(SECRET)  # only the PDF held it
    expect(page.locator("#attach-list")).to_be_hidden()  # sent: the chips are gone, the box empty
    expect(page.locator("#message")).to_have_value("")
    page.locator(".msg.user").last.screenshot(path=str(ARTIFACTS / "chat-attachments-message.png"))

    with page.expect_download() as download:  # the PDF's link downloads it, fetched with the credential
        pdf_chip.get_by_role("link", name="heron.pdf").click()
    assert download.value.suggested_filename == "heron.pdf"
    assert Path(download.value.path()).read_bytes() == PDF

    # Listed again when the conversation is drawn afresh.
    conversation_id = page.locator('#thread-list li[aria-current="true"]').get_attribute("data-id")
    page.reload()
    page.click(f'#thread-list li[data-id="{conversation_id}"] button.thread')
    user = page.locator(".msg.user").last
    expect(user.locator(".msg-file")).to_have_count(2)
    loaded(page, user.locator("img.msg-thumb"))
    ids = user.locator(".msg-file").evaluate_all("els => els.map((e) => e.dataset.attachmentId)")
    assert [fetch_attachment(live, i).content for i in ids] == [PDF, PICTURE]
    stored = files_holding(live.home, PDF) + files_holding(live.home, PICTURE)
    assert len(stored) == 2 and all("attachments" in p.relative_to(live.home).parts for p in stored), stored

    item = page.locator(f'#thread-list li[data-id="{conversation_id}"]')
    item.locator("summary").click()
    item.get_by_role("button", name="Delete").click()
    item.get_by_role("button", name="Delete").click()  # the confirmation
    expect(page.locator(f'#thread-list li[data-id="{conversation_id}"]')).to_have_count(0)
    expect(page.locator("#transcript .msg")).to_have_count(0)
    assert [fetch_attachment(live, i).status_code for i in ids] == [404, 404]
    assert files_holding(live.home, PDF) == [] and files_holding(live.home, PICTURE) == []


def test_an_svg_is_refused_by_the_server_with_the_text_and_files_kept_then_a_file_alone_is_sent(page: Any) -> None:
    page.fill("#message", "Here is my drawing")
    # The attach button works from the keyboard: Enter on it opens the file input (counted
    # here, the browser's own chooser kept shut: waiting for Playwright's chooser event raced
    # with its interception being switched on, and lost once on a loaded machine).
    page.evaluate("""() => {
        window.inputOpened = 0;
        document.getElementById("attach-input").addEventListener("click", (e) => {
            window.inputOpened += 1;
            e.preventDefault();
        });
    }""")
    page.focus("#attach-open")
    expect(page.locator("#attach-open")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_function("() => window.inputOpened === 1")
    assert page.locator("#attach-input").get_attribute("multiple") is not None
    page.set_input_files("#attach-input", [file_input("mill.png", "image/png", PICTURE)])
    drag_files(page, "#composer", [("drawing.svg", "image/svg+xml", SVG)], ["dragenter", "dragover", "drop"])
    chips = page.locator("#attach-list .attach-chip")
    expect(chips).to_have_count(2)
    page.press("#message", "Enter")
    refusal = page.locator(".msg.note .card.error")
    expect(refusal).to_contain_text("Not sent")
    expect(refusal).to_contain_text("drawing.svg")
    expect(refusal).to_contain_text("SVG")
    expect(page.locator(".msg.user")).to_have_count(0)
    expect(page.locator("#message")).to_have_value("Here is my drawing")
    expect(chips).to_have_count(2)

    # Removed from the keyboard; then the picture goes on its own, with no text at all.
    page.get_by_role("button", name="Remove drawing.svg").focus()
    page.keyboard.press("Enter")
    expect(chips).to_have_count(1)
    expect(page.get_by_role("button", name="Remove mill.png")).to_be_focused()
    page.fill("#message", "")
    page.click("#send")
    user = page.locator(".msg.user").last
    expect(user.locator(".msg-file.image")).to_have_count(1)
    expect(user.locator(".bubble")).to_have_count(0)
    loaded(page, user.locator("img.msg-thumb"))
    expect(page.locator(".msg.assistant").last.locator(".bubble")).to_contain_text("I was shown 1 image.")

    # A second message in the same conversation lists its files as it is sent; a scan has
    # no text to read, and says so quietly.
    page.set_input_files("#attach-input", [file_input("heron.pdf", "application/pdf", PDF),
                                           file_input("scan.pdf", "application/pdf", SCAN)])
    page.fill("#message", "And these?")
    page.press("#message", "Enter")
    expect(page.locator(".msg.user")).to_have_count(2)
    second = page.locator(".msg.user").nth(1)
    expect(second.locator(".msg-file.pdf")).to_have_count(2)
    expect(second.locator(".msg-file.pdf").nth(0)).to_contain_text("heron.pdf")
    expect(second.locator(".msg-file.pdf").nth(0).locator(".not-readable")).to_have_count(0)
    expect(second.locator(".msg-file.pdf").nth(1).locator(".not-readable")).to_have_text("text not readable")
    expect(page.locator(".msg.assistant").nth(1).locator(".bubble")).to_contain_text(SECRET)


def test_an_image_for_a_text_only_model_is_refused_with_a_word_to_switch_models(page: Any) -> None:
    page.click("#settings-open")
    page.select_option("#set-model", "echo:echo")
    expect(page.locator("#set-attachment-note")).to_contain_text("text only")
    page.select_option("#set-model", "reader:reader")
    expect(page.locator("#set-attachment-note")).to_contain_text("images")
    page.select_option("#set-model", "echo:echo")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    page.fill("#message", "What is in the picture?")
    page.set_input_files("#attach-input", [file_input("mill.png", "image/png", PICTURE)])
    page.press("#message", "Enter")
    refusal = page.locator(".msg.note .card.error")
    expect(refusal).to_contain_text("mill.png")
    expect(refusal).to_contain_text("switch to a model")
    expect(page.locator("#message")).to_have_value("What is in the picture?")
    expect(page.locator("#attach-list .attach-chip")).to_have_count(1)


def test_a_sixth_file_is_refused_at_once_saying_why(page: Any) -> None:
    six = [file_input(f"note{n}.txt", "text/plain", f"note {n}\n".encode()) for n in range(1, 7)]
    page.set_input_files("#attach-input", six)
    expect(page.locator("#attach-list .attach-chip")).to_have_count(5)
    expect(page.locator("#attach-error")).to_have_text(
        "A message takes at most 5 files, so “note6.txt” was not added. Remove one to add another, or send these first.")
    page.get_by_role("button", name="Remove note1.txt").click()
    expect(page.locator("#attach-error")).to_be_hidden()
    page.set_input_files("#attach-input", [six[5]])
    expect(page.locator("#attach-list .attach-chip")).to_have_count(5)
    expect(page.locator("#attach-list")).to_contain_text("note6.txt")


def test_the_attachment_mode_is_saved_with_the_chat_settings(page: Any, live: Live) -> None:
    page.click("#settings-open")
    expect(page.locator("#set-attachment-mode")).to_have_value("extract")  # the default: text only
    page.select_option("#set-attachment-mode", label="Always full file")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    page.fill("#message", "Settings first")
    page.press("#message", "Enter")
    expect(page.locator(".msg.assistant").last).to_have_attribute("data-status", "complete")
    conversations = live.api("GET", "/api/v1/chat/conversations")["conversations"]
    chat = next(c for c in conversations if c["title"] == "Settings first")
    assert chat["controls"]["attachment_mode"] == "original"

    page.click("#settings-open")
    expect(page.locator("#set-attachment-mode")).to_have_value("original")
    page.select_option("#set-attachment-mode", label="Full file when needed")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    saved = live.api("GET", f"/api/v1/chat/conversations/{chat['id']}")["controls"]
    assert saved["attachment_mode"] == "on_demand"
